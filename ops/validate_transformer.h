#pragma once
// Validate-and-infer of the transformer's fused ops, layer norm and attention (ops/validate.h
// says why one function per op). The shapes are the front end's (ops/transformer_ops.h):
// layer norm's input [..., C], attention's [B, H, T, D].
#include <cmath>
#include <utility>

#include "strata/ops/validate.h"

namespace strata::ops {

// The normalised size C (x's last dim).
template <class D>
int64_t validate_layer_norm(const D& d, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined("layer_norm", "input", x);
  check_float("layer_norm", "input", x);
  check_input(d, OpId::layer_norm_fwd, "input", x);
  STRATA_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) > 0, "layer_norm: argument 'input' ", x.str(),
               " has no dim to normalise over (rank >= 1, last dim > 0)");
  const int64_t c = x.size(x.dim() - 1);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"weight", weight}, {"bias", bias}}) {
    if (!t.defined()) continue;
    check_vector("layer_norm", name, t, c, x);
    check_device("layer_norm", name, t, d.device(), d.backend_name());
  }
  STRATA_CHECK(eps > 0 && std::isfinite(eps), "layer_norm: argument 'eps' must be positive and finite, got ", eps);
  return c;
}

template <class D>
void validate_layer_norm_bwd(const D& d, const Tensor& x, const Tensor& weight, const Tensor& mean,
                             const Tensor& rstd, const Tensor& dy) {
  check_defined("layer_norm_bwd", "input", x);
  check_defined("layer_norm_bwd", "grad_output", dy);
  check_same_shape("layer_norm_bwd", "input", x, "grad_output", dy);
  check_same_dtype("layer_norm_bwd", "input", x, "grad_output", dy);
  check_input(d, OpId::layer_norm_bwd, "input", x);
  check_input(d, OpId::layer_norm_bwd, "grad_output", dy);
  STRATA_CHECK(x.dim() >= 1 && x.size(x.dim() - 1) > 0, "layer_norm_bwd: argument 'input' ", x.str(),
               " has no dim to normalise over");
  const int64_t c = x.size(x.dim() - 1), rows = x.numel() / c;
  if (weight.defined()) {
    check_vector("layer_norm_bwd", "weight", weight, c, x);
    check_device("layer_norm_bwd", "weight", weight, d.device(), d.backend_name());
  }
  for (const auto& [name, s] : {std::pair<const char*, const Tensor&>{"mean", mean}, {"rstd", rstd}}) {
    check_defined("layer_norm_bwd", name, s);
    check_dtype("layer_norm_bwd", name, s, stats_dtype(x.dtype()));
    check_device("layer_norm_bwd", name, s, d.device(), d.backend_name());
    STRATA_CHECK(s.numel() == rows, "layer_norm_bwd: argument '", name, "' ", s.str(), " has ", s.numel(),
                 " entries for ", rows, " rows of ", x.str());
  }
}

// q [B, H, Tq, D], k and v [B, H, Tk, D]; kv_len optional, i64 [1] (op_args.h).
template <class D>
void validate_attention(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                        const Tensor& kv_len = Tensor()) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  check_defined(op, "query", q);
  check_defined(op, "key", k);
  check_defined(op, "value", v);
  check_rank(op, "query", q, 4);
  check_rank(op, "key", k, 4);
  check_rank(op, "value", v, 4);
  check_float(op, "query", q);
  check_same_dtype(op, "query", q, "key", k);
  check_same_dtype(op, "query", q, "value", v);
  check_input(d, OpId::attention_fwd, "query", q, op);
  check_input(d, OpId::attention_fwd, "key", k, op);
  check_input(d, OpId::attention_fwd, "value", v, op);
  STRATA_CHECK(q.size(0) == k.size(0) && q.size(0) == v.size(0), op, ": batch sizes differ: query ", q.str(),
               ", key ", k.str(), ", value ", v.str());
  STRATA_CHECK(q.size(1) == k.size(1) && q.size(1) == v.size(1), op, ": numbers of heads differ: query ", q.str(),
               ", key ", k.str(), ", value ", v.str());
  STRATA_CHECK(q.size(3) == k.size(3) && q.size(3) == v.size(3) && q.size(3) > 0, op,
               ": head dims differ or are empty: query ", q.str(), ", key ", k.str(), ", value ", v.str());
  STRATA_CHECK(k.size(2) == v.size(2), op, ": key ", k.str(), " and value ", v.str(), " have different lengths");
  STRATA_CHECK(k.size(2) > 0, op, ": no keys (key ", k.str(), ")");
  STRATA_CHECK(!causal || k.size(2) >= q.size(2), op, ": causal attention of ", q.size(2), " queries over ",
               k.size(2), " keys: the queries are the last positions of the keys', so there must be at least as "
               "many keys");
  STRATA_CHECK(std::isfinite(scale), op, ": argument 'scale' must be finite, got ", scale);
  if (!kv_len.defined()) return;
  check_dtype(op, "kv_len", kv_len, DType::i64);
  check_device(op, "kv_len", kv_len, d.device(), d.backend_name());
  STRATA_CHECK(kv_len.numel() == 1, op, ": argument 'kv_len' must hold one count, got ", kv_len.str());
  if (!kv_len.device().is_cpu()) return;  // the kernels clamp a device count to [0, Tk]
  const int64_t l = kv_len.data<int64_t>()[0];
  STRATA_CHECK(l >= 0 && l <= k.size(2), op, ": argument 'kv_len' = ", l, " is not within the ", k.size(2),
               " rows of key ", k.str());
}

// A decoding step's new keys and values for the cache k, v (op_args.h's AttentionFwdArgs): k_new
// and v_new [B, H, Tq, D] like q, positions i64 [Tq] within [0, Tk) (checked where on the host).
template <class D>
void validate_attention_append(const D& d, const Tensor& q, const Tensor& k, const Tensor& k_new, const Tensor& v_new,
                               const Tensor& positions) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  STRATA_CHECK(k_new.defined() && v_new.defined() && positions.defined(), op,
               ": new keys, new values and their positions come together (got key_new ",
               k_new.defined() ? k_new.str() : "undefined", ", value_new ", v_new.defined() ? v_new.str() : "undefined",
               ", positions ", positions.defined() ? positions.str() : "undefined", ")");
  check_same_dtype(op, "query", q, "key_new", k_new);
  check_same_dtype(op, "query", q, "value_new", v_new);
  check_input(d, OpId::attention_fwd, "key_new", k_new, op);
  check_input(d, OpId::attention_fwd, "value_new", v_new, op);
  STRATA_CHECK(k_new.sizes() == q.sizes() && v_new.sizes() == q.sizes(), op, ": the new keys ", k_new.str(),
               " and values ", v_new.str(), " must be the queries' own, of query's sizes ", q.str());
  check_dtype(op, "positions", positions, DType::i64);
  check_device(op, "positions", positions, d.device(), d.backend_name());
  STRATA_CHECK(positions.dim() == 1 && positions.size(0) == q.size(2), op, ": argument 'positions' must be [",
               q.size(2), "], one row of the cache per query, got ", positions.str());
  if (!positions.device().is_cpu()) return;  // the kernels leave a row outside the cache unwritten
  const Tensor at = positions.contiguous();
  for (int64_t i = 0; i < at.numel(); ++i) {
    const int64_t p = at.data<int64_t>()[i];
    STRATA_CHECK(p >= 0 && p < k.size(2), op, ": argument 'positions': positions[", i, "] = ", p,
                 " is not a row of the cache's ", k.size(2), " (key ", k.str(), ")");
  }
}

template <class D>
void validate_attention_bwd(const D& d, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                            const Tensor& lse, const Tensor& dy, bool causal, double scale,
                            const Tensor& kv_len = Tensor()) {
  constexpr std::string_view op = "scaled_dot_product_attention_bwd";
  validate_attention(d, q, k, v, causal, scale, kv_len);
  check_defined(op, "output", y);
  check_defined(op, "grad_output", dy);
  check_same_shape(op, "output", y, "query", q);
  check_same_shape(op, "grad_output", dy, "query", q);
  check_same_dtype(op, "grad_output", dy, "query", q);
  check_same_dtype(op, "output", y, "query", q);
  check_input(d, OpId::attention_bwd, "output", y, op);
  check_input(d, OpId::attention_bwd, "grad_output", dy, op);
  check_defined(op, "lse", lse);
  check_dtype(op, "lse", lse, stats_dtype(q.dtype()));
  check_device(op, "lse", lse, d.device(), d.backend_name());
  STRATA_CHECK(lse.dim() == 3 && lse.size(0) == q.size(0) && lse.size(1) == q.size(1) && lse.size(2) == q.size(2),
               op, ": argument 'lse' ", lse.str(), " is not [B, H, Tq] of query ", q.str());
}

}  // namespace strata::ops
