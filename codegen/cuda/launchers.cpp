// The prediction's launchers, and kernels.h and kernels.cu assembled from the launchers a program
// calls (launchers.h).
#include "strata/codegen/cuda/launchers.h"

#include <cctype>

#include "strata/codegen/cuda/snippets.h"
#include "strata/core/error.h"
#include "strata/core/shape.h"

namespace strata::codegen::cuda {

const std::vector<Launcher>& prediction_launchers() {
  static const std::vector<Launcher> table = {
      {"binary", {"binary"}, {}, "", R"cg(
// strata's vectorised form where every operand is 16-byte aligned, else one element at a time: the
// same operation on each element either way.
template <class Op>
void binary(cudaStream_t s, const float* a, const float* b, float* y, int64_t n, const char* what) {
  if (n <= 0) return;
  if (n >= 4 && aligned16(a) && aligned16(b) && aligned16(y))
    dense_binary_kernel<float, 4, Op><<<grid(n / 4), kThreads, 0, s>>>(a, b, y, n, Op{});
  else
    dense_binary_kernel<float, 1, Op><<<grid(n), kThreads, 0, s>>>(a, b, y, n, Op{});
  check_launch(what);
}
)cg"},
      {"add", {"binary"}, {"binary"}, R"cg(
// y = a + b over n dense elements.
void add(cudaStream_t s, const float* a, const float* b, float* y, int64_t n);
)cg", R"cg(
void add(cudaStream_t s, const float* a, const float* b, float* y, int64_t n) {
  binary<AddOp<float>>(s, a, b, y, n, "add");
}
)cg"},
      {"relu", {"binary"}, {"binary"}, R"cg(
// y = x > 0 ? x : 0 over n dense elements.
void relu(cudaStream_t s, const float* x, float* y, int64_t n);
)cg", R"cg(
void relu(cudaStream_t s, const float* x, float* y, int64_t n) { binary<ReluOp<float>>(s, x, x, y, n, "relu"); }
)cg"},
      {"conv_epilogue", {"conv_epilogue"}, {}, R"cg(
// y = relu?(y + bias[channel] + z) over a dense NCHW y of n elements, c channels of hw pixels.
void conv_epilogue(cudaStream_t s, float* y, const float* bias, const float* z, int64_t n, int64_t c, int64_t hw,
                   bool relu);
)cg", R"cg(
void conv_epilogue(cudaStream_t s, float* y, const float* bias, const float* z, int64_t n, int64_t c, int64_t hw,
                   bool relu) {
  if (n <= 0) return;
  conv_epilogue_dense_kernel<float, false><<<grid(n), kThreads, 0, s>>>(
      y, bias, z, static_cast<uint32_t>(n), static_cast<uint32_t>(c), static_cast<uint32_t>(hw), relu);
  check_launch("conv_epilogue_dense_kernel");
}
)cg"},
      {"global_avg_pool", {"global_avg_pool"}, {}, R"cg(
// y[n, c] = the mean of x's (n, c) plane, x [N, C, H, W] with strides sx, y with strides sy.
void global_avg_pool(cudaStream_t s, const float* x, const int64_t (&sizes)[4], const int64_t (&sx)[4], float* y,
                     const int64_t (&sy)[2]);
)cg", R"cg(
void global_avg_pool(cudaStream_t s, const float* x, const int64_t (&sizes)[4], const int64_t (&sx)[4], float* y,
                     const int64_t (&sy)[2]) {
  // One warp per (n, c) plane, as strata launches it: the plane's sum is the warp's, in a fixed order.
  const int64_t planes = sizes[0] * sizes[1];
  if (planes == 0) return;
  gap_fwd_kernel<float><<<static_cast<unsigned>((planes * 32 + 255) / 256), 256, 0, s>>>(
      x, sizes[0], sizes[1], sizes[2], sizes[3], sx[0], sx[1], sx[2], sx[3], y, sy[0], sy[1]);
  check_launch("gap_fwd_kernel");
}
)cg"},
      {"global_avg_pool_nhwc", {"global_avg_pool_nhwc"}, {}, R"cg(
// The same mean where strata took x for channels-last (its channels 1 apart: a channels-last x, or
// an NCHW x of 1x1 planes): one thread per (n, c), as strata launches it.
void global_avg_pool_nhwc(cudaStream_t s, const float* x, const int64_t (&sizes)[4], const int64_t (&sx)[4],
                          float* y, const int64_t (&sy)[2]);
)cg", R"cg(
void global_avg_pool_nhwc(cudaStream_t s, const float* x, const int64_t (&sizes)[4], const int64_t (&sx)[4],
                          float* y, const int64_t (&sy)[2]) {
  const int64_t planes = sizes[0] * sizes[1];
  if (planes == 0) return;
  gap_fwd_nhwc_kernel<float><<<static_cast<unsigned>((planes + 255) / 256), 256, 0, s>>>(
      x, sizes[0], sizes[1], sizes[2], sizes[3], sx[0], sx[1], sx[2], sx[3], y, sy[0], sy[1]);
  check_launch("gap_fwd_nhwc_kernel");
}
)cg"},
      {"strided_of", {}, {}, "", R"cg(
// strata's indexing of N operands over nd dimensions of `sizes` (n elements in all) from a launcher's
// arrays: operand i's strides at strides[i] (0 broadcasts).
template <int N>
Strided<N> strided_of(int nd, int64_t n, const int64_t* sizes, const int64_t* const (&strides)[N]) {
  Strided<N> st;
  st.nd = nd;
  st.n = n;
  for (int d = 0; d < nd; ++d) {
    st.sizes[d] = sizes[d];
    for (int i = 0; i < N; ++i) st.strides[i][d] = strides[i][d];
  }
  return st;
}
)cg"},
      {"convert", {"convert"}, {"strided_of"}, R"cg(
// dst = src element by element over an indexing strata coalesced: nd dimensions of `sizes`, each
// operand with its own strides (0 broadcasts), n elements in all.
void convert(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* src_strides,
             const int64_t* dst_strides, const float* src, float* dst);
)cg", R"cg(
void convert(cudaStream_t s, int nd, int64_t n, const int64_t* sizes, const int64_t* src_strides,
             const int64_t* dst_strides, const float* src, float* dst) {
  if (n <= 0) return;
  elementwise_kernel<2, ConvertFn<float, float>><<<grid(n), kThreads, 0, s>>>(
      strided_of<2>(nd, n, sizes, {src_strides, dst_strides}), ConvertFn<float, float>{src, dst});
  check_launch("elementwise_kernel (convert)");
}
)cg"},
      {"gemv", {"gemv"}, {}, R"cg(
// y = x w^T (+ b) for m <= 4 rows (x [m, k] rows ldx apart, w [n, k] rows ldw apart, b with
// stride bs or null, y with strides ys0, ys1): strata's few-rows linear kernel, v elements a load.
void gemv(cudaStream_t s, int v, const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n,
          int64_t k, int64_t ldx, int64_t ldw, int64_t bs, int64_t ys0, int64_t ys1);
)cg", R"cg(
template <int V>
void gemv_rows(cudaStream_t s, const GemvParams<float>& p) {
  const unsigned blocks = static_cast<unsigned>((p.n * 32 + kGemvThreads - 1) / kGemvThreads);
  switch (p.m) {
    case 1: gemv_kernel<float, V, 1><<<blocks, kGemvThreads, 0, s>>>(p); break;
    case 2: gemv_kernel<float, V, 2><<<blocks, kGemvThreads, 0, s>>>(p); break;
    case 3: gemv_kernel<float, V, 3><<<blocks, kGemvThreads, 0, s>>>(p); break;
    default: gemv_kernel<float, V, 4><<<blocks, kGemvThreads, 0, s>>>(p); break;
  }
  check_launch("gemv_kernel");
}

void gemv(cudaStream_t s, int v, const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n,
          int64_t k, int64_t ldx, int64_t ldw, int64_t bs, int64_t ys0, int64_t ys1) {
  if (m < 1 || m > 4) throw std::runtime_error("gemv: 1 to 4 rows, got " + std::to_string(m));
  const GemvParams<float> p{x, w, b, y, m, n, k, ldx, ldw, bs, ys0, ys1};
  if (v == 4)
    gemv_rows<4>(s, p);
  else
    gemv_rows<1>(s, p);
}
)cg"},
      {"s2d_geom", {"space_to_depth"}, {}, "", R"cg(
// The geometry strata's space_to_depth kernels take, with 64-bit indices: data movement only, so
// where strata may take 32-bit ones they move the same elements. `channels_inner`: the written
// tensor is visited channels innermost.
S2dGeom<uint64_t> s2d_geom(const int64_t (&xs)[4], const int64_t (&xst)[4], const int64_t (&ys)[4],
                           const int64_t (&yst)[4], int block, int pad_h, int pad_w, bool channels_inner) {
  const auto c = [](int64_t v) { return static_cast<uint64_t>(v); };
  return {c(xs[0]),  c(xs[1]),  c(xs[2]),  c(xs[3]),  c(ys[1]),  c(ys[2]),  c(ys[3]),   c(xst[0]),     c(xst[1]),
          c(xst[2]), c(xst[3]), c(yst[0]), c(yst[1]), c(yst[2]), c(yst[3]), c(block), c(pad_h), c(pad_w),
          channels_inner};
}
)cg"},
      {"space_to_depth", {"space_to_depth"}, {"s2d_geom"}, R"cg(
// y [N, K, Ho, Wo] = x [N, C, H, W]'s block x block pixel blocks as channels, x padded with zeros by
// (pad_h, pad_w): strata's space_to_depth (ResNet's stem on the GPU).
void space_to_depth(cudaStream_t s, const float* x, const int64_t (&xs)[4], const int64_t (&xst)[4], float* y,
                    const int64_t (&ys)[4], const int64_t (&yst)[4], int block, int pad_h, int pad_w);
)cg", R"cg(
void space_to_depth(cudaStream_t s, const float* x, const int64_t (&xs)[4], const int64_t (&xst)[4], float* y,
                    const int64_t (&ys)[4], const int64_t (&yst)[4], int block, int pad_h, int pad_w) {
  const int64_t total = ys[0] * ys[1] * ys[2] * ys[3];
  if (total == 0) return;
  const auto g = s2d_geom(xs, xst, ys, yst, block, pad_h, pad_w, yst[1] == 1 && ys[1] > 1);
  space_to_depth_kernel<float, uint64_t><<<grid(total), kThreads, 0, s>>>(x, y, g, static_cast<uint64_t>(total));
  check_launch("space_to_depth_kernel");
}
)cg"},
  };
  return table;
}

std::set<std::string> launchers_called(const std::vector<CallText>& texts) {
  std::set<std::string> called;
  const std::string prefix = "kernels::";
  for (const CallText& t : texts)
    for (size_t at = t.run.find(prefix); at != std::string::npos; at = t.run.find(prefix, at)) {
      at += prefix.size();
      size_t end = at;
      while (end < t.run.size() && (std::isalnum(static_cast<unsigned char>(t.run[end])) || t.run[end] == '_')) ++end;
      called.insert(t.run.substr(at, end - at));
    }
  return called;
}

namespace {

// The entries to write: the called launchers and the helpers they need, in the tables' order.
struct Selection {
  std::vector<const Launcher*> entries;
  std::set<std::string> tags;
  bool train = false;  // a training launcher: the op table's pieces and the untagged training blocks too
};

Selection select(const std::set<std::string>& called) {
  std::set<std::string> want = called;
  const auto each = [](auto&& f) {
    for (const auto* table : {&prediction_launchers(), &train_launchers(), &transformer_launchers()})
      for (const Launcher& l : *table) f(l, table == &train_launchers());
  };
  for (const std::string& name : called) {
    bool known = false;
    each([&](const Launcher& l, bool) {
      if (name != l.name) return;
      known = true;
      want.insert(l.needs.begin(), l.needs.end());
    });
    STRATA_CHECK(known, "strata_codegen: model.cpp calls kernels::", name, ", which no launcher defines (internal "
                 "error)");
  }
  Selection s;
  each([&](const Launcher& l, bool train) {
    if (!want.count(l.name)) return;
    s.entries.push_back(&l);
    s.tags.insert(l.tags.begin(), l.tags.end());
    s.train = s.train || train;
  });
  return s;
}

std::string blocks(const SnippetBlock* b, int n, const std::set<std::string>& tags) {
  std::string text;
  for (int i = 0; i < n; ++i)
    if (!*b[i].tag || tags.count(b[i].tag)) text += b[i].text;
  return text;
}

}  // namespace

std::string kernels_h(const std::set<std::string>& called) {
  std::string decls;
  for (const Launcher* l : select(called).entries) decls += l->decl;
  return R"cg(#pragma once
// Launchers of strata's own kernels (kernels.cu, which carries them as strata's source), for the
// calls strata's cuda backend runs with its own kernels rather than a library's.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

namespace generated::kernels {
)cg" + decls + R"cg(
}  // namespace generated::kernels
)cg";
}

std::string kernels_cu(const std::set<std::string>& called) {
  const Selection s = select(called);
  std::string code = blocks(k_cuda_kernels_blocks, k_cuda_kernels_block_count, s.tags);
  // GELU's row of strata's formulas (pointwise.def) in their math (pointwise.h), on the device.
  if (s.tags.count("gelu"))
    code += "namespace pointwise {\n#define STRATA_POINTWISE_FN __host__ __device__ inline\n" +
            std::string(k_pointwise_math) +
            "#define STRATA_UNARY(name, params, fwd, bwd, domain) \\\n  template <class A> \\\n"
            "  STRATA_POINTWISE_FN A name(A x, [[maybe_unused]] double p0, [[maybe_unused]] double p1) { return fwd; }\n" +
            k_pointwise_rows + "#undef STRATA_UNARY\n}  // namespace pointwise\n";
  if (s.train)
    code = "namespace ops {\n" + std::string(k_cuda_train_ops) + k_dropout_rng + "}  // namespace ops\n" + code +
           blocks(k_cuda_train_kernels_blocks, k_cuda_train_kernels_block_count, s.tags);
  std::string helpers, defs;
  for (const Launcher* l : s.entries) (*l->decl ? defs : helpers) += l->def;
  return std::string(R"cg(// strata's own kernels, as strata's cuda backend runs them: the code between the launchers'
// namespace lines below is strata's (backends/cuda, its "codegen:begin cuda_kernels" blocks and,
// for a training step, "cuda_train_kernels"; the op table's pieces they use), written here by
// strata_codegen as it is: the blocks of the kernels this model runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels.h"

#define STRATA_HOST_DEVICE __host__ __device__

namespace generated::kernels {
namespace strata_code {

inline constexpr int kMaxDims = )cg") + std::to_string(strata::kMaxDims) + ";\n" + code + R"cg(
}  // namespace strata_code

namespace {

using namespace strata_code;

[[maybe_unused]] void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(kernel) + ": " + cudaGetErrorString(e));
}

// Grid-stride kernels: the grid changes which thread computes an element, never its value.
[[maybe_unused]] unsigned grid(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

[[maybe_unused]] bool aligned16(const void* p) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0;
}
)cg" + helpers + R"cg(
}  // namespace
)cg" + defs + R"cg(
}  // namespace generated::kernels
)cg";
}

}  // namespace strata::codegen::cuda
