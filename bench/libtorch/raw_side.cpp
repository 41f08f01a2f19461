// The libraries on their own, in the same process as both frameworks: what strata's
// backends are measured against.
//   relu     oneDNN's eltwise_forward primitive, created once, argument map built
//            once: execute + wait only (the floor of a oneDNN op call)
//   conv3x3  OpenBLAS's cblas_sgemm of the convolution's GEMM ([64, 576] x
//            [576, 8*56*56], and per image), and oneDNN's own convolution primitive
//            with tensors already in the layouts it picked (no reorders): the
//            ceilings of the openblas and onednn convolutions.
#include <cstdlib>
#include <memory>
#include <vector>

#include "bench/libtorch/cases.h"
#include "strata/backends/static_backends.h"

#ifdef STRATA_HAVE_BACKEND_OPENBLAS
#include <cblas.h>
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
#include <dnnl.hpp>
#endif

namespace strata_bench {

namespace {

std::shared_ptr<std::vector<float>> buffer(int64_t n, float scale) {
  auto v = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) (*v)[static_cast<size_t>(i)] = bench_value(i, scale);
  return v;
}

#ifdef STRATA_HAVE_BACKEND_ONEDNN
struct OneDnn {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::shared_ptr<std::vector<float>>> keep;
  void run() {
    prim.execute(strm, args);
    strm.wait();
  }
};

Case onednn_relu(int64_t n) {
  auto s = std::make_shared<OneDnn>();
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  s->prim = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, md, 0.f, 0.f}, s->eng));
  s->keep = {buffer(n, 1.0f), buffer(n, 0.0f)};
  s->args = {{DNNL_ARG_SRC, dnnl::memory(md, s->eng, s->keep[0]->data())},
             {DNNL_ARG_DST, dnnl::memory(md, s->eng, s->keep[1]->data())}};
  return {"raw", "onednn", "eltwise execute", [s] { s->run(); }, {}};
}

Case onednn_conv(bool bf16) {
  using dnnl::memory;
  auto s = std::make_shared<OneDnn>();
  const memory::dims src{kConvN, kConvC, kConvHW, kConvHW}, wei{kConvK, kConvC, 3, 3},
      dst{kConvN, kConvK, kConvHW, kConvHW};
  const memory::data_type dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  auto any = [dt](const memory::dims& d) { return memory::desc(d, dt, memory::format_tag::any); };
  const dnnl::convolution_forward::primitive_desc pd({dnnl::prop_kind::forward_inference,
                                                      dnnl::algorithm::convolution_direct,
                                                      any(src),
                                                      any(wei),
                                                      any(dst),
                                                      {1, 1},
                                                      {1, 1},
                                                      {1, 1}},
                                                     s->eng);
  s->prim = dnnl::convolution_forward(pd);
  // Values are irrelevant to the timing; the primitive's own layouts, zero-filled.
  s->args = {{DNNL_ARG_SRC, memory(pd.src_desc(), s->eng)},
             {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), s->eng)},
             {DNNL_ARG_DST, memory(pd.dst_desc(), s->eng)}};
  for (auto& [arg, m] : s->args) std::fill_n(static_cast<char*>(m.get_data_handle()), m.get_desc().get_size(), 0);
  return {
      "raw", "onednn", std::string("conv primitive, own layouts (") + pd.impl_info_str() + ")", [s] { s->run(); }, {}};
}
#endif

#ifdef STRATA_HAVE_BACKEND_OPENBLAS
// `times` GEMMs per call: 3 stands for forward + backward data + backward weight.
Case openblas_sgemm(bool per_image, int times = 1) {
  const int64_t m = kConvK, k = kConvC * 9, n_img = kConvHW * kConvHW;
  auto a = buffer(m * k, 0.01f), b = buffer(k * n_img * kConvN, 0.02f), c = buffer(m * n_img * kConvN, 0.f);
  const std::string name = per_image ? "sgemm per image" : "sgemm whole batch";
  return {"raw",
          "openblas",
          times == 1 ? name : name + " x" + std::to_string(times),
          [=] {
            for (int t = 0; t < times; ++t) {
              if (per_image) {
                for (int64_t i = 0; i < kConvN; ++i)
                  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n_img, k, 1.f, a->data(), k,
                              b->data() + i * k * n_img, n_img, 0.f, c->data() + i * m * n_img, n_img);
              } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n_img * kConvN, k, 1.f, a->data(), k,
                            b->data(), n_img * kConvN, 0.f, c->data(), n_img * kConvN);
              }
            }
          },
          {}};
}
#endif

}  // namespace

std::vector<Case> raw_cases(const Workload& w) {
  std::vector<Case> out;
  if (w.kind == Kind::relu) {
#ifdef STRATA_HAVE_BACKEND_ONEDNN
    out.push_back(onednn_relu(w.numel));
#endif
  } else if (w.kind == Kind::conv_fwd) {
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
    if (!w.bf16) {
      out.push_back(openblas_sgemm(false));
      out.push_back(openblas_sgemm(true));
    }
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
    out.push_back(onednn_conv(w.bf16));
#endif
  } else if (w.kind == Kind::conv_train && !w.bf16) {
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
    out.push_back(openblas_sgemm(false, 3));  // the ceiling, measured beside the convolutions
#endif
  }
  return out;
}

int openblas_threads() {
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
  return openblas_get_num_threads();
#else
  return -1;
#endif
}

std::vector<std::string> raw_describe() {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  return {std::string("OPENBLAS_CORETYPE=") + (coretype ? coretype : "(unset)") +
          " (inherited from the environment; this bench never sets it)"};
}

}  // namespace strata_bench
