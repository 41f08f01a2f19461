// The onednn backend's own loops that split over OpenMP threads (optimizer steps on
// large contiguous tensors; eval batch norm is in norm_pool_test): against the
// reference, and bitwise against the openblas backend's single-threaded run of the
// same loops, on sizes past the parallel threshold with a ragged last part.
#include "cpu_backend_test_util.h"

namespace strata::testing {
namespace {

#ifdef STRATA_HAVE_BACKEND_ONEDNN
constexpr int64_t kN = 3 * 16384 + 77;

TEST(OneDnnParallelLoops, SgdAndAdamStepsMatchSerialLoops) {
  backends::OneDnnBackend be;
  ReferenceBackend ref;
  std::unique_ptr<Backend> serial = make_cpu_backend("openblas");
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "sgd nesterov" : "sgd");
    const Tensor p = rand_f32({kN}, 30000), buf = rand_f32({kN}, 30001, kNCHW, 0, 0.1);
    const Tensor p_r = copy_of(p), buf_r = copy_of(buf), p_s = copy_of(p), buf_s = copy_of(buf);
    for (int step = 0; step < 2; ++step) {
      const Tensor g = rand_f32({kN}, 30002 + step);
      ops::SgdStepArgs a{p, g, buf};
      a.o.lr = 0.05, a.o.momentum = 0.9, a.o.weight_decay = 1e-2, a.o.nesterov = nesterov;
      be.sgd_step(a);
      a.param = p_r, a.momentum_buf = buf_r;
      ref.sgd_step(a);
      a.param = p_s, a.momentum_buf = buf_s;
      if (serial) serial->sgd_step(a);
    }
    STRATA_EXPECT_CLOSE(p, p_r, kTolReduction, "sgd_step param");
    STRATA_EXPECT_CLOSE(buf, buf_r, kTolReduction, "sgd_step momentum_buf");
    if (serial) {
      EXPECT_TRUE(bitwise_equal(p, p_s));
      EXPECT_TRUE(bitwise_equal(buf, buf_s));
    }
  }
  const Tensor p = rand_f32({kN}, 31000), p_r = copy_of(p), p_s = copy_of(p);
  const Tensor m = rand_f32({kN}, 31001, kNCHW, 0, 0), v = copy_of(m);
  const Tensor m_r = copy_of(m), v_r = copy_of(m), m_s = copy_of(m), v_s = copy_of(m);
  for (int step = 1; step <= 3; ++step) {
    const Tensor g = rand_f32({kN}, 31002 + step);
    ops::AdamStepArgs a{p, g, m, v};
    a.o.lr = 1e-2, a.o.weight_decay = 1e-2, a.o.decoupled_weight_decay = true, a.step = step;
    be.adam_step(a);
    a.param = p_r, a.exp_avg = m_r, a.exp_avg_sq = v_r;
    ref.adam_step(a);
    a.param = p_s, a.exp_avg = m_s, a.exp_avg_sq = v_s;
    if (serial) serial->adam_step(a);
  }
  STRATA_EXPECT_CLOSE(p, p_r, kTolReduction, "adam_step param");
  STRATA_EXPECT_CLOSE(v, v_r, kTolReduction, "adam_step exp_avg_sq");
  if (serial) {
    EXPECT_TRUE(bitwise_equal(p, p_s));
    EXPECT_TRUE(bitwise_equal(m, m_s));
    EXPECT_TRUE(bitwise_equal(v, v_s));
  }
}
#endif

}  // namespace
}  // namespace strata::testing
