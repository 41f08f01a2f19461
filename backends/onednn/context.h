#pragma once
// Internal to backends/onednn: the engine, the stream and the primitive cache one
// OneDnnBackend owns, and the helpers every op file uses (memory descriptors from
// strata's views, staging through the layouts a primitive prefers, error mapping).
// Written against oneDNN 2.6's C++ API (operation descriptors + primitive_desc).
#include <dnnl.hpp>
#include <dnnl_debug.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "strata/backends/api/backend.h"
#include "strata/backends/cpu/threads.h"
#include "strata/backends/onednn/call_observer.h"
#include "strata/backends/onednn/descriptor_rules.h"
#include "strata/backends/onednn/onednn_backend.h"
#include "strata/core/error.h"

namespace strata::backends::onednn {

using dnnl::memory;
using Dims = memory::dims;
using Args = std::unordered_map<int, memory>;

// Primitive cache key: the op, then every view's dtype, sizes and strides and the
// op's attributes, as a fixed-capacity list of integers (no heap on lookup).
class Key {
 public:
  explicit Key(ops::OpId op) { add(static_cast<int64_t>(op)); }
  Key& add(int64_t v) {
    STRATA_CHECK(n_ < static_cast<int>(v_.size()), "onednn: primitive cache key too long");
    v_[n_++] = v;
    return *this;
  }
  Key& add(double v) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return add(bits);
  }
  Key& add(const ops::TensorView& t) {
    add(static_cast<int64_t>(t.defined));
    if (!t.defined) return *this;
    add(static_cast<int64_t>(t.dtype)).add(static_cast<int64_t>(t.dim()));
    for (int d = 0; d < t.dim(); ++d) add(t.sizes[d]).add(t.sizes[d] == 1 ? int64_t{0} : t.strides[d]);
    return *this;
  }
  template <class... V>
  Key& views(const V&... v) {
    (add(v), ...);
    return *this;
  }
  bool operator==(const Key& o) const {
    return n_ == o.n_ && std::memcmp(v_.data(), o.v_.data(), static_cast<size_t>(n_) * sizeof(int64_t)) == 0;
  }
  size_t hash() const {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n_; ++i) h = (h ^ static_cast<uint64_t>(v_[i])) * 1099511628211ull;
    return static_cast<size_t>(h);
  }

 private:
  std::array<int64_t, 80> v_;  // only the first n_ are set and read
  int n_ = 0;
};
struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash(); }
};

// What a cached entry holds: primitives, memory objects (handles rebound per call)
// and the argument maps, built once.
struct Plan {
  virtual ~Plan() = default;
};

// The code between "codegen:begin" and "codegen:end" is also written, as it is, into the programs
// codegen/ generates, so that they stage buffers as this backend does.
// codegen:begin staging
// A user buffer as a primitive sees it: the user's memory itself, or the primitive's
// own memory in the layout it chose plus the reorder between the two.
struct Staged {
  memory user, inner;
  dnnl::reorder re;
  bool reorders = false;

  // `want` is the layout the primitive asked for; `is_input` picks the reorder direction.
  static Staged make(const memory::desc& user_md, const memory::desc& want, const dnnl::engine& eng, bool is_input) {
    Staged s;
    s.user = memory(user_md, eng, DNNL_MEMORY_NONE);
    if (want != user_md) {
      s.reorders = true;
      s.inner = memory(want, eng);
      s.re = is_input ? dnnl::reorder(s.user, s.inner) : dnnl::reorder(s.inner, s.user);
    }
    return s;
  }
  const memory& arg() const { return reorders ? inner : user; }
  void bind(const void* p) const { user.set_data_handle(const_cast<void*>(p)); }
  // Inputs: user -> primitive layout. Outputs: primitive layout -> user.
  void pull(dnnl::stream& s) {
    if (reorders) re.execute(s, user, inner);
  }
  void push(dnnl::stream& s) {
    if (reorders) re.execute(s, inner, user);
  }
};
// codegen:end

// An f32 memory descriptor with explicit dims and strides (reshaped or transposed
// views). A size-1 dim without a usable stride gets one past the others.
inline memory::desc md_strided(const Dims& dims, const Dims& strides, memory::data_type dt = memory::data_type::f32) {
  const DescLayout l = strided_layout(dims, strides);
  return memory::desc(l.dims, dt, l.strides);
}
// oneDNN's element type for the dtypes this backend hands to primitives.
inline memory::data_type dnnl_dt(DType dt) {
  return dt == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
}
// Memory descriptor of a view with its own sizes, strides and dtype (f32 or bf16), laid
// out by view_layout (descriptor_rules.h).
inline memory::desc md_of(const ops::TensorView& v) {
  const DescLayout l = view_layout(v);
  return memory::desc(l.dims, dnnl_dt(v.dtype), l.strides);
}
inline memory::desc any_like(const memory::desc& md) {
  return memory::desc(md.dims(), md.data_type(), memory::format_tag::any);
}
inline memory::desc plain_1d(int64_t n) {
  return memory::desc(Dims{n}, memory::data_type::f32, memory::format_tag::a);
}

// Element-wise ops and reductions (f32) on fewer elements run on the shared plain
// loops, on the calling thread: a oneDNN primitive opens an OpenMP parallel region per
// call whatever the size. ReLU in bench/libtorch (2 threads, OMP_WAIT_POLICY=passive,
// loaded 2-core VM): the primitive took 16 us on 4096 floats and 13-26 us on 32768,
// the loop 0.3 and 2.5 us; at one thread the two are within 0.5 us of each other.
// LibTorch's at::parallel_for stays on one thread below the same grain size.
inline constexpr int64_t kLoopBelow = 32768;
// The backend's own loops split over OpenMP threads (the pool oneDNN runs on, sized
// by OMP_NUM_THREADS) from this many elements on; below, one thread is faster than
// waking the others.
// codegen:begin train_loops
inline constexpr int64_t kParallelAbove = 32768;
// codegen:end

// The state behind one OneDnnBackend.
struct Context {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> cache;

  // The cached plan for `key`, built by make() (returning unique_ptr<P>) on first use.
  // The cache is bounded: past kMaxPlans (a workload of ever new shapes) it starts
  // over. No caller holds a plan across another plan() call.
  static constexpr size_t kMaxPlans = 4096;
  template <class P, class Make>
  P& plan(const Key& key, Make&& make) {
    auto it = cache.find(key);
    if (it == cache.end()) {
      auto made = make();
      if (cache.size() >= kMaxPlans) cache.clear();
      it = cache.emplace(key, std::move(made)).first;
    }
    return static_cast<P&>(*it->second);
  }
};

// Executes a cached reduction primitive (sum or mean) from `src` to `dst`.
void reduce(Context& c, const Key& key, dnnl::algorithm alg, const memory::desc& src, const memory::desc& dst,
            const void* src_ptr, void* dst_ptr);

// A convolution's work: each output (or output-gradient) element takes one multiply-add per
// weight of its output channel, in all three passes.
inline loops::Work conv_work(const ops::TensorView& out, const ops::TensorView& w) {
  return loops::product_work(w.sizes[0] > 0 ? out.numel() * (w.numel() / w.sizes[0]) : 0);
}

// Runs f, turning a oneDNN error into strata::Error naming the op, the failed call
// and its status.
template <class F>
void guarded(std::string_view op, F&& f) {
  try {
    f();
  } catch (const dnnl::error& e) {
    STRATA_FAIL("onednn: ", op, ": ", e.what(), " (status: ", dnnl_status2str(e.status), ")");
  }
}

// codegen:begin staging
// The calling thread's OpenMP team size (omp_set_num_threads: a per-thread setting) lowered
// to `n` for the scope, then put back; no change when n is not below it.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) {
#ifdef _OPENMP
    saved_ = omp_get_max_threads();
    if (n < saved_) omp_set_num_threads(n);
#else
    (void)n;
#endif
  }
  ~ScopedOmpThreads() {
#ifdef _OPENMP
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
#endif
  }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;
  // The pool's size as this thread sees it (1 without OpenMP).
  static int max_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
  }

 private:
  int saved_ = 1;
};
// codegen:end

// guarded() for a primitive call of `work`: the primitive is made (on first use) and run
// with the threads the work is worth (backends/cpu/threads.h), so small work stays on the
// calling thread. oneDNN reads the team size when it makes a primitive (its blocking and
// thread split) and when it runs it; a primitive's shape fixes its work, so both see the same
// count, and oneDNN's own primitive cache keys on the count.
template <class F>
void guarded(std::string_view op, const loops::Work& work, F&& f) {
  if (CallObserver* o = call_observer()) [[unlikely]]
    o->on_primitive(work);
  ScopedOmpThreads threads(loops::threads_for(work, ScopedOmpThreads::max_threads()));
  guarded(op, std::forward<F>(f));
}

inline void require_f32(std::string_view op, DType dt) {
  if (dt != DType::f32) STRATA_FAIL("onednn: ", op, " does not support dtype ", dtype_name(dt), " (supported: f32)");
}

// Whether bf16 primitives run natively here: oneDNN's effective ISA has bf16 dot
// products (AVX512_BF16, or AMX). Emulated bf16 on plain AVX-512 would be slower
// than f32, so it is not offered. DNNL_MAX_CPU_ISA lowers the ISA as oneDNN sees it.
bool bf16_native();
// "avx512_core_bf16", ...: oneDNN's effective ISA, for messages.
const char* effective_isa_name();

// The ops with bf16 primitives (conv, linear, relu, add, pooling) accept f32, and bf16 where
// bf16_native(); a bf16 call on a CPU without it is an error that says so.
inline void require_f32_or_bf16(std::string_view op, DType dt) {
  if (dt == DType::f32) return;
  if (dt != DType::bf16)
    STRATA_FAIL("onednn: ", op, " does not support dtype ", dtype_name(dt), " (supported: f32, bf16)");
  if (!bf16_native())
    STRATA_FAIL("onednn: ", op, ": bf16 needs a CPU with AVX512_BF16 or AMX, and oneDNN's ISA here is ",
                effective_isa_name(), " (use f32)");
}

}  // namespace strata::backends::onednn
