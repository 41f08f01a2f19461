// The eigen backend's object, its threads, what it supports, and the view helpers
// of context.h.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "strata/backends/cpu/capabilities.h"
#include "strata/backends/eigen/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

namespace eigen {

namespace {

// OMP_NUM_THREADS (its first entry), as the onednn and openblas backends' OpenMP
// pools read it; else one thread per CPU this process may run on.
int thread_count() {
  if (const char* s = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(s, &end, 10);
    if (end != s && n > 0) return static_cast<int>(std::min<long>(n, 1024));
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// OMP_WAIT_POLICY=passive: idle threads sleep at once, as libgomp's do.
bool spinning() {
  const char* s = std::getenv("OMP_WAIT_POLICY");
  return !(s && strcasecmp(s, "passive") == 0);
}

}  // namespace

Context::Context()
    : threads(thread_count()), spinning(eigen::spinning()), pool(threads, spinning), device(&pool, threads),
      slots(static_cast<size_t>(threads)) {}

StridedPlan strided_plan(const TensorView& view, std::string_view op, std::string_view arg, bool read_only) {
  StridedPlan p;
  const int nd = view.dim(), lead = kRank - nd;
  for (int i = 0; i < kRank; ++i) p.logical[i] = i < lead ? 1 : view.sizes[i - lead];
  // A read view's repeated dims (stride 0) are laid out as size 1 and broadcast back.
  TensorView v = view;
  for (int i = 0; i < kRank; ++i) p.repeat[i] = 1;
  for (int d = 0; d < nd && read_only; ++d)
    if (v.strides[d] == 0 && v.sizes[d] > 1) {
      p.repeat[lead + d] = v.sizes[d];
      v.sizes[d] = 1;
    }
  // Dimensions with more than one element, outermost (largest stride) first.
  std::array<int, kMaxDims> dims{};
  int k = 0;
  for (int d = 0; d < nd; ++d)
    if (v.sizes[d] != 1) dims[k++] = d;
  std::stable_sort(dims.begin(), dims.begin() + k, [&](int a, int b) { return v.strides[a] > v.strides[b]; });
  bool ok = true;
  for (int j = 0; j < k && ok; ++j) {
    const int64_t s = v.strides[dims[j]];
    ok = s > 0;
    if (ok && j + 1 < k) {
      const int64_t inner = v.strides[dims[j + 1]];
      ok = inner > 0 && s % inner == 0 && s / inner >= v.sizes[dims[j + 1]];
    }
  }
  STRATA_CHECK(ok, "eigen: ", op, ": ", arg, " with sizes ", v.sizes.str(), " and strides ", v.strides.str(),
               " is not a slice or permutation of a dense tensor (overlapping or non-nesting strides); pass a "
               "contiguous copy");
  // Envelope (rank kRank+1): leading 1s, then the outermost size, the ratio of each
  // stride to the next, and the innermost stride as a last dimension sliced to 1.
  const int pad = kRank - k;
  for (int i = 0; i < kRank + 1; ++i) p.envelope[i] = p.extents[i] = 1;
  for (int i = 0; i < kRank; ++i) p.reshaped[i] = 1;
  for (int j = 0; j < k; ++j) {
    const int d = dims[j];
    p.envelope[pad + j] = j == 0 ? v.sizes[d] : v.strides[dims[j - 1]] / v.strides[d];
    p.extents[pad + j] = p.reshaped[pad + j] = v.sizes[d];
  }
  p.envelope[kRank] = k > 0 ? v.strides[dims[k - 1]] : 1;
  // Logical dimension i comes from reshaped position shuffle[i]: dims with more than
  // one element from their place in the stride order, size-1 dims from the leading 1s.
  int next_one = 0;
  for (int i = 0; i < kRank; ++i) {
    const int d = i - lead;
    int pos = -1;
    for (int j = 0; j < k && d >= 0; ++j)
      if (dims[j] == d) pos = pad + j;
    p.shuffle[i] = pos >= 0 ? pos : next_one++;
  }
  return p;
}

Layout layout_of(const TensorView& v) {
  return v.is_channels_last() && !v.is_contiguous() ? Layout::nhwc : Layout::nchw;
}
bool dense_in(const TensorView& v, Layout l) { return l == Layout::nhwc ? v.is_channels_last() : v.is_contiguous(); }
Dims<4> dims_in(const TensorView& v, Layout l) {
  const Index n = v.sizes[0], c = v.sizes[1], h = v.sizes[2], w = v.sizes[3];
  return l == Layout::nhwc ? Dims<4>{n, h, w, c} : Dims<4>{n, c, h, w};
}

}  // namespace eigen

EigenBackend::EigenBackend() : ctx_(std::make_unique<eigen::Context>()) {}
EigenBackend::~EigenBackend() = default;
EigenBackend::EigenBackend(EigenBackend&&) noexcept = default;
EigenBackend& EigenBackend::operator=(EigenBackend&&) noexcept = default;

// f32 and f64 for every op (Eigen's kernels are templates over the scalar); any dtype
// for fill and copy, which move bits or convert element by element.
const Capabilities& EigenBackend::capabilities() const { return cpu::kEveryOpInF32AndF64; }

int EigenBackend::threads() const { return ctx_->threads; }

std::string EigenBackend::describe() const {
  return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION) + " (SIMD: " + Eigen::SimdInstructionSetsInUse() +
         "), ThreadPoolDevice threads=" + std::to_string(ctx_->threads) +
         " spinning=" + (ctx_->spinning ? "on" : "off");
}

BackendFactoryResult make_backend_eigen() { return {std::make_unique<BackendAdapter<EigenBackend>>(), {}}; }

}  // namespace strata::backends
