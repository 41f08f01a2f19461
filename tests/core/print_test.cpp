// Expected strings are PyTorch's repr of the same tensors (torch 2.x), with strata's
// suffix (shape, dtype, device) in place of PyTorch's optional dtype/device suffix.
#include <gtest/gtest.h>

#include <sstream>

#include "strata/core/factories.h"
#include "strata/core/print.h"
#include "support/expect_error.h"

namespace strata {
namespace {

std::string values_of(const Tensor& t) {
  const std::string s = to_string(t);
  return s.substr(0, s.find(", shape=")) + ")";  // PyTorch's part
}

TEST(Print, SuffixNamesShapeDtypeAndDevice) {
  std::ostringstream os;
  os << from_vector({1.f, 2.f, 3.f, 4.f}, {2, 2});
  EXPECT_EQ(os.str(), "tensor([[1., 2.],\n        [3., 4.]], shape=[2,2], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(zeros({0, 3})), "tensor([], shape=[0,3], dtype=f32, device=cpu)");
  EXPECT_EQ(to_string(Tensor()), "tensor(undefined)");
  Tensor g = ones({1});
  g.set_requires_grad(true);
  EXPECT_EQ(to_string(g), "tensor([1.], shape=[1], dtype=f32, device=cpu, requires_grad=true)");
  // str() stays the short summary error messages use.
  EXPECT_EQ(g.str(), "f32[1] on cpu");
}

TEST(Print, FixedScientificAndIntegerFormatsAsTorch) {
  EXPECT_EQ(values_of(from_vector({0.1f, 1.5f, -2.25f})), "tensor([ 0.1000,  1.5000, -2.2500])");
  EXPECT_EQ(values_of(from_vector({1e-5, 1.0})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(values_of(from_vector({1.0, 2000.0})), "tensor([1.0000e+00, 2.0000e+03])");
  EXPECT_EQ(values_of(from_vector({0.0, -3.0, 12.0})), "tensor([ 0., -3., 12.])");
  EXPECT_EQ(values_of(from_vector({NAN, INFINITY, -INFINITY, 1.5f})), "tensor([   nan,    inf,   -inf, 1.5000])");
  EXPECT_EQ(values_of(full({}, 3.5)), "tensor(3.5000)");
  EXPECT_EQ(values_of(from_vector(std::vector<int64_t>{-12, 3, 100})), "tensor([-12,   3, 100])");
  EXPECT_EQ(values_of(full({2}, 1.5, DType::bf16)), "tensor([1.5000, 1.5000])");
}

TEST(Print, HigherRanksSeparateBlocksWithBlankLines) {
  EXPECT_EQ(values_of(zeros({2, 2, 2})),
            "tensor([[[0., 0.],\n"
            "         [0., 0.]],\n"
            "\n"
            "        [[0., 0.],\n"
            "         [0., 0.]]])");
}

TEST(Print, LongRowsWrapAt80Columns) {
  EXPECT_EQ(values_of(arange(0, 20, 1, DType::f32)),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19.])");
}

TEST(Print, MoreThanAThousandElementsAreSummarised) {
  EXPECT_EQ(values_of(arange(2000)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  // The format is chosen from the printed values only: 1 and 9999 are more than 1000 apart.
  EXPECT_EQ(values_of(arange(0, 10000, 1, DType::f32)),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9970e+03, 9.9980e+03,\n"
            "        9.9990e+03])");
  Tensor m = arange(1000, 3000, 1, DType::f32).view({40, 50});
  EXPECT_EQ(values_of(m),
            "tensor([[1000., 1001., 1002.,  ..., 1047., 1048., 1049.],\n"
            "        [1050., 1051., 1052.,  ..., 1097., 1098., 1099.],\n"
            "        [1100., 1101., 1102.,  ..., 1147., 1148., 1149.],\n"
            "        ...,\n"
            "        [2850., 2851., 2852.,  ..., 2897., 2898., 2899.],\n"
            "        [2900., 2901., 2902.,  ..., 2947., 2948., 2949.],\n"
            "        [2950., 2951., 2952.,  ..., 2997., 2998., 2999.]])");
  // A thousand elements are not summarised; options change the limits.
  EXPECT_EQ(to_string(arange(1000)).find("..."), std::string::npos);
  PrintOptions o;
  o.threshold = 5;
  o.edgeitems = 1;
  o.precision = 2;
  const std::string s = to_string(from_vector({0.5, 1.25, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}), o);
  EXPECT_EQ(s, "tensor([0.50,  ..., 7.00], shape=[8], dtype=f64, device=cpu)");
}

TEST(Print, StridedViewsPrintTheirOwnElements) {
  const Tensor t = arange(0, 6, 1, DType::f32).view({2, 3}).permute({1, 0});
  EXPECT_EQ(values_of(t), "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])");
  EXPECT_STRATA_ERROR(to_string(t, PrintOptions{.precision = -1}), "to_string", "precision -1");
}

}  // namespace
}  // namespace strata
