// The bad-input matrix: every function of the op front end, on every CPU
// backend of the build, against every defect a user's tensor can have — wrong rank,
// sizes that do not fit the other arguments, a wrong dtype, another device, an
// undefined tensor — one argument at a time. Each defect must be a strata::Error
// whose message names the op and the argument (sizes defects: the op and the
// offending shape), and the process must stay usable: the valid call right after
// gives bitwise the result it gave before. Non-contiguous inputs are supported by
// every op of every backend, so there the check is the other way round: the same
// values in a strided layout give the same result.
//
// Mixed devices: CI has no GPU, so "another device" is a tensor that claims cuda:0
// over borrowed host memory (as tests/ops do). A CPU backend must reject it before
// reading it: with a real GPU tensor that read would be a segfault, here it would be
// a silent success that the matrix catches.
// tests/ops/op_errors*_test.cpp keep their hand-picked cases; this file is the
// systematic sweep. Zero-size and overflowing sizes are in huge_and_empty_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <typeinfo>
#include <vector>

#include "bad_input_cases.h"

namespace strata::testing {
namespace {

TEST(BadInputMatrixTable, CoversEveryOpOfTheTableAndEveryCaseRuns) {
  const std::vector<OpCase> cases = all_cases();
  std::vector<std::string> ids;
  for (const OpCase& c : cases) ids.push_back(c.id);
  EXPECT_EQ(ids, kCaseIds) << "keep kCaseIds in step with all_cases()";
  std::string missing;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    bool found = false;
    for (const OpCase& c : cases) found |= c.table_op == op;
    if (!found) missing += std::string(ops::op_name(op)) + " ";
  }
  EXPECT_TRUE(missing.empty()) << "ops of op_table.def without a row in the matrix: " << missing;
}

class BadInputMatrix : public ::testing::TestWithParam<std::string> {};

TEST_P(BadInputMatrix, EveryDefectIsAClearErrorAndTheProcessStaysUsable) {
  const OpCase c = case_by_id(GetParam());
  ASSERT_FALSE(c.id.empty()) << "no case " << GetParam();
  int errors_checked = 0, layouts_checked = 0;
  for (backends::Backend* b : cpu_backends()) {
    SCOPED_TRACE("backend " + std::string(b->name()) + ", op " + c.op);
    const D d(*b);
    const std::vector<Tensor> valid = valid_args(c);
    std::vector<Tensor> baseline;
    ASSERT_NO_THROW(baseline = run(c, d, valid)) << "the valid call fails";
    const auto still_usable = [&](const std::string& after) {
      std::vector<Tensor> again;
      ASSERT_NO_THROW(again = run(c, d, valid)) << "after " << after;
      expect_same_outputs(again, baseline, /*bitwise=*/true, "after " + after);
    };

    for (size_t i = 0; i < c.args.size(); ++i) {
      const Arg& a = c.args[i];
      for (unsigned defect : {kRank, kSizes, kDtype, kDevice, kUndefined}) {
        if (!(a.rejects & defect)) continue;
        std::vector<Tensor> args = valid;
        const Tensor bad = with_defect(a, defect);
        args[i] = bad;
        const std::string what = defect_name(defect) + " for '" + a.name + "' (" + bad.str() + ")";
        std::vector<const char*> parts{c.op.c_str()};
        const std::string shape = bad.defined() ? bad.sizes().str() : "";
        if (defect == kSizes) parts.push_back(shape.c_str());
        if (defect == kDevice) parts.push_back("cuda:0");
        try {
          run(c, d, args);
          ADD_FAILURE() << what << " was accepted";
        } catch (const Error& e) {
          const std::string msg = e.what();
          for (const char* p : parts) {
            EXPECT_NE(msg.find(p), std::string::npos) << what << ": \"" << msg << "\" lacks " << p;
          }
          if (defect != kSizes) {
            EXPECT_TRUE(names_word(msg, a.name)) << what << ": \"" << msg << "\" does not name '" << a.name << "'";
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << what << " threw a " << typeid(e).name() << ", not strata::Error: " << e.what();
        }
        ++errors_checked;
        still_usable(what);
      }
      // Strided copies of the same values: every backend takes any strides.
      if (a.value.dim() >= 1 && a.value.numel() > 1) {
        std::vector<Tensor> args = valid;
        args[i] = noncontiguous(a.value);
        ASSERT_FALSE(args[i].is_contiguous());
        std::vector<Tensor> out;
        ASSERT_NO_THROW(out = run(c, d, args)) << "non-contiguous '" << a.name << "'";
        // oneDNN/OpenBLAS may pick another kernel for another layout: same values up to rounding.
        expect_same_outputs(out, baseline, b->name() == "reference", "non-contiguous '" + a.name + "'");
        ++layouts_checked;
      }
    }
  }
  std::printf("%s: %d defects rejected, %d strided layouts checked, over %zu backends\n", c.id.c_str(), errors_checked,
              layouts_checked, cpu_backends().size());
  EXPECT_GT(errors_checked + layouts_checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Ops, BadInputMatrix, ::testing::ValuesIn(kCaseIds),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace strata::testing
