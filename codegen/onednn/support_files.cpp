#include "strata/codegen/onednn/support_files.h"

#include "strata/codegen/onednn/snippets.h"

namespace strata::codegen::onednn {

std::string model_cpp_prologue(const std::string& includes) {
  return R"cg(#include "model.h"

#include <dnnl.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <unordered_map>
)cg" + includes + R"cg(
#include "weights.h"

namespace generated {

namespace {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using dt = memory::data_type;

)cg" + std::string(k_thread_rule) + "\n" + k_staging + R"cg(
// The threads a call's work is worth under the rule above, with the OpenMP pool this
// process has: oneDNN splits work by the team size it sees when it makes a primitive and
// when it runs it, so the results are bitwise those strata computes only with its rule.
int threads_of(int64_t units, int64_t grain) { return threads_for(Work{units, grain}, ScopedOmpThreads::max_threads()); }

// A weight or bias in the layout the primitive wants, re-laid out once here. oneDNN 2.6
// reorders into its Winograd weight layout from plain [K, C, R, S] only: other (versioned)
// weights go there through a plain copy.
memory constant(const memory::desc& user_md, const memory::desc& want, bool versioned, const void* data,
                const dnnl::engine& eng, dnnl::stream& strm) {
  memory user(user_md, eng, const_cast<void*>(data));
  if (want == user_md) return user;
  memory laid_out(want, eng);
  try {
    dnnl::reorder re(user, laid_out);
    re.execute(strm, user, laid_out);
  } catch (const dnnl::error&) {
    const memory::desc plain(user_md.dims(), user_md.data_type(), memory::format_tag::abcd);
    if (!versioned || user_md == plain) throw;
    memory staged(plain, eng);
    dnnl::reorder(user, staged).execute(strm, user, staged);
    dnnl::reorder(staged, laid_out).execute(strm, staged, laid_out);
  }
  strm.wait();
  return laid_out;
}

memory::desc any_like(const memory::desc& md) { return memory::desc(md.dims(), md.data_type(), memory::format_tag::any); }

// A convolution forward with oneDNN's choice of layouts; Winograd first where allowed (the
// direct algorithm where oneDNN has no Winograd kernel for the CPU or shape).
dnnl::convolution_forward::primitive_desc conv_pd(prop_kind prop, bool winograd, const memory::desc& src,
                                                  const memory::desc& wei, const memory::desc& bias,
                                                  const memory::desc& dst, const memory::dims& strides,
                                                  const memory::dims& dilates, const memory::dims& pad,
                                                  const dnnl::primitive_attr& attr, const dnnl::engine& eng) {
  auto make = [&](algorithm alg) {
    const dnnl::convolution_forward::desc d(prop, alg, any_like(src), any_like(wei),
                                            bias.is_zero() ? bias : any_like(bias), any_like(dst), strides, dilates,
                                            pad, pad);
    return dnnl::convolution_forward::primitive_desc(d, attr, eng);
  };
  if (winograd) {
    try {
      return make(algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
    }
  }
  return make(algorithm::convolution_direct);
}

// The epilogue as post-ops: the residual as a sum into dst, then ReLU.
dnnl::primitive_attr post_ops(bool sum, bool relu) {
  dnnl::post_ops po;
  if (sum) po.append_sum(1.f);
  if (relu) po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

// A descriptor oneDNN may refuse (a view whose rows overlap the next ones' span).
std::optional<memory::desc> try_desc(const memory::dims& dims, const memory::dims& strides) {
  try {
    return memory::desc(dims, dt::f32, strides);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

// One primitive call: its primitive, the arena buffers it reads and writes, its arguments,
// and for a convolution with a residual the reorder of the residual into its dst.
struct Call {
  dnnl::primitive prim;
  Staged src, dst;
  std::unordered_map<int, memory> args;
  memory z;
  dnnl::reorder z_into_dst;
  bool copies_z = false;
};

struct ArenaDeleter {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

}  // namespace
)cg";
}

std::string train_prologue() {
  return R"cg(
namespace {

// strata's own plain loops and dropout's mask, as they are (codegen/embed_snippets.cmake).
#define STRATA_HOST_DEVICE
// Each call's block below is a lambda kept out of line: many small functions compile several
// times faster than one of thousands of lines.
#if defined(__GNUC__)
#define OUT_OF_LINE __attribute__((noinline))
#else
#define OUT_OF_LINE
#endif
)cg" + std::string(k_dropout_rng) + "\n" + k_train_loops + R"cg(
// One primitive call of the training step: its inputs staged into the layouts the primitive
// chose (pulled at every call: a trained weight changes every step), its output pushed back;
// for max pooling's backward, the forward run first for the workspace.
struct TrainCall {
  dnnl::primitive prim, pre;
  std::vector<Staged> in;
  Staged out;
  std::unordered_map<int, memory> args, pre_args;
  bool has_pre = false;
  bool push = true;  // false: the output leaves the primitive's layout by a loop of strata's after run()
  void run(dnnl::stream& strm) {
    for (Staged& s : in) s.pull(strm);
    if (has_pre) pre.execute(strm, pre_args);
    prim.execute(strm, args);
    if (push) out.push(strm);
    strm.wait();
  }
};

}  // namespace
)cg";
}

std::string transformer_prologue() {
  return R"cg(
namespace {

// strata's own loops for a GPT, as they are (codegen/embed_snippets.cmake): layer norm's rows and
// attention's (batch, head) pairs with their backward (backends/cpu/transformer_ops.h), the rows of
// index_add and a sum over one dim (tensor_ops.h), and the element-wise formulas' rows
// (ops/table/pointwise.def) as functions pointwise::<name>(x, p0, p1) and their derivatives
// pointwise::<name>_bwd(x, y, dy, p0, p1) in the math they call (ops/table/pointwise.h).
)cg" + std::string(k_transformer_loops) + R"cg(
namespace pointwise {
#define STRATA_POINTWISE_FN inline
)cg" + k_pointwise_math + R"cg(
#define STRATA_UNARY(name, params, fwd, bwd, domain)                                       \
  template <class A>                                                                      \
  inline A name(A x, [[maybe_unused]] double p0, [[maybe_unused]] double p1) { return fwd; } \
  template <class A>                                                                      \
  inline A name##_bwd([[maybe_unused]] A x, [[maybe_unused]] A y, A dy, [[maybe_unused]] double p0, \
                      [[maybe_unused]] double p1) {                                       \
    return bwd;                                                                           \
  }
)cg" + k_pointwise_rows + R"cg(#undef STRATA_UNARY
}  // namespace pointwise

// f(offsets) for every index of `sizes` in row-major order, offsets[k] the index's offset in view
// k by strides[k]: the walk of a strided element-wise loop (the element is strata's).
template <size_t D, class F>
void for_each_offset(const int64_t (&sizes)[D], const int64_t (&strides)[3][D], F&& f) {
  int64_t n = 1;
  for (size_t d = 0; d < D; ++d) n *= sizes[d];
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, o[3] = {0, 0, 0};
    for (size_t d = D; d-- > 0;) {
      const int64_t at = rest % sizes[d];
      rest /= sizes[d];
      for (int k = 0; k < 3; ++k) o[k] += at * strides[k][d];
    }
    f(o);
  }
}

}  // namespace
)cg";
}

std::string main_cpp(bool token_ids) {
  const std::string in_type = token_ids ? "int64_t" : "float";
  return std::string(token_ids ? R"cg(// Runs the generated model on a tensor file: reads a NumPy .npy input (int64 token ids in
// [0, kInputLimit), C order, the shape the code was generated for), writes the logits as .npy
// (float32). With REPEAT, also runs the model that many more times and prints the median time of
// one run.)cg"
                               : R"cg(// Runs the generated model on a tensor file: reads a NumPy .npy input (float32, C order,
// the shape the code was generated for), writes the output as .npy. With REPEAT, also runs
// the model that many more times and prints the median time of one run.)cg") +
         R"cg(

//   model_run weights.bin input.npy output.npy [REPEAT]
// Exit status: 0 done, 1 an error (said on stderr), 2 a usage error.
)cg" + npy_helpers() + (token_ids ? range_check() : std::string()) + R"cg(int main(int argc, char** argv) {
  const int repeat = argc == 5 ? std::atoi(argv[4]) : 0;
  if ((argc != 4 && argc != 5) || repeat < 0 || (argc == 5 && repeat == 0)) {
    std::fprintf(stderr, "usage: %s WEIGHTS INPUT.npy OUTPUT.npy [REPEAT > 0]\n", argv[0]);
    return 2;
  }
  try {
    const std::vector<int64_t> in_shape(std::begin(generated::kInputSizes), std::end(generated::kInputSizes));
    const std::vector<int64_t> out_shape(std::begin(generated::kOutputSizes), std::end(generated::kOutputSizes));
)cg" + "    const std::vector<" + in_type + "> x = read_npy<" + in_type + ">(argv[2], in_shape);\n" +
         (token_ids ? "    check_range(x, generated::kInputLimit, argv[2], \"token\");\n" : "") + R"cg(    generated::Model model(argv[1]);
    int64_t n = 1;
    for (int64_t d : out_shape) n *= d;
    std::vector<float> y(static_cast<size_t>(n));
    model.run(x.data(), y.data());
    write_npy(argv[3], out_shape, y);
    if (repeat > 0) {
      std::vector<double> ms;
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        model.run(x.data(), y.data());
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("time per run: %.3f ms median (min %.3f, max %.3f) over %d runs after 1\n", ms[ms.size() / 2],
                  ms.front(), ms.back(), repeat);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}
)cg";
}

std::string cmake_lists(const std::string& project, const std::string& program) {
  return "# Generated by strata_codegen: builds the model as a static library and " + program + ", its\n"
         "# command-line program. Needs oneDNN (Debian: libdnnl-dev) and OpenMP only.\n"
         "cmake_minimum_required(VERSION 3.16)\n"
         "project(" + project + " LANGUAGES CXX)\n"
         "set(CMAKE_CXX_STANDARD 17)\n"
         "set(CMAKE_CXX_STANDARD_REQUIRED ON)\n"
         "if(NOT CMAKE_BUILD_TYPE)\n"
         "  set(CMAKE_BUILD_TYPE Release)\n"
         "endif()\n"
         "find_package(dnnl CONFIG REQUIRED)\n"
         "find_package(OpenMP REQUIRED)\n"
         "add_library(model STATIC model.cpp weights.cpp)\n"
         "target_link_libraries(model PUBLIC DNNL::dnnl OpenMP::OpenMP_CXX)\n"
         "add_executable(" + program + " main.cpp)\n"
         "target_link_libraries(" + program + " PRIVATE model)\n";
}

}  // namespace strata::codegen::onednn
