// Every claim of every backend's capability table, checked: each op of the table in
// each floating dtype and, for the spatial ops, each layout (NCHW, NHWC, strided
// views). Where the table says the backend runs it, the call must run and agree with
// the reference backend on the same values (computed in f64); where the table says it
// does not, the call must be a strata::Error naming the op, the backend and the
// dtype. So a table cannot claim what the backend does not do, nor hide what it
// refuses. The calls are the bad-input matrix's valid ones (bad_input_cases.h); the
// cuda backend is swept too when a GPU is present. null is left out: its table claims
// everything and it computes nothing, by design.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bad_input_cases.h"
#include "strata/backends/api/capabilities.h"
#include "strata/ops/functional.h"
#include "strata/ops/shape_rules.h"

namespace strata::testing {
namespace {

using backends::ViewLayout;

constexpr DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

std::vector<backends::Backend*> swept_backends() {
  std::vector<backends::Backend*> out;
  for (const std::string& name : backends::registry().names())
    if (name != "null" && name != "reference") out.push_back(&backends::registry().get(name));
  return out;
}

// Tolerance on ||got - want|| / ||want|| for outputs of dtype `dt`: a few roundings of
// the output's precision (the inputs are already rounded to it).
double tolerance(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-10;
    case DType::f32: return 2e-5;
    case DType::f16: return 4e-3;
    case DType::bf16: return 3e-2;
    default: return 0;
  }
}

Tensor in_layout(const Tensor& t, ViewLayout l) {
  if (t.dim() != 4 || l == ViewLayout::nchw) return t;
  return l == ViewLayout::nhwc ? t.contiguous(MemoryFormat::channels_last) : noncontiguous(t);
}

Tensor as_dtype(const Tensor& t, DType dt) {
  if (!t.defined() || t.dtype() == dt) return t;
  Tensor out = Tensor::empty(t.sizes(), dt);
  copy_into(t, out);
  return out;
}

// The case's arguments in dtype `dt` (dense, on the CPU): its f32 values become `dt`
// (batch norm's per-channel tensors take ops::batch_norm_param_dtype of its input
// instead); labels and masks keep their dtypes.
std::vector<Tensor> in_dtype(const OpCase& c, DType dt) {
  std::vector<Tensor> out;
  const bool norm = ops::op_kind(c.table_op) == ops::OpKind::norm;
  const DType params = ops::batch_norm_param_dtype(Tensor::empty(Shape{1, 1, 1, 1}, dt));
  for (const Arg& a : c.args) {
    if (a.value.dtype() != DType::f32)
      out.push_back(a.value);
    else
      out.push_back(as_dtype(a.value, norm && a.value.dim() == 1 ? params : dt));
  }
  // max_pool2d_bwd reads the forward's output: give it the true one, so backends that
  // route the gradient by comparing with it and those that recompute the argmax agree
  // (a maximum is one of the values, so it is exact in any dtype).
  if (c.table_op == ops::OpId::max_pool2d_bwd) {
    const OpCase fwd = case_by_id("max_pool2d");
    out[1] = as_dtype(fwd.call(reference_dispatch(), {as_dtype(out[0], DType::f32)})[0], dt);
  }
  return out;
}

// The backend's outputs for `args` in layout `l` (moved to its device first), back on the CPU.
std::vector<Tensor> run_on(const OpCase& c, backends::Backend& b, const std::vector<Tensor>& args, ViewLayout l) {
  const D d(b);
  std::vector<Tensor> on;
  for (const Tensor& t : args) {
    Tensor v = t;
    if (v.defined() && b.device_type() != DeviceType::cpu)
      v = ops::to(d, v, v.dtype(), Device{b.device_type(), 0}, MemoryFormat::contiguous);
    on.push_back(in_layout(v, l));
  }
  std::vector<Tensor> out = run(c, d, on);
  for (Tensor& t : out)
    if (t.defined() && !t.device().is_cpu()) t = ops::to(d, t, t.dtype(), Device::cpu(), MemoryFormat::contiguous);
  return out;
}

// argmax of values rounded to bf16 may meet ties the reference breaks another way:
// the index must point at a largest value of its row.
void expect_argmax(const Tensor& input, const Tensor& got, const std::string& what) {
  const Tensor x = as_dtype(input, DType::f64);
  const int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data<double>() + r * cols;
    const int64_t i = got.data<int64_t>()[r];
    ASSERT_TRUE(i >= 0 && i < cols) << what << ": index " << i;
    for (int64_t j = 0; j < cols; ++j) EXPECT_GE(row[i], row[j]) << what << ", row " << r;
  }
}

void expect_matches_reference(const OpCase& c, const std::vector<Tensor>& args, const std::vector<Tensor>& got,
                              const std::string& what) {
  std::vector<Tensor> args64;
  for (const Tensor& t : args) args64.push_back(t.defined() && is_floating(t.dtype()) ? as_dtype(t, DType::f64) : t);
  const std::vector<Tensor> want = run(c, reference_dispatch(), args64);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string out = what + ", output " + std::to_string(i);
    ASSERT_EQ(got[i].defined(), want[i].defined()) << out;
    if (!got[i].defined()) continue;
    if (c.table_op == ops::OpId::argmax) {
      expect_argmax(args[0], got[i], out);
    } else if (!is_floating(got[i].dtype())) {
      EXPECT_TRUE(bitwise_equal(got[i], want[i])) << out;
    } else {
      const double err = relative_error(as_dtype(got[i], DType::f64), want[i]);
      EXPECT_LE(err, tolerance(got[i].dtype())) << out << " (" << got[i].str() << ")";
    }
  }
}

void expect_refused(const OpCase& c, backends::Backend& b, const std::vector<Tensor>& args, ViewLayout l,
                    const std::string& what, const std::string& named) {
  try {
    run_on(c, b, args, l);
    ADD_FAILURE() << what << ": ran, but the table says the backend does not";
  } catch (const Error& e) {
    const std::string msg = e.what();
    const bool names_op = msg.find(c.op) != std::string::npos || msg.find(ops::op_name(c.table_op)) != std::string::npos;
    EXPECT_TRUE(names_op && msg.find(std::string(b.name())) != std::string::npos && msg.find(named) != std::string::npos)
        << what << ": the error must name the op, the backend and " << named << ": " << msg;
  }
}

class CapabilitySweep : public ::testing::TestWithParam<std::string> {};

TEST_P(CapabilitySweep, EveryClaimOfEveryTableHolds) {
  const OpCase c = case_by_id(GetParam());
  ASSERT_FALSE(c.id.empty()) << "no case " << GetParam();
  int ran = 0, refused = 0;
  for (backends::Backend* b : swept_backends()) {
    const backends::Capabilities& caps = b->capabilities();
    for (DType dt : kFloats) {
      const std::vector<Tensor> args = in_dtype(c, dt);
      const bool spatial = ops::is_spatial(ops::op_kind(c.table_op));
      for (ViewLayout l : {ViewLayout::nchw, ViewLayout::nhwc, ViewLayout::strided}) {
        if (!spatial && l != ViewLayout::nchw) continue;
        const std::string what = std::string(b->name()) + " " + c.id + " " + std::string(dtype_name(dt)) +
                                 (spatial ? std::string(" ") + backends::layout_name(l) : "");
        SCOPED_TRACE(what);
        if (!caps.supports(c.table_op, dt)) {
          expect_refused(c, *b, args, l, what, std::string(dtype_name(dt)));
          ++refused;
        } else if (spatial && !caps.accepts(c.table_op, l)) {
          expect_refused(c, *b, args, l, what, backends::layout_name(l));
          ++refused;
        } else {
          std::vector<Tensor> got;
          ASSERT_NO_THROW(got = run_on(c, *b, args, l)) << what << ": the table says the backend runs it";
          expect_matches_reference(c, args, got, what);
          ++ran;
        }
      }
    }
  }
  if (swept_backends().empty()) GTEST_SKIP() << "no backend besides reference and null in this build";
  EXPECT_GT(ran + refused, 0);
  std::printf("[ sweep    ] %s: %d calls checked against the reference, %d refusals checked\n", c.id.c_str(), ran,
              refused);
}

INSTANTIATE_TEST_SUITE_P(AllOps, CapabilitySweep, ::testing::ValuesIn(kCaseIds),
                         [](const auto& info) { return info.param; });

TEST(CapabilityTables, EveryBackendRunsEveryOpInF32AndPrintsItsTable) {
  for (backends::Backend* b : swept_backends()) {
    const std::string table = b->capabilities().table();
    for (int i = 0; i < ops::kNumOps; ++i) {
      const auto op = static_cast<ops::OpId>(i);
      EXPECT_TRUE(b->supports(op, DType::f32)) << b->name() << " " << ops::op_name(op);
      EXPECT_NE(table.find(std::string(ops::op_name(op))), std::string::npos) << table;
    }
  }
}

// No backend restricts layouts today; the table's layout rows still say what they claim.
TEST(CapabilityTables, LayoutRowsRestrictOnlyTheOpsTheyName) {
  backends::Capabilities c;
  c.all(backends::kFloat32).layouts({ops::OpId::conv2d_fwd}, static_cast<uint8_t>(ViewLayout::nchw));
  EXPECT_FALSE(c.accepts_every_layout(ops::OpId::conv2d_fwd));
  EXPECT_TRUE(c.accepts(ops::OpId::conv2d_fwd, ViewLayout::nchw));
  EXPECT_FALSE(c.accepts(ops::OpId::conv2d_fwd, ViewLayout::nhwc));
  EXPECT_FALSE(c.accepts(ops::OpId::conv2d_fwd, ViewLayout::strided));
  EXPECT_TRUE(c.accepts_every_layout(ops::OpId::conv2d_bwd_data));
  const std::string table = c.table();
  const std::string row = table.substr(0, table.find('\n'));
  EXPECT_NE(row.find("nchw"), std::string::npos) << row;
  EXPECT_EQ(row.find("nhwc"), std::string::npos) << row;
}

}  // namespace
}  // namespace strata::testing
