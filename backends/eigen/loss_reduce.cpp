// Losses and reductions as Eigen reductions and broadcasts: softmax cross-entropy
// (max-subtracted log-sum-exp), BCE with logits, sum, mean and argmax. Losses and
// full sums accumulate in double; the per-row softmax in the input's dtype.
#include <cmath>

#include "strata/backends/eigen/context.h"
#include "strata/ops/table/xent_labels.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::Dims;
using eigen::Index;
using eigen::Map;
using eigen::PackedIn;
using eigen::PackedOut;
using eigen::Strided;
using eigen::visit_float;

namespace {

// The labels as a dense i64 vector, each checked to lie in [0, classes) or be ignore_index,
// and how many are not ignored.
class Labels {
 public:
  Labels(eigen::Context& ctx, const TensorView& v, Index classes, int64_t ignore_index, const char* op)
      : p_(ctx, v, op, "labels") {
    STRATA_CHECK(v.dtype == DType::i64, op, ": labels must be i64, got ", dtype_name(v.dtype));
    const Map<const int64_t, 1> l = p_.map();
    const auto bad = (l != l.constant(ignore_index)) && ((l < l.constant(0)) || (l >= l.constant(classes)));
    Eigen::Tensor<bool, 0, Eigen::RowMajor, Index> any_bad = bad.any();
    if (any_bad()) {
      Eigen::Tensor<Index, 0, Eigen::RowMajor, Index> first = bad.template cast<int>().argmax();
      fail_xent_label(op, first(), p_.data()[first()], classes, ignore_index);
    }
    Eigen::Tensor<Index, 0, Eigen::RowMajor, Index> kept = (l != l.constant(ignore_index)).template cast<Index>().sum();
    kept_ = kept();
  }
  const int64_t* data() const { return p_.data(); }
  Index kept() const { return kept_; }

 private:
  PackedIn<int64_t, 1> p_;
  Index kept_ = 0;
};

// Whether row n (generator coordinates (n) of a [N] expression, or (n, class) of [N, C]) is kept.
template <int R>
struct KeptRow {
  const int64_t* labels;
  int64_t ignore_index;
  bool operator()(const std::array<Index, R>& c) const { return labels[c[0]] != ignore_index; }
};
// x[n, label[n]] for generator coordinates (n) of a [N] expression; 0 on ignored rows.
template <class T>
struct PickLabel {
  const T* x;
  const int64_t* labels;
  Index classes;
  int64_t ignore_index;
  T operator()(const std::array<Index, 1>& c) const {
    return labels[c[0]] == ignore_index ? T(0) : x[c[0] * classes + labels[c[0]]];
  }
};
// 1 where c (n, class) is the label of row n, else 0.
template <class T>
struct OneHot {
  const int64_t* labels;
  T operator()(const std::array<Index, 2>& c) const { return c[1] == labels[c[0]] ? T(1) : T(0); }
};

template <class T>
T read_scalar(const TensorView& v) {
  return *v.ptr<const T>();
}

}  // namespace

// lse[n] for every row, in the logits' dtype (ops::stats_dtype of f32 and f64 is the dtype
// itself); the loss the mean over the kept rows, 0/0 = NaN when none is kept.
void EigenBackend::softmax_xent_fwd(const SoftmaxXentFwdArgs& a) {
  visit_float("softmax_xent_fwd", a.logits.dtype, [&](auto t) {
    using T = decltype(t);
    const Index n = a.logits.sizes[0], c = a.logits.sizes[1];
    const PackedIn<T, 2> x(*ctx_, a.logits, "softmax_xent_fwd", "logits");
    const Labels labels(*ctx_, a.labels, c, a.ignore_index, "softmax_xent_fwd");
    const auto xm = x.map();
    const Dims<2> col{n, 1}, across{1, c};
    // lse[n] = max + log(sum exp(x - max)): the per-row shift that keeps exp finite.
    Eigen::Tensor<T, 1, Eigen::RowMajor, Index> mx(n);
    mx.device(ctx_->device) = xm.maximum(Eigen::array<Index, 1>{1});
    PackedOut<T, 1> lse(a.lse, "softmax_xent_fwd", "lse");
    auto lm = lse.map();
    lm.device(ctx_->device) = mx + (xm - mx.reshape(col).broadcast(across)).exp().sum(Eigen::array<Index, 1>{1}).log();
    Eigen::Tensor<double, 0, Eigen::RowMajor, Index> total;
    total.device(ctx_->device) =
        lm.generate(KeptRow<1>{labels.data(), a.ignore_index})
            .select(lm - lm.generate(PickLabel<T>{x.data(), labels.data(), c, a.ignore_index}), lm.constant(T(0)))
            .template cast<double>()
            .sum();
    lse.finish(*ctx_);
    *a.loss.ptr<T>() = static_cast<T>(total() / static_cast<double>(labels.kept()));
  });
}

// dlogits = (exp(x - lse) - onehot(label)) * dloss / kept, zero on ignored rows.
void EigenBackend::softmax_xent_bwd(const SoftmaxXentBwdArgs& a) {
  visit_float("softmax_xent_bwd", a.logits.dtype, [&](auto t) {
    using T = decltype(t);
    const Index n = a.logits.sizes[0], c = a.logits.sizes[1];
    const PackedIn<T, 2> x(*ctx_, a.logits, "softmax_xent_bwd", "logits");
    const PackedIn<T, 1> lse(*ctx_, a.lse, "softmax_xent_bwd", "lse");
    const Labels labels(*ctx_, a.labels, c, a.ignore_index, "softmax_xent_bwd");
    const T g = static_cast<T>(static_cast<double>(read_scalar<T>(a.dloss)) / static_cast<double>(labels.kept()));
    PackedOut<T, 2> d(a.dlogits, "softmax_xent_bwd", "dlogits");
    const auto xm = x.map();
    const auto p = (xm - lse.map().reshape(Dims<2>{n, 1}).broadcast(Dims<2>{1, c})).exp();
    d.map().device(ctx_->device) = xm.generate(KeptRow<2>{labels.data(), a.ignore_index})
                                       .select((p - xm.generate(OneHot<T>{labels.data()})) * g, xm.constant(T(0)));
    d.finish(*ctx_);
  });
}

// mean of max(x, 0) - x t + log1p(exp(-|x|)), in double.
void EigenBackend::bce_logits_fwd(const BceLogitsFwdArgs& a) {
  visit_float("bce_logits_fwd", a.logits.dtype, [&](auto t) {
    using T = decltype(t);
    Eigen::Tensor<double, 0, Eigen::RowMajor, Index> total;
    auto loss = [](auto x, auto y) {
      const auto xd = x.template cast<double>();
      return (xd.cwiseMax(0.0) - xd * y.template cast<double>() + (-xd.abs()).exp().log1p()).sum();
    };
    if (a.logits.numel() > 0) {
      if (a.logits.is_contiguous() && a.targets.is_contiguous()) {
        total.device(ctx_->device) = loss(eigen::flat<const T>(a.logits), eigen::flat<const T>(a.targets));
      } else {
        Strided<const T> x(a.logits, "bce_logits_fwd", "logits"), y(a.targets, "bce_logits_fwd", "targets");
        total.device(ctx_->device) = loss(x.expr(), y.expr());
      }
    } else {
      total() = 0.0;
    }
    *a.loss.ptr<T>() = static_cast<T>(total() / static_cast<double>(a.logits.numel()));
  });
}

// dlogits = (sigmoid(x) - t) * dloss / numel
void EigenBackend::bce_logits_bwd(const BceLogitsBwdArgs& a) {
  visit_float("bce_logits_bwd", a.logits.dtype, [&](auto t) {
    using T = decltype(t);
    const T g = static_cast<T>(static_cast<double>(read_scalar<T>(a.dloss)) / static_cast<double>(a.logits.numel()));
    eigen::elementwise(
        *ctx_, "bce_logits_bwd", false, [g](auto x, auto y) { return (x.sigmoid() - y) * g; }, eigen::Out<T>{a.dlogits},
        eigen::In<T>{a.logits}, eigen::In<T>{a.targets});
  });
}

namespace {

// The sum of all elements of x, in double.
template <class T>
double total(eigen::Context& ctx, const TensorView& x, const char* op) {
  Eigen::Tensor<double, 0, Eigen::RowMajor, Index> s;
  if (x.numel() == 0) return 0.0;
  if (eigen::is_dense(x)) {
    s.device(ctx.device) = eigen::flat<const T>(x).template cast<double>().sum();
  } else {
    Strided<const T> v(x, op, "input");
    s.device(ctx.device) = v.expr().template cast<double>().sum();
  }
  return s();
}

}  // namespace

void EigenBackend::sum(const ReduceArgs& a) {
  visit_float("sum", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    *a.y.ptr<T>() = static_cast<T>(total<T>(*ctx_, a.x, "sum"));
  });
}

void EigenBackend::mean(const ReduceArgs& a) {
  visit_float("mean", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    // The mean of no elements is NaN, as in PyTorch.
    *a.y.ptr<T>() = static_cast<T>(total<T>(*ctx_, a.x, "mean") / static_cast<double>(a.x.numel()));
  });
}

// The first maximum of each row; a NaN is the maximum (the first NaN wins), as in
// PyTorch: rows holding a NaN take the argmax of their NaN mask instead.
void EigenBackend::argmax(const ArgmaxArgs& a) {
  visit_float("argmax", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    if (a.y.numel() == 0) return;
    const PackedIn<T, 2> x(*ctx_, a.x, "argmax", "x");
    PackedOut<int64_t, 1> y(a.y, "argmax", "y");
    const auto xm = x.map();
    const Eigen::array<Index, 1> row{1};
    const auto nan = xm != xm;
    y.map().device(ctx_->device) =
        nan.any(row).select(nan.template cast<T>().argmax(1), xm.argmax(1)).template cast<int64_t>();
    y.finish(*ctx_);
  });
}

}  // namespace strata::backends
