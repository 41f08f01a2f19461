// The cuda backend's runtime: the factory and registry entry (also without a GPU),
// the caching allocator (reuse, counters, the out-of-memory error), the pinned host
// allocator, the copy hook's round trips with dtype and layout conversion, a
// determinism check over a small training step, and the op-table coverage check.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/context.h"
#include "cuda_test_util.h"

namespace strata::testing {
namespace {

static_assert(backends::BackendImpl<CudaBackend>, "CudaBackend must implement every op of op_table.def");

// ---- factory and registry (these run on every machine) -------------------------------

TEST(CudaFactory, ReportsWhyWhenThereIsNoGpu) {
  auto made = backends::make_backend_cuda();
  if (backends::cuda::device_count() == 0) {
    EXPECT_EQ(made.backend, nullptr);
    EXPECT_FALSE(made.unavailable_reason.empty());
    EXPECT_EQ(backends::registry().find("cuda"), nullptr);
    EXPECT_NE(backends::registry().describe().find("cuda"), std::string::npos) << backends::registry().describe();
    EXPECT_THROW(Tensor::empty({4}, DType::f32, Device::cuda()), Error);
  } else {
    ASSERT_NE(made.backend, nullptr) << made.unavailable_reason;
    EXPECT_EQ(made.backend->name(), "cuda");
    EXPECT_EQ(made.backend->device_type(), DeviceType::cuda);
    ASSERT_NE(backends::registry().find("cuda"), nullptr) << backends::registry().describe();
  }
}

class CudaRuntime : public CudaTest {};

// ---- caching allocator -----------------------------------------------------------

TEST_F(CudaRuntime, AllocatorBins) {
  EXPECT_EQ(backends::cuda::allocation_bin(1), 512u);
  EXPECT_EQ(backends::cuda::allocation_bin(1000), 1024u);
  EXPECT_EQ(backends::cuda::allocation_bin(4096), 4096u);
  EXPECT_EQ(backends::cuda::allocation_bin(4097), 4608u);
  EXPECT_EQ(backends::cuda::allocation_bin((size_t{1} << 20) + 1), (size_t{1} << 20) + (size_t{1} << 17));
  for (size_t b : {size_t{5000}, size_t{123457}, size_t{99999999}}) {
    const size_t bin = backends::cuda::allocation_bin(b);
    EXPECT_GE(bin, b);
    EXPECT_LE(bin, b + b / 8 + 512) << "at most 12.5% slack";
  }
}

TEST_F(CudaRuntime, AllocatorReusesFreedBlocksWithoutTheDriver) {
  Allocator& a = allocator_for(Device::cuda());
  void* p = a.allocate(1000);
  ASSERT_NE(p, nullptr);
  const AllocatorStats s1 = a.stats();
  a.deallocate(p, 1000);
  EXPECT_EQ(a.stats().current_bytes, s1.current_bytes - 1000);
  EXPECT_EQ(a.stats().reserved_bytes, s1.reserved_bytes) << "a freed block stays cached";
  void* q = a.allocate(1024);  // same bin
  EXPECT_EQ(q, p) << "the cached block of the bin is handed out again";
  EXPECT_EQ(a.stats().reserved_bytes, s1.reserved_bytes) << "no new cudaMalloc";
  EXPECT_EQ(a.stats().allocations, s1.allocations + 1);
  a.deallocate(q, 1024);
}

TEST_F(CudaRuntime, AllocatorCounters) {
  Allocator& a = allocator_for(Device::cuda());
  const AllocatorStats s0 = backends::cuda::allocator_stats();
  {
    const Tensor t = Tensor::empty({1000, 1000}, DType::f32, Device::cuda());
    const AllocatorStats s1 = a.stats();
    EXPECT_EQ(s1.current_bytes, s0.current_bytes + 4000000);
    EXPECT_GE(s1.peak_bytes, s1.current_bytes);
    EXPECT_GE(s1.reserved_bytes, s1.current_bytes);
  }
  EXPECT_EQ(a.stats().current_bytes, s0.current_bytes);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes, a.stats().current_bytes);
  backends::cuda::empty_cache();
  const AllocatorStats s2 = a.stats();
  EXPECT_LE(s2.reserved_bytes, s0.reserved_bytes + 0) << "empty_cache returns cached blocks";
  EXPECT_GE(s2.reserved_bytes, s2.current_bytes);
}

// strata's kernel temporaries come from a kept buffer as a stack (context.h): no
// allocation while they fit, 256-byte steps, pieces freed out of order popped once those
// above them are gone, requests beyond the scratch from the allocator, and growth to the
// most asked at the next empty moment, which makes graphs captured before it stale.
TEST_F(CudaRuntime, KernelTemporariesComeFromAStackOfScratch) {
  using backends::cuda::Context;
  using backends::cuda::DeviceBuffer;
  Context& ctx = backends::cuda::context();
  Allocator& a = allocator_for(Device::cuda());
  { DeviceBuffer warm(ctx, size_t{1} << 20); }
  const size_t cap = ctx.scratch_bytes();
  ASSERT_GE(cap, size_t{1} << 20);
  const size_t before = a.stats().current_bytes;
  char* base = nullptr;
  {
    DeviceBuffer x(ctx, 1000), y(ctx, 3000);
    base = x.as<char>();
    EXPECT_EQ(a.stats().current_bytes, before) << "no allocation while the pieces fit";
    EXPECT_EQ(y.as<char>() - x.as<char>(), 1024);
    {
      DeviceBuffer big(ctx, Context::kScratchMax + 1);
      EXPECT_EQ(a.stats().current_bytes, before + Context::kScratchMax + 1) << "beyond the scratch: the allocator";
    }
    EXPECT_EQ(a.stats().current_bytes, before);
    x = DeviceBuffer();  // freed below a live piece: its space stays taken until y goes
    DeviceBuffer z(ctx, 10);
    EXPECT_EQ(z.as<char>(), y.as<char>() + 3072);
    // Does not fit beside x..z: from the allocator now; the scratch grows once it is empty
    // (to kScratchMax, the most it may hold, so in a process whose earlier ops already grew
    // it that far there is nothing to grow).
    const size_t ask = Context::kScratchMax - 4352;
    DeviceBuffer over(ctx, ask);
    EXPECT_EQ(a.stats().current_bytes, before + (cap < Context::kScratchMax ? ask : 0));
    EXPECT_EQ(ctx.scratch_bytes(), cap);
  }
  EXPECT_EQ(a.stats().current_bytes, before);
  const uint64_t generation = ctx.workspace_generation();
  {
    DeviceBuffer w(ctx, 10);
    EXPECT_EQ(ctx.scratch_bytes(), Context::kScratchMax) << "grown to the most asked, x, y, z and the piece that did not fit";
    EXPECT_EQ(a.stats().current_bytes, before - cap + ctx.scratch_bytes()) << "the old scratch is given back";
    if (cap < Context::kScratchMax) {
      EXPECT_NE(ctx.workspace_generation(), generation) << "graphs captured with the old scratch are stale";
    }
    base = w.as<char>();
  }
  {
    // At its most the scratch cannot grow: what does not fit beside the live pieces goes to
    // the allocator, not past the buffer's end.
    DeviceBuffer half(ctx, Context::kScratchMax / 2 + 256);
    const size_t now = a.stats().current_bytes;
    DeviceBuffer more(ctx, Context::kScratchMax / 2);
    EXPECT_EQ(a.stats().current_bytes, now + Context::kScratchMax / 2);
  }
  DeviceBuffer again(ctx, 4000);
  EXPECT_EQ(again.as<char>(), base) << "the stack is empty again";
}

TEST_F(CudaRuntime, OutOfMemoryIsAClearError) {
  Allocator& a = allocator_for(Device::cuda());
  const size_t absurd = size_t{1} << 50;  // 1 PiB
  try {
    a.allocate(absurd);
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(absurd)), std::string::npos) << msg;
    EXPECT_NE(msg.find("in use"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserved"), std::string::npos) << msg;
    EXPECT_NE(msg.find("retried"), std::string::npos) << msg;
  }
  // The allocator and the device are fine afterwards.
  const Pair x = rand_pair({100}, 1);
  EXPECT_TRUE(close(x.gpu, x.cpu, 0.0));
  EXPECT_THROW(Tensor::empty({int64_t{1} << 48}, DType::f32, Device::cuda()), Error);
}

TEST_F(CudaRuntime, PinnedHostAllocator) {
  Allocator& pinned = pinned_host_allocator();
  const AllocatorStats s0 = backends::cuda::pinned_stats();
  float* p = static_cast<float*>(pinned.allocate(4096 * sizeof(float)));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(backends::cuda::pinned_stats().current_bytes, s0.current_bytes + 4096 * sizeof(float));
  for (int i = 0; i < 4096; ++i) p[i] = static_cast<float>(i) * 0.5f;
  const Tensor host = Tensor::borrow(p, {64, 64}, DType::f32);
  const Tensor dev = to_gpu(host);
  for (int i = 0; i < 4096; ++i) p[i] = -1.f;  // the copy is complete: overwriting is safe
  const auto back = to_cpu(dev).to_vector<float>();
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(back[i], static_cast<float>(i) * 0.5f) << i;
  pinned.deallocate(p, 4096 * sizeof(float));
  EXPECT_EQ(backends::cuda::pinned_stats().current_bytes, s0.current_bytes);
}

// ---- copy hook ------------------------------------------------------------------

Tensor cpu_convert(const Tensor& t, DType dt, MemoryFormat fmt = kNCHW) {
  Tensor o = Tensor::empty(t.sizes(), dt, Device::cpu(), fmt);
  copy_into(t, o);
  return o;
}

TEST_F(CudaRuntime, CopyRoundTripsEveryDtypePair) {
  const std::vector<DType> all{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8};
  const Tensor base = random_tensor({3, 4, 5, 6}, DType::f64, 2, 0.0, 200.0);
  for (DType from : all) {
    const Tensor src = cpu_convert(base, from);
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      // Host src -> device dst of another dtype and layout, then back.
      const Tensor dev = Tensor::empty(src.sizes(), to, Device::cuda(), kNHWC);
      copy_into(src, dev);
      const Tensor want = cpu_convert(src, to, kNHWC);
      EXPECT_TRUE(bitwise_equal(to_cpu(dev), want));
      // Device src -> host dst converting back.
      const Tensor back = Tensor::empty(src.sizes(), from);
      copy_into(dev, back);
      EXPECT_TRUE(bitwise_equal(back, cpu_convert(want, from)));
    }
  }
}

TEST_F(CudaRuntime, CopyStridedViewsBothWays) {
  const Tensor big = random_tensor({4, 9, 5, 6}, DType::f32, 3);
  const Tensor slice = big.narrow(1, 2, 4);  // not dense
  // Host strided source -> device, same dtype and with conversion.
  const Tensor d1 = Tensor::empty(slice.sizes(), DType::f32, Device::cuda());
  copy_into(slice, d1);
  EXPECT_TRUE(bitwise_equal(to_cpu(d1), slice.contiguous()));
  const Tensor d2 = Tensor::empty(slice.sizes(), DType::f16, Device::cuda(), kNHWC);
  copy_into(slice, d2);
  EXPECT_TRUE(bitwise_equal(to_cpu(d2), cpu_convert(slice, DType::f16, kNHWC)));
  // Device -> host strided destination: only the slice changes.
  Tensor host_big = random_tensor({4, 9, 5, 6}, DType::f32, 4);
  const Tensor before = host_big.clone();
  const Tensor dst = host_big.narrow(1, 3, 4);
  copy_into(d1, dst);
  const auto hb = host_big.to_vector<float>(), bf = before.to_vector<float>(), sv = big.to_vector<float>();
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t c = 0; c < 9; ++c)
      for (int64_t i = 0; i < 30; ++i) {
        const size_t k = static_cast<size_t>((n * 9 + c) * 30 + i);
        const float want = (c >= 3 && c < 7) ? sv[static_cast<size_t>((n * 9 + c - 1) * 30 + i)] : bf[k];
        ASSERT_EQ(hb[k], want) << n << "," << c << "," << i;
      }
  // Device -> device: transpose through permute (a strided source).
  const Tensor m = to_gpu(random_tensor({37, 53}, DType::f32, 5));
  const Tensor mt = Tensor::empty({53, 37}, DType::f32, Device::cuda());
  copy_into(m.permute({1, 0}), mt);
  EXPECT_TRUE(bitwise_equal(to_cpu(mt), to_cpu(m).permute({1, 0}).contiguous()));
  // clone() on a device tensor goes through the same hook.
  EXPECT_TRUE(bitwise_equal(to_cpu(m.clone()), to_cpu(m)));
}

// Device copies whose operands walk contiguous rows take the row kernel (copy.cu), V elements a
// thread: dense casts, a transformer's head permute ([B, T, H, D] -> [B, H, T, D]), views whose
// rows start off a 16-byte boundary (narrower V), odd row lengths (V = 1), every dtype pair. The
// same bits as the host's conversion.
TEST_F(CudaRuntime, CopyRowsEveryDtypePairAndAlignment) {
  const std::vector<DType> all{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8};
  const Tensor base = random_tensor({2, 5, 3, 72}, DType::f64, 7, 0.0, 200.0);
  for (DType from : all) {
    const Tensor src_host = cpu_convert(base, from);
    const Tensor src = to_gpu(src_host);
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const Tensor dense = Tensor::empty(src.sizes(), to, Device::cuda());
      copy_into(src, dense);
      EXPECT_TRUE(bitwise_equal(to_cpu(dense), cpu_convert(src_host, to))) << "dense";
      const Tensor heads = Tensor::empty({2, 3, 5, 72}, to, Device::cuda());
      copy_into(src.permute({0, 2, 1, 3}), heads);
      EXPECT_TRUE(bitwise_equal(to_cpu(heads), cpu_convert(src_host.permute({0, 2, 1, 3}).contiguous(), to)))
          << "head permute";
      for (int64_t start : {1, 2, 4}) {  // rows of 64 from element `start` of each 72
        const Tensor rows = Tensor::empty({2, 5, 3, 64}, to, Device::cuda());
        copy_into(src.narrow(3, start, 64), rows);
        EXPECT_TRUE(bitwise_equal(to_cpu(rows), cpu_convert(src_host.narrow(3, start, 64).contiguous(), to)))
            << "rows from element " << start;
      }
      const Tensor odd = Tensor::empty({2, 5, 3, 33}, to, Device::cuda());
      copy_into(src.narrow(3, 5, 33), odd);
      EXPECT_TRUE(bitwise_equal(to_cpu(odd), cpu_convert(src_host.narrow(3, 5, 33).contiguous(), to))) << "rows of 33";
    }
  }
}

// A transposed copy (tiles through shared memory, copy.cu): every dtype pair, odd sizes, rows of the
// source longer than the view, against the host's conversion bit for bit.
TEST_F(CudaRuntime, CopyTransposedEveryDtypePair) {
  const std::vector<DType> all{DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8};
  const Tensor base = random_tensor({77, 45}, DType::f64, 9, 0.0, 200.0);
  for (DType from : all) {
    const Tensor src_host = cpu_convert(base, from);
    const Tensor src = to_gpu(src_host);
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      const Tensor t = Tensor::empty({45, 77}, to, Device::cuda());
      copy_into(src.permute({1, 0}), t);
      EXPECT_TRUE(bitwise_equal(to_cpu(t), cpu_convert(src_host.permute({1, 0}).contiguous(), to))) << "whole";
      const Tensor part = Tensor::empty({40, 70}, to, Device::cuda());
      copy_into(src.narrow(0, 3, 70).narrow(1, 2, 40).permute({1, 0}), part);
      EXPECT_TRUE(bitwise_equal(to_cpu(part),
                                cpu_convert(src_host.narrow(0, 3, 70).narrow(1, 2, 40).permute({1, 0}).contiguous(), to)))
          << "a block of it";
    }
  }
}

TEST_F(CudaRuntime, CopyLayoutConversionOnDevice) {
  const Tensor x = random_tensor({2, 3, 7, 5}, DType::f32, 6);
  const Tensor nchw = to_gpu(x);
  const Tensor nhwc = nchw.contiguous(kNHWC);  // device-to-device conversion
  EXPECT_TRUE(nhwc.is_channels_last());
  EXPECT_TRUE(bitwise_equal(to_cpu(nhwc), x.contiguous(kNHWC)));
  EXPECT_TRUE(bitwise_equal(to_cpu(nhwc.contiguous()), x));
}

// ---- errors and support table -----------------------------------------------------

TEST_F(CudaRuntime, UnsupportedDtypeIsAnError) {
  EXPECT_FALSE(be().capabilities().supports(ops::OpId::batch_norm_fwd, DType::f64));
  EXPECT_TRUE(be().capabilities().supports(ops::OpId::batch_norm_fwd, DType::f32));
  EXPECT_TRUE(be().capabilities().supports(ops::OpId::copy, DType::u8));
  const Tensor x = Tensor::empty({2, 3, 4, 4}, DType::f64, Device::cuda());
  const Tensor c = Tensor::empty({3}, DType::f64, Device::cuda());
  try {
    be().batch_norm_fwd({x, c, c, c, c, x, c, c, 1e-5, 0.1, true});
    FAIL() << "f64 batch norm ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos) << e.what();
  }
}

// ---- determinism --------------------------------------------------------------------

// One small conv-bn-relu-pool-linear-xent step, forward and backward, on fresh outputs.
std::vector<Tensor> train_step(CudaBackend& be, uint64_t seed) {
  const Conv2dParams cp{1, 1, 1, 1, 1, 1, 1};
  const Pair x = rand_pair({8, 16, 16, 16}, seed), w = rand_pair({32, 16, 3, 3}, seed + 1);
  const Pair g = rand_pair({32}, seed + 2, kNCHW, 0.5, 1.5), b = rand_pair({32}, seed + 3);
  const Pair fw = rand_pair({10, 32}, seed + 4), fb = rand_pair({10}, seed + 5);
  const Tensor labels = to_gpu(random_labels(8, 10, seed + 6));
  auto T = [](const Shape& s) { return gpu_nan(s); };
  Tensor y = T({8, 32, 16, 16}), z = T({8, 32, 16, 16}), r = T({8, 32, 16, 16}), p = T({8, 32, 8, 8});
  Tensor q = T({8, 32}), o = T({8, 10}), loss = T({}), lse = T({8});
  Tensor rm = T({32}), rv = T({32}), sm = T({32}), si = T({32});
  be.fill({rm, 0.0});
  be.fill({rv, 1.0});
  Pool2dParams pp;
  be.conv2d_fwd({x.gpu, w.gpu, {}, y, cp});
  be.batch_norm_fwd({y, g.gpu, b.gpu, rm, rv, z, sm, si, 1e-5, 0.1, true});
  be.relu_fwd({z, r});
  be.max_pool2d_fwd({r, p, pp});
  be.global_avg_pool_fwd({p, q});
  be.linear_fwd({q, fw.gpu, fb.gpu, o});
  be.softmax_xent_fwd({o, labels, loss, lse});
  Tensor dl = T({});
  be.fill({dl, 1.0});
  Tensor d_o = T({8, 10}), dq = T({8, 32}), dfw = T({10, 32}), dfb = T({10}), dp = T({8, 32, 8, 8});
  Tensor dr = T({8, 32, 16, 16}), dz = T({8, 32, 16, 16}), dy = T({8, 32, 16, 16});
  Tensor dg = T({32}), dbeta = T({32}), dw = T({32, 16, 3, 3}), dx = T({8, 16, 16, 16});
  be.softmax_xent_bwd({o, lse, labels, dl, d_o});
  be.linear_bwd_data({d_o, fw.gpu, dq});
  be.linear_bwd_weight({q, d_o, dfw, dfb});
  be.global_avg_pool_bwd({dq, dp});
  be.max_pool2d_bwd({r, p, dp, dr, pp});
  be.relu_bwd({r, dr, dz});
  be.batch_norm_bwd({y, dz, g.gpu, sm, si, dy, dg, dbeta, true});
  be.conv2d_bwd_weight({x.gpu, dy, dw, cp});
  be.conv2d_bwd_data({dy, w.gpu, dx, cp});
  std::vector<Tensor> out;
  for (const Tensor& t : {loss, lse, rm, rv, dfw, dfb, dg, dbeta, dw, dx}) out.push_back(to_cpu(t));
  return out;
}

TEST_F(CudaRuntime, TrainingStepIsBitwiseReproducible) {
  const auto a = train_step(be(), 7000);
  const auto b = train_step(be(), 7000);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "output " << i;
  for (const Tensor& t : a)
    for (double v : t.to_vector<double>()) ASSERT_TRUE(std::isfinite(v));
}

// ---- channels-last and timings (informational) ---------------------------------------

// Times `f` (after one warm-up call) over `reps` calls, in milliseconds per call.
template <class F>
double time_ms(CudaBackend& be, int reps, F&& f) {
  f();
  be.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  be.synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// ResNet-50 layer1's 3x3 conv at batch 32, forward and both backward passes, in each
// layout and precision; also reports whether cuDNN ran NHWC natively. Prints, asserts
// nothing about speed (timings depend on the card).
TEST_F(CudaRuntime, ResNet50ConvTimings) {
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  const size_t fallbacks0 = backends::cuda::layout_fallbacks();
  std::printf("%-14s %10s %10s %10s %10s\n", "layer1 3x3", "fwd ms", "bwd_d ms", "bwd_w ms", "TFLOP/s");
  for (auto [dt, fmt, name] : std::vector<std::tuple<DType, MemoryFormat, const char*>>{
           {DType::f32, kNCHW, "f32 nchw"}, {DType::f32, kNHWC, "f32 nhwc"}, {DType::f16, kNHWC, "f16 nhwc"},
           {DType::bf16, kNHWC, "bf16 nhwc"}}) {
    const Tensor x = to_gpu(random_tensor({32, 64, 56, 56}, dt, 1, -1, 1, fmt));
    const Tensor w = to_gpu(random_tensor({64, 64, 3, 3}, dt, 2, -1, 1, fmt));
    const Tensor y = Tensor::empty({32, 64, 56, 56}, dt, Device::cuda(), fmt);
    const Tensor dx = Tensor::empty({32, 64, 56, 56}, dt, Device::cuda(), fmt);
    const Tensor dw = Tensor::empty({64, 64, 3, 3}, dt, Device::cuda(), fmt);
    const double f = time_ms(be(), 20, [&] { be().conv2d_fwd({x, w, {}, y, p}); });
    const double d = time_ms(be(), 20, [&] { be().conv2d_bwd_data({y, w, dx, p}); });
    const double g = time_ms(be(), 20, [&] { be().conv2d_bwd_weight({x, y, dw, p}); });
    const double flop = 2.0 * 32 * 64 * 56 * 56 * 64 * 9;
    std::printf("%-14s %10.3f %10.3f %10.3f %10.1f\n", name, f, d, g, 3 * flop / ((f + d + g) * 1e9));
  }
  const Tensor c1 = to_gpu(random_tensor({64}, DType::f32, 4, 0.5, 1.5));
  const Tensor rm = gpu_nan({64}), rv = gpu_nan({64}), sm = gpu_nan({64}), si = gpu_nan({64});
  const Tensor dg = gpu_nan({64}), db = gpu_nan({64});
  be().fill({rm, 0.0});
  be().fill({rv, 1.0});
  std::printf("%-24s %10s %10s\n", "batch_norm [32,64,56,56]", "fwd ms", "bwd ms");
  struct BnCase {
    DType dt;
    MemoryFormat fmt;
    bool cudnn, persistent;
    const char* name;
  };
  for (const BnCase& k : std::vector<BnCase>{{DType::f32, kNCHW, true, true, "f32 nchw cudnn"},
                                             {DType::f32, kNCHW, false, true, "f32 nchw strata"},
                                             {DType::f32, kNHWC, false, true, "f32 nhwc strata"},
                                             {DType::f32, kNHWC, true, true, "f32 nhwc cudnn persistent"},
                                             {DType::f32, kNHWC, true, false, "f32 nhwc cudnn spatial"},
                                             {DType::bf16, kNHWC, false, true, "bf16 nhwc strata"},
                                             {DType::bf16, kNCHW, false, true, "bf16 nchw strata"}}) {
    be().set_persistent_batch_norm(k.persistent);
    be().set_cudnn_nhwc_batch_norm(k.cudnn);
    be().set_own_nchw_batch_norm(!k.cudnn);
    const Tensor xb = to_gpu(random_tensor({32, 64, 56, 56}, k.dt, 3, -1, 1, k.fmt));
    const Tensor yb = Tensor::empty({32, 64, 56, 56}, k.dt, Device::cuda(), k.fmt);
    const Tensor dxb = Tensor::empty({32, 64, 56, 56}, k.dt, Device::cuda(), k.fmt);
    const double f = time_ms(be(), 20, [&] { be().batch_norm_fwd({xb, c1, c1, rm, rv, yb, sm, si, 1e-5, 0.1, true}); });
    const double b = time_ms(be(), 20, [&] { be().batch_norm_bwd({xb, yb, c1, sm, si, dxb, dg, db, true}); });
    std::printf("%-26s %8.3f %10.3f\n", k.name, f, b);
  }
  be().set_cudnn_nhwc_batch_norm(false);
  be().set_own_nchw_batch_norm(false);
  // The stem's batch norm of a bf16 ResNet-50 step at batch 256.
  {
    const Shape big{256, 64, 112, 112};
    const Tensor xb = to_gpu(random_tensor(big, DType::bf16, 5, -1, 1, kNHWC));
    const Tensor yb = Tensor::empty(big, DType::bf16, Device::cuda(), kNHWC);
    const Tensor dxb = Tensor::empty(big, DType::bf16, Device::cuda(), kNHWC);
    const double f = time_ms(be(), 10, [&] { be().batch_norm_fwd({xb, c1, c1, rm, rv, yb, sm, si, 1e-5, 0.1, true}); });
    const double b = time_ms(be(), 10, [&] { be().batch_norm_bwd({xb, yb, c1, sm, si, dxb, dg, db, true}); });
    const double a = time_ms(be(), 10, [&] { be().add({xb, yb, dxb}); });
    const double r = time_ms(be(), 10, [&] { be().relu_bwd({xb, yb, dxb}); });
    const double gb = static_cast<double>(big.numel()) * 2 / 1e6;  // MB per tensor
    std::printf("bf16 nhwc %-16s %8.3f %10.3f   (add %.3f ms = %.0f GB/s, relu_bwd %.3f ms)\n", big.str().c_str(), f, b,
                a, 3 * gb / a, r);
  }
  be().set_persistent_batch_norm(true);
  const size_t fb = backends::cuda::layout_fallbacks() - fallbacks0;
  std::printf("NHWC layout fallbacks to NCHW: %zu\n", fb);
  RecordProperty("nhwc_layout_fallbacks", static_cast<int>(fb));
}

// ---- coverage -----------------------------------------------------------------------

TEST(CudaCoverage, EveryOpIsComparedWithTheReference) {
  std::string missing;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    const auto it = op_coverage().find(op);
    if (it == op_coverage().end() || !it->second.count("cuda_vs_reference")) {
      missing += ' ';
      missing += ops::op_name(op);
    }
  }
  EXPECT_TRUE(missing.empty()) << "ops without a cuda-vs-reference test:" << missing;
}

TEST(CudaCoverage, EveryOpRunsInF32) {
  if (!gpu_skip_reason().empty()) GTEST_SKIP() << "no usable GPU: " << gpu_skip_reason();
  const CudaBackend be;
  for (int i = 0; i < ops::kNumOps; ++i) EXPECT_TRUE(be.capabilities().supports(static_cast<ops::OpId>(i), DType::f32));
}

}  // namespace
}  // namespace strata::testing
