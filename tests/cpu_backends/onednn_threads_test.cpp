// Small work runs on one thread (backends/cpu/threads.h, docs/threads.md): the thread count an
// op's work is worth, and the onednn backend observed keeping small primitives on the calling
// thread. The observation reads the process's threads (/proc/self/task): libgomp starts its pool's
// threads at the first parallel region of more than one thread, so small ops must leave the count
// as it was and a large op must raise it. It runs in its own process (ctest, OMP_NUM_THREADS=2).
#include <dirent.h>

#include "cpu_backend_test_util.h"
#include "strata/backends/cpu/threads.h"

namespace strata::testing {
namespace {

using backends::loops::elementwise_work;
using backends::loops::kElementsPerThread;
using backends::loops::kMultiplyAddsPerThread;
using backends::loops::product_work;
using backends::loops::threads_for;

TEST(ThreadsFor, OneThreadUpToAGrainThenOnePerGrainUpToThePool) {
  EXPECT_EQ(threads_for(elementwise_work(0), 8), 1);
  EXPECT_EQ(threads_for(elementwise_work(1), 8), 1);
  EXPECT_EQ(threads_for(elementwise_work(kElementsPerThread), 8), 1);
  EXPECT_EQ(threads_for(elementwise_work(kElementsPerThread + 1), 8), 2);
  EXPECT_EQ(threads_for(elementwise_work(3 * kElementsPerThread), 8), 3);
  EXPECT_EQ(threads_for(elementwise_work(100 * kElementsPerThread), 8), 8);
  EXPECT_EQ(threads_for(elementwise_work(100 * kElementsPerThread), 1), 1);
  EXPECT_EQ(threads_for(elementwise_work(100 * kElementsPerThread), 0), 1);
  // A LeNet-sized layer at batch 1 (6 channels of 28x28 from a 5x5 window on one channel): one thread.
  EXPECT_EQ(threads_for(product_work(6 * 28 * 28 * 25), 64), 1);
  // ResNet-50's first convolution at batch 8, 224x224: every thread of a large machine.
  EXPECT_EQ(threads_for(product_work(int64_t{8} * 64 * 112 * 112 * 3 * 7 * 7), 64), 64);
  EXPECT_EQ(threads_for(product_work(2 * kMultiplyAddsPerThread + 1), 64), 3);
}

#ifdef STRATA_HAVE_BACKEND_ONEDNN
int process_threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

TEST(OneDnnThreads, SmallPrimitivesStartNoPoolThreadsALargeOneDoes) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr || std::atoi(env) < 2) GTEST_SKIP() << "needs OMP_NUM_THREADS >= 2 (its ctest entry sets 2)";
  backends::OneDnnBackend be;
  const int before = process_threads();
  ASSERT_GT(before, 0);
  // A tiny MLP's and a tiny CNN's primitives, forward and backward.
  const Tensor x = rand_f32({8, 16}, 1), w = rand_f32({32, 16}, 2), b = rand_f32({32}, 3);
  const Tensor y = rand_f32({8, 32}, 4), dx = rand_f32({8, 16}, 5), dw = rand_f32({32, 16}, 6);
  be.linear_fwd({x, w, b, y});
  be.linear_bwd_data({y, w, dx});
  be.linear_bwd_weight({x, y, dw, {}});
  Conv2dParams cp;
  cp.pad_h = cp.pad_w = 1;
  const Tensor img = rand_f32({2, 3, 12, 12}, 7), k = rand_f32({4, 3, 3, 3}, 8), out = rand_f32({2, 4, 12, 12}, 9);
  be.conv2d_fwd({img, k, {}, out, cp});
  be.conv2d_bwd_weight({img, out, rand_f32({4, 3, 3, 3}, 10), cp});
  Pool2dParams pp;
  pp.kernel_h = pp.kernel_w = pp.stride_h = pp.stride_w = 2;
  be.max_pool2d_fwd({out, rand_f32({2, 4, 6, 6}, 11), pp});
  EXPECT_EQ(process_threads(), before) << "a small primitive started the OpenMP pool";
  // A product worth many threads: the pool starts (the check above can fail).
  const Tensor bx = rand_f32({256, 512}, 12), bw = rand_f32({512, 512}, 13), by = rand_f32({256, 512}, 14);
  be.linear_fwd({bx, bw, {}, by});
  EXPECT_GT(process_threads(), before) << "a large matmul ran on one thread";
}
#endif

}  // namespace
}  // namespace strata::testing
