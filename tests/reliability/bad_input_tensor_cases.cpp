// The bad-input matrix's rows for the tensor API's ops (ops/tensor_ops.h) and the transformer's
// fused ones (ops/transformer_ops.h): one case per row of the op table.
#include "bad_input_cases.h"

#include "strata/ops/transformer_ops.h"

namespace strata::testing {

void add_tensor_api_cases(std::vector<OpCase>& v) {
  v.push_back({"eq",
               ops::OpId::compare,
               "eq",
               {{"a", rnd({2, 3}), kAnyRank, {3, 2}}, {"b", rnd({2, 3}, DType::f32, 2), kAnyRank, {2, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::eq(d, a[0], a[1])}; }});
  v.push_back({"where",
               ops::OpId::where,
               "where",
               {{"condition", Tensor::from_vector<uint8_t>({1, 0, 1, 1, 0, 0}, {2, 3}), kAnyRank, {3, 2}, DType::f32},
                {"a", rnd({2, 3}), kAnyRank, {3, 2}},
                {"b", rnd({2, 3}, DType::f32, 2), kAnyRank, {2, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::where(d, a[0], a[1], a[2])}; }});
  v.push_back({"sum_dims",
               ops::OpId::reduce_dims,
               "sum",
               {{"input", rnd({2, 3}), kDtype | kDevice | kUndefined, {}, DType::i32}},
               [](const D& d, const auto& a) {
                 const int dims[] = {1};
                 return std::vector{ops::reduce(d, ops::ReduceFn::sum, a[0], dims, false)};
               }});
  v.push_back({"softmax",
               ops::OpId::softmax_fwd,
               "softmax",
               {{"input", rnd({2, 3}), kDtype | kDevice | kUndefined, {}, DType::i32}},
               [](const D& d, const auto& a) { return std::vector{ops::softmax(d, a[0], 1)}; }});
  v.push_back({"softmax_bwd",
               ops::OpId::softmax_bwd,
               "softmax_bwd",
               {{"output", rnd({2, 3}), kAll, {3, 2}}, {"grad_output", rnd({2, 3}, DType::f32, 2), kAll, {2, 4}}},
               [](const D& d, const auto& a) { return std::vector{ops::softmax_bwd(d, a[0], a[1], 1)}; }});
  v.push_back({"bmm",
               ops::OpId::bmm,
               "bmm",
               {{"a", rnd({2, 3, 4}), kAll, {2, 3, 5}}, {"b", rnd({2, 4, 5}, DType::f32, 2), kAll, {2, 5, 5}}},
               [](const D& d, const auto& a) { return std::vector{ops::bmm(d, a[0], a[1])}; }});
  v.push_back({"index_select",
               ops::OpId::index_select,
               "index_select",
               {{"input", rnd({5, 3}), kDevice | kUndefined},
                {"index", Tensor::from_vector<int64_t>({4, 0, 2}, {3}), kRank | kDtype | kDevice | kUndefined, {},
                 DType::f32}},
               [](const D& d, const auto& a) { return std::vector{ops::index_select(d, a[0], 0, a[1])}; }});
  v.push_back({"index_add",
               ops::OpId::index_add,
               "index_add",
               {{"source", rnd({3, 3}), kAll, {3, 4}, DType::i32},
                {"index", Tensor::from_vector<int64_t>({4, 0, 4}, {3}), kAll, {2}, DType::f32}},
               [](const D& d, const auto& a) { return std::vector{ops::index_add(d, a[0], 0, a[1], {5, 3})}; }});
  v.push_back({"layer_norm",
               ops::OpId::layer_norm_fwd,
               "layer_norm",
               {{"input", rnd({2, 3}), kDtype | kDevice | kUndefined, {}, DType::i32},
                {"weight", pos({3}), kAll & ~kUndefined, {4}},
                {"bias", rnd({3}, DType::f32, 2), kAll & ~kUndefined, {2}}},
               [](const D& d, const auto& a) {
                 const ops::LayerNormResult r = ops::layer_norm(d, a[0], a[1], a[2], 1e-5);
                 return std::vector{r.y, r.mean, r.rstd};
               }});
  v.push_back({"layer_norm_bwd",
               ops::OpId::layer_norm_bwd,
               "layer_norm_bwd",
               {{"input", rnd({2, 3}), kAll, {2, 4}},
                {"weight", pos({3}), kAll & ~kUndefined, {4}},
                {"mean", rnd({2}, DType::f32, 3), kAll & ~kRank, {3}},
                {"rstd", pos({2}), kAll & ~kRank, {3}},
                {"grad_output", rnd({2, 3}, DType::f32, 4), kAll, {3, 3}}},
               [](const D& d, const auto& a) {
                 const ops::LayerNormGrads g = ops::layer_norm_bwd(d, a[0], a[1], a[2], a[3], a[4], true, true, true);
                 return std::vector{g.dx, g.dweight, g.dbias};
               }});
  v.push_back({"attention",
               ops::OpId::attention_fwd,
               "scaled_dot_product_attention",
               {{"query", rnd({1, 2, 3, 4}), kAll, {1, 3, 3, 4}},
                {"key", rnd({1, 2, 5, 4}, DType::f32, 2), kAll, {1, 2, 5, 3}},
                {"value", rnd({1, 2, 5, 4}, DType::f32, 3), kAll, {1, 2, 4, 4}}},
               [](const D& d, const auto& a) {
                 const ops::AttentionResult r = ops::attention(d, a[0], a[1], a[2], true, 0.5);
                 return std::vector{r.y, r.lse};
               }});
  v.push_back({"attention_bwd",
               ops::OpId::attention_bwd,
               "scaled_dot_product_attention",
               {{"query", rnd({1, 2, 3, 4}), kAll, {1, 3, 3, 4}},
                {"key", rnd({1, 2, 5, 4}, DType::f32, 2), kAll, {1, 2, 5, 3}},
                {"value", rnd({1, 2, 5, 4}, DType::f32, 3), kAll, {1, 2, 4, 4}},
                {"output", rnd({1, 2, 3, 4}, DType::f32, 4), kAll, {1, 2, 2, 4}},
                {"lse", rnd({1, 2, 3}, DType::f32, 5), kAll, {1, 2, 4}},
                {"grad_output", rnd({1, 2, 3, 4}, DType::f32, 6), kAll, {1, 2, 3, 5}}},
               [](const D& d, const auto& a) {
                 const ops::AttentionGrads g = ops::attention_bwd(d, a[0], a[1], a[2], a[3], a[4], a[5], true, 0.5);
                 return std::vector{g.dq, g.dk, g.dv};
               }});
}

}  // namespace strata::testing
