// cpu_peak: the ceilings a CPU comparison is read against, measured on this machine now.
//   - f32 FMA and bf16 dot-product peaks (AVX-512 / AVX512_BF16 where the CPU has them,
//     else AVX2 FMA), per thread count: what no convolution kernel can beat;
//   - read bandwidth from memory: what streaming the weights costs at batch 1;
//   - the cost of an empty OpenMP parallel region after the pool has been idle for a gap,
//     under whatever OMP_WAIT_POLICY the process started with: every oneDNN primitive
//     (and every LibTorch op) pays it once per call.
// A shared VM's neighbours show up here first: run it before and after a comparison
// (bench/libtorch/run.sh does) and read the comparison only where the two agree.
#include <CLI/CLI.hpp>
#include <immintrin.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/core/exit_status.h"
#include "strata/core/version.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One peak kernel: independent accumulator chains of `step` (`chains`: 16 with AVX-512's 32
// registers, 12 with AVX2's 16 so that the two operands stay in registers too; either covers
// the latency on x86 cores with two vector pipes), then the lanes summed so that nothing is
// optimised away. Named variables, not an array: GCC kept an array's accumulators in memory
// (2.8x slower).
#define STRATA_X12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define STRATA_X16(X) STRATA_X12(X) X(12) X(13) X(14) X(15)
#define STRATA_PEAK_DECL(i) auto a##i = seed * float(i + 1);  // distinct: equal chains would be merged
#define STRATA_PEAK_SUM(i)             \
  std::memcpy(out, &a##i, sizeof out); \
  for (float x : out) s += x;
#define STRATA_PEAK_KERNEL(name, isa, chains, barrier, operands, step)                             \
  __attribute__((target(isa))) double name(long iters) {                                          \
    operands;                                                                                      \
    chains(STRATA_PEAK_DECL)                                                                       \
    for (long k = 0; k < iters; ++k) {                                                             \
      chains(step)                                                                                 \
      barrier                                                                                      \
    }                                                                                              \
    float out[sizeof seed / sizeof(float)];                                                        \
    double s = 0;                                                                                  \
    chains(STRATA_PEAK_SUM)                                                                        \
    return s;                                                                                      \
  }
// Eight chains pinned to registers each iteration: without it GCC interchanged the AVX-512
// loops; with AVX2's sixteen registers the pinning itself made GCC shuffle them through memory.
#define STRATA_PIN_ZMM \
  __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));
#define STRATA_FMA512(i) a##i = _mm512_fmadd_ps(a##i, b, c);
#define STRATA_FMA256(i) a##i = _mm256_fmadd_ps(a##i, b, c);
#define STRATA_DOT_BF16(i) a##i = _mm512_dpbf16_ps(a##i, b, c);

STRATA_PEAK_KERNEL(fma_avx512, "avx512f", STRATA_X16, STRATA_PIN_ZMM,
                   const __m512 seed = _mm512_set1_ps(1.0f); const __m512 b = _mm512_set1_ps(1.0000001f);
                   const __m512 c = _mm512_set1_ps(1e-7f), STRATA_FMA512)
STRATA_PEAK_KERNEL(fma_avx2, "avx2,fma", STRATA_X12, ,
                   const __m256 seed = _mm256_set1_ps(1.0f); const __m256 b = _mm256_set1_ps(1.0000001f);
                   const __m256 c = _mm256_set1_ps(1e-7f), STRATA_FMA256)
STRATA_PEAK_KERNEL(dot_bf16, "avx512f,avx512bf16", STRATA_X16, STRATA_PIN_ZMM,
                   const __m512 seed = _mm512_set1_ps(1.0f);
                   const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80);
                   const __m512bh c = (__m512bh)_mm512_set1_epi16(0x3380), STRATA_DOT_BF16)

struct Kernel {
  const char* name;
  double flop_per_iter;  // chains x lanes x 2 (multiply and add)
  double (*run)(long);
};

// Best of `reps` runs of `threads` copies of the kernel, GFLOP/s.
double peak_gflops(const Kernel& k, int threads, long iters, int reps) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<double> sink(threads);
    std::vector<std::thread> pool;
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = k.run(iters); });
    for (auto& th : pool) th.join();
    best = std::max(best, threads * iters * k.flop_per_iter / seconds_since(t0) / 1e9);
    if (sink[0] == 42.0) std::puts("");  // keeps the sums alive
  }
  return best;
}

// Sums 32-bit words [from, to) four vectors at a time: loads, not adds, are the limit.
__attribute__((target("avx2"))) uint32_t sum_words(const uint32_t* p, size_t from, size_t to) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  size_t i = from;
  for (; i + 32 <= to; i += 32) {
    s0 = _mm256_add_epi32(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi32(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    s2 = _mm256_add_epi32(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)));
    s3 = _mm256_add_epi32(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 24)));
  }
  alignas(32) uint32_t lanes[8];
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  uint32_t s = 0;
  for (uint32_t v : lanes) s += v;
  for (; i < to; ++i) s += p[i];
  return s;
}

// Read bandwidth: each thread sums its share of a buffer far larger than any cache.
double read_gbs(int threads, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint32_t), share = n / threads;
  std::unique_ptr<uint32_t[]> buf(new uint32_t[n]);
  for (size_t i = 0; i < n; ++i) buf[i] = uint32_t(i);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<uint32_t> sink(threads);
    std::vector<std::thread> pool;
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sink[t] = sum_words(buf.get(), share * t, share * (t + 1)); });
    for (auto& th : pool) th.join();
    best = std::max(best, double(share * threads * sizeof(uint32_t)) / seconds_since(t0) / 1e9);
    if (sink[0] == 1u) std::puts("");
  }
  return best;
}

// Mean wall time of an empty OpenMP parallel region entered `gap_us` after the last one ended.
double omp_region_us(int gap_us, int count) {
  double total = 0;
  volatile int sink = 0;
  for (int i = 0; i < count; ++i) {
    const auto g = Clock::now();
    while (seconds_since(g) * 1e6 < gap_us) {
    }
    const auto t0 = Clock::now();
#pragma omp parallel
    { sink = sink + omp_get_thread_num(); }
    total += seconds_since(t0);
  }
  return total / count * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the machine's f32 FMA and bf16 dot peaks, read bandwidth and OpenMP region cost"};
  int max_threads = int(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("OMP_NUM_THREADS")) max_threads = std::max(1, std::atoi(env));
  double seconds = 0.3;
  std::string json_path;
  bool force_avx2 = false;
  app.add_option("--threads", max_threads, "largest thread count (default: OMP_NUM_THREADS, else the CPUs)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--seconds", seconds, "about how long each peak is run, per repetition")
      ->check(CLI::Range(0.01, 60.0));
  app.add_option("--json", json_path, "write the numbers here too");
  app.add_flag("--avx2", force_avx2,
               "the f32 peak with AVX2 FMA even where AVX-512 exists (a 256-bit kernel's ceiling)");
  app.set_version_flag("--version", strata::version_line("cpu_peak"));
  STRATA_CLI11_PARSE(app, argc, argv);

  __builtin_cpu_init();
  std::vector<Kernel> kernels;
  if (__builtin_cpu_supports("avx512f") && !force_avx2) {
    kernels.push_back({"f32_fma_avx512", 16 * 16 * 2, fma_avx512});
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernels.push_back({"f32_fma_avx2", 12 * 8 * 2, fma_avx2});
  }
  if (__builtin_cpu_supports("avx512bf16")) kernels.push_back({"bf16_dot_avx512", 16 * 32 * 2, dot_bf16});

  nlohmann::json out;
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  out["OMP_WAIT_POLICY"] = policy ? policy : "(unset)";
  out["threads"] = max_threads;
  std::printf("# cpu_peak | OMP_WAIT_POLICY=%s | up to %d threads\n", policy ? policy : "(unset)", max_threads);
  if (kernels.empty()) std::printf("no AVX2/FMA or AVX-512 on this CPU: no FMA peak measured\n");
  for (const Kernel& k : kernels) {
    // One thread's rate sets the iteration count for about `seconds` per repetition.
    const double one = peak_gflops(k, 1, 1'000'000, 1);
    const long iters = std::max(1L, long(seconds * one * 1e9 / k.flop_per_iter));
    for (int t = 1; t <= max_threads; t = (t == max_threads ? t + 1 : std::min(2 * t, max_threads))) {
      const double g = peak_gflops(k, t, iters, 3);
      out["peak_gflops"][k.name][std::to_string(t)] = g;
      std::printf("%-16s %3d threads  %8.1f GFLOP/s\n", k.name, t, g);
    }
  }
  const bool avx2 = __builtin_cpu_supports("avx2");
  for (int t : {1, max_threads}) {
    if (!avx2) break;
    const double g = read_gbs(t, size_t(256) << 20, 3);
    out["read_gb_per_s"][std::to_string(t)] = g;
    std::printf("memory read      %3d threads  %8.1f GB/s\n", t, g);
    if (max_threads == 1) break;
  }
  omp_set_num_threads(max_threads);
  for (int gap : {0, 100, 1000}) {
    const double us = omp_region_us(gap, 1000);
    out["omp_region_us"]["after_" + std::to_string(gap) + "us_idle"] = us;
    std::printf("empty OpenMP region (%d threads) after %4d us idle: %7.2f us\n", max_threads, gap, us);
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    if (!f) {
      std::fprintf(stderr, "cpu_peak: cannot write --json file '%s'\n", json_path.c_str());
      return strata::kExitFailure;
    }
    f << out.dump(1) << "\n";
  }
  return strata::kExitSuccess;
}
