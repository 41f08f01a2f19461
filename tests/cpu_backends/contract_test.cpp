// The CPU backends' contract beyond values: what supports() answers, the error an
// unsupported dtype raises, bitwise determinism (same input twice, same output),
// oneDNN's primitive cache reuse, and that every op of the table is compared with
// the reference by some test of this executable.
#include <iostream>
#include <string>

#include "cpu_backend_test_util.h"

namespace strata::testing {
namespace {

#ifdef STRATA_HAVE_BACKEND_ONEDNN
static_assert(backends::BackendImpl<backends::OneDnnBackend>);
#endif
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
static_assert(backends::BackendImpl<backends::OpenBlasBackend>);
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
static_assert(backends::BackendImpl<backends::EigenBackend>);
#endif

class ContractTest : public CpuBackendTest {};

// The memory ops (fill, copy, space_to_depth) move or set elements in any dtype; nothing
// else does integer or f16 math on a CPU backend.
// The ops that move elements of any dtype: the memory ops, but index_add, which adds.
bool is_any_dtype_op(ops::OpId op) {
  return ops::op_kind(op) == ops::OpKind::memory && op != ops::OpId::index_add;
}

TEST_P(ContractTest, SupportsF32EverywhereAndNoIntegerMath) {
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    EXPECT_TRUE(be().supports(op, DType::f32)) << ops::op_name(op);
    // Comparisons read integers too (labels against predictions), and write u8.
    EXPECT_EQ(be().supports(op, DType::i32), is_any_dtype_op(op) || op == ops::OpId::compare) << ops::op_name(op);
    EXPECT_EQ(be().supports(op, DType::f16), is_any_dtype_op(op)) << ops::op_name(op);
  }
}

TEST_P(ContractTest, SupportsF64WhereImplemented) {
  using ops::OpId;
  if (GetParam() == "openblas" || GetParam() == "eigen") {  // dgemm / Eigen templates: every op
    for (int i = 0; i < ops::kNumOps; ++i) EXPECT_TRUE(be().supports(static_cast<OpId>(i), DType::f64));
    return;
  }
  // onednn: primitives are f32 only; the loop-based ops run f64 too.
  for (OpId op : {OpId::conv2d_fwd, OpId::batch_norm_fwd, OpId::relu_fwd, OpId::max_pool2d_bwd, OpId::linear_fwd,
                  OpId::add, OpId::scale, OpId::sum, OpId::mean})
    EXPECT_FALSE(be().supports(op, DType::f64)) << ops::op_name(op);
  for (OpId op : {OpId::axpy, OpId::dropout_fwd, OpId::softmax_xent_fwd, OpId::softmax_xent_bwd, OpId::bce_logits_fwd,
                  OpId::argmax, OpId::sgd_step, OpId::adam_step, OpId::fill, OpId::copy})
    EXPECT_TRUE(be().supports(op, DType::f64)) << ops::op_name(op);
}

// f64 where supports() says so, against the reference at f64 precision. openblas and
// eigen run every op in f64 (dgemm, Eigen's templates); onednn only its loop-based ops.
TEST_P(ContractTest, F64MatchesReferenceWhereSupported) {
  constexpr double kTolF64 = 1e-12;
  const auto r64 = [](const Shape& s, uint64_t seed) { return random_tensor(s, DType::f64, seed); };
  const auto nan64 = [](const Shape& s) { return nan_tensor(s, kNCHW, DType::f64); };
  if (be().supports(ops::OpId::conv2d_fwd, DType::f64)) {
    Conv2dParams p;
    p.pad_h = p.pad_w = 1, p.stride_h = 2, p.groups = 2;
    const Tensor x = r64({2, 4, 7, 6}, 22000), w = r64({6, 2, 3, 3}, 22001), b = r64({6}, 22002);
    const Tensor y = nan64({2, 6, 4, 6}), y_r = nan64({2, 6, 4, 6});
    be().conv2d_fwd({x, w, b, y, p});
    ref_.conv2d_fwd({x, w, b, y_r, p});
    STRATA_EXPECT_CLOSE(y, y_r, kTolF64, "conv2d_fwd f64");
    const Tensor dx = nan64({2, 4, 7, 6}), dx_r = nan64({2, 4, 7, 6}), dw = nan64({6, 2, 3, 3}), dw_r = nan64({6, 2, 3, 3});
    be().conv2d_bwd_data({y_r, w, dx, p});
    ref_.conv2d_bwd_data({y_r, w, dx_r, p});
    STRATA_EXPECT_CLOSE(dx, dx_r, kTolF64, "conv2d_bwd_data f64");
    be().conv2d_bwd_weight({x, y_r, dw, p});
    ref_.conv2d_bwd_weight({x, y_r, dw_r, p});
    STRATA_EXPECT_CLOSE(dw, dw_r, kTolF64, "conv2d_bwd_weight f64");
  }
  if (be().supports(ops::OpId::linear_fwd, DType::f64)) {
    const Tensor x = r64({3, 9}, 22003), w = r64({5, 9}, 22004), y = nan64({3, 5}), y_r = nan64({3, 5});
    be().linear_fwd({x, w, Tensor(), y});
    ref_.linear_fwd({x, w, Tensor(), y_r});
    STRATA_EXPECT_CLOSE(y, y_r, kTolF64, "linear_fwd f64");
  }
  if (be().supports(ops::OpId::batch_norm_fwd, DType::f64)) {
    const Tensor x = r64({2, 3, 4, 4}, 22005), g = r64({3}, 22006), b = r64({3}, 22007);
    const Tensor y = nan64({2, 3, 4, 4}), y_r = nan64({2, 3, 4, 4});
    const Tensor sm = nan64({3}), si = nan64({3});
    be().batch_norm_fwd({x, g, b, Tensor(), Tensor(), y, sm, si});
    ref_.batch_norm_fwd({x, g, b, Tensor(), Tensor(), y_r, sm, si});
    STRATA_EXPECT_CLOSE(y, y_r, kTolF64, "batch_norm_fwd f64");
  }
  ASSERT_TRUE(be().supports(ops::OpId::adam_step, DType::f64));  // both backends: a loop
  const Tensor p = r64({40}, 22008), p_r = copy_of(p), g = r64({40}, 22009);
  const Tensor m = nan64({40}), v = nan64({40});
  ref_.fill({m, 0.0});
  ref_.fill({v, 0.0});
  const Tensor m_r = copy_of(m), v_r = copy_of(v);
  be().adam_step({p, g, m, v});
  ref_.adam_step({p_r, g, m_r, v_r});
  STRATA_EXPECT_CLOSE(p, p_r, kTolF64, "adam_step f64");
  const Tensor x = r64({4, 6}, 22010), t = random_tensor({4, 6}, DType::f64, 22011, 0, 1);
  const Tensor l = nan64({}), l_r = nan64({});
  be().bce_logits_fwd({x, t, l});
  ref_.bce_logits_fwd({x, t, l_r});
  STRATA_EXPECT_CLOSE(l, l_r, kTolF64, "bce_logits_fwd f64");
}

// Every op with a dtype supports() refuses raises strata::Error naming op and backend.
void expect_error_naming(const std::function<void()>& call, const std::string& backend, const std::string& op,
                         const std::string& dtype) {
  try {
    call();
    ADD_FAILURE() << op << " on " << backend << " accepted " << dtype;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(backend), std::string::npos) << msg;
    EXPECT_NE(msg.find(op), std::string::npos) << msg;
    EXPECT_NE(msg.find(dtype), std::string::npos) << msg;
  }
}

TEST_P(ContractTest, UnsupportedDtypeIsAStrataErrorNamingOpAndBackend) {
  const auto half = [](const Shape& s) { return Tensor::empty(s, DType::f16); };
  const Tensor x = half({1, 2, 5, 5}), w = half({3, 2, 3, 3}), y = half({1, 3, 3, 3});
  expect_error_naming([&] { be().conv2d_fwd({x, w, Tensor(), y, {}}); }, GetParam(), "conv2d_fwd", "f16");
  expect_error_naming([&] { be().relu_fwd({x, x}); }, GetParam(), "relu_fwd", "f16");
  expect_error_naming([&] { be().sum({x, half({})}); }, GetParam(), "sum", "f16");
  if (GetParam() == "onednn") {
    const auto dbl = [](const Shape& s) { return Tensor::empty(s, DType::f64); };
    expect_error_naming([&] { be().conv2d_fwd({dbl({1, 2, 5, 5}), dbl({3, 2, 3, 3}), Tensor(), dbl({1, 3, 3, 3}), {}}); },
                        "onednn", "conv2d_fwd", "f64");
  }
}

TEST_P(ContractTest, DeterministicBitwise) {
  Conv2dParams p;
  p.pad_h = p.pad_w = 1, p.stride_h = p.stride_w = 2;
  const Tensor x = rand_f32({4, 32, 14, 14}, 20000), w = rand_f32({48, 32, 3, 3}, 20001);
  const Tensor b = rand_f32({48}, 20002), dy = rand_f32({4, 48, 7, 7}, 20003);
  const Tensor wl = rand_f32({48, 32 * 14 * 14}, 20007);
  const Tensor g = rand_f32({32}, 20004), beta = rand_f32({32}, 20005), dyb = rand_f32({4, 32, 14, 14}, 20006);
  auto run = [&] {
    std::vector<Tensor> out = {nan_tensor({4, 48, 7, 7}), nan_tensor({4, 32, 14, 14}), nan_tensor({48, 32, 3, 3}),
                               nan_tensor({48}),          nan_tensor({4, 32, 14, 14}), nan_tensor({32}),
                               nan_tensor({32}),          nan_tensor({4, 32, 14, 14}), nan_tensor({32}),
                               nan_tensor({32}),          nan_tensor({}),              nan_tensor({4, 48})};
    be().conv2d_fwd({x, w, b, out[0], p});
    be().conv2d_bwd_data({dy, w, out[1], p});
    be().conv2d_bwd_weight({x, dy, out[2], p});
    be().conv2d_bwd_bias({dy, out[3]});
    ops::BatchNormFwdArgs bf{x, g, beta, Tensor(), Tensor(), out[4], out[5], out[6]};
    be().batch_norm_fwd(bf);
    be().batch_norm_bwd({x, dyb, g, out[5], out[6], out[7], out[8], out[9]});
    be().sum({x, out[10]});
    be().linear_fwd({x.view({4, 32 * 14 * 14}), wl, b, out[11]});
    return out;
  };
  const auto first = run(), second = run();
  for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(bitwise_equal(first[i], second[i])) << "output " << i;
}

TEST_P(ContractTest, Describe) {
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
  if (GetParam() == "openblas") {
    const std::string d = backends::OpenBlasBackend::describe();
    EXPECT_NE(d.find("core="), std::string::npos) << d;
    RecordProperty("openblas", d);
    std::cout << "[ openblas ] " << d << "\n";
  }
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
  if (GetParam() == "eigen") {
    const std::string d = backends::EigenBackend{}.describe();
    EXPECT_NE(d.find("Eigen 3."), std::string::npos) << d;
    EXPECT_NE(d.find("threads="), std::string::npos) << d;
    RecordProperty("eigen", d);
    std::cout << "[ eigen ] " << d << "\n";
  }
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
  if (GetParam() == "onednn") {
    const std::string d = backends::OneDnnBackend{}.describe();
    EXPECT_NE(d.find("oneDNN"), std::string::npos) << d;
    RecordProperty("onednn", d);
    std::cout << "[ onednn ] " << d << "\n";
  }
#endif
}

#ifdef STRATA_HAVE_BACKEND_ONEDNN
// A repeated call reuses its cached primitive; a new shape adds one plan.
TEST(OneDnnPlanCache, ReusesPlansPerShape) {
  backends::OneDnnBackend be;
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Tensor x = rand_f32({2, 8, 6, 6}, 21000), w = rand_f32({8, 8, 3, 3}, 21001), y = nan_tensor({2, 8, 6, 6});
  be.conv2d_fwd({x, w, Tensor(), y, p});
  const size_t plans = be.cached_plans();
  EXPECT_GE(plans, 1u);
  for (int i = 0; i < 3; ++i) be.conv2d_fwd({x, w, Tensor(), y, p});
  EXPECT_EQ(be.cached_plans(), plans);
  const Tensor x2 = rand_f32({1, 8, 6, 6}, 21002), y2 = nan_tensor({1, 8, 6, 6});
  be.conv2d_fwd({x2, w, Tensor(), y2, p});
  EXPECT_EQ(be.cached_plans(), plans + 1);
}
#endif

// Every op of op_table.def is compared with the reference by some test here.
TEST(CpuBackendCoverage, EveryOpIsComparedWithTheReference) {
  std::string missing;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    const auto it = op_coverage().find(op);
    if (it == op_coverage().end() || !it->second.count("vs_reference")) missing += " " + std::string(ops::op_name(op));
  }
  EXPECT_TRUE(missing.empty()) << "ops never compared with the reference on the CPU backends:" << missing;
}

STRATA_CPU_BACKEND_SUITE(ContractTest);

}  // namespace
}  // namespace strata::testing
