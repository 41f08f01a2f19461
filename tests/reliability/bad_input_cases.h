#pragma once
// The bad-input matrix's table: every function of the op front end with valid arguments and the
// defects each argument must be rejected for. Shared by the front-end sweep
// (bad_input_matrix_test.cpp) and the direct-mode one (bad_input_matrix_direct_test.cpp).
#include <functional>
#include <string>
#include <vector>

#include "reliability_util.h"

namespace strata::testing {

using ops::Conv2dParams;
using ops::Pool2dParams;
using D = ops::VirtualDispatch;

enum Defect : unsigned { kRank = 1u, kSizes = 2u, kDtype = 4u, kDevice = 8u, kUndefined = 16u };
constexpr unsigned kAll = kRank | kSizes | kDtype | kDevice | kUndefined;
// Element-wise arguments: any rank, so only the other defects apply.
constexpr unsigned kAnyRank = kAll & ~kRank;

struct Arg {
  std::string name;  // as the op's messages call it
  Tensor value;      // a valid value
  unsigned rejects = 0;
  Shape bad_sizes = {};          // kSizes: sizes that do not fit the other arguments
  DType bad_dtype = DType::f64;  // kDtype (the valid tensors are f32, i64 labels or u8 masks)
  bool mutated = false;          // written in place: every call gets a fresh copy
};

struct OpCase {
  std::string id;  // the test's name
  ops::OpId table_op;
  std::string op;  // the name the messages start with
  std::vector<Arg> args;
  std::function<std::vector<Tensor>(const D&, const std::vector<Tensor>&)> call;
};

// The case's function on its arguments (mutated arguments get fresh copies).
std::vector<Tensor> run(const OpCase& c, const D& d, std::vector<Tensor> args);
std::vector<Tensor> valid_args(const OpCase& c);
// A's value with `defect` (an undefined tensor for kUndefined).
Tensor with_defect(const Arg& a, unsigned defect);
std::string defect_name(unsigned d);
// Random f32 values in [0.5, 1.5): valid variances, scales and the like.
Tensor pos(const Shape& s);

// Every case, in the order of kCaseIds; the one named id (an empty id when there is none).
std::vector<OpCase> all_cases();
// all_cases()'s rows of the tensor API's and the transformer's ops (bad_input_tensor_cases.cpp).
void add_tensor_api_cases(std::vector<OpCase>& v);
extern const std::vector<std::string> kCaseIds;
OpCase case_by_id(const std::string& id);

}  // namespace strata::testing
