// batch_norm as per-channel reductions and broadcasts over x viewed as [A, C, B]:
// [N, C, H*W] for NCHW, [N*H*W, C, 1] for channels-last, [N, C, 1] for rank 2, and
// the logical [N, C, H*W] of any other strides. Statistics in two passes (mean, then
// squared deviations), in the input's dtype. The deviations x - mean are written out
// (into y, dx or a scratch buffer) before they are reduced: Eigen reduces a broadcast
// inside a reduction one value at a time, 8-10x slower than the two passes
// (docs/results/cpu_eigen.md).
#include <cmath>
#include <optional>

#include "strata/backends/cpu/batch_norm.h"
#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/eigen/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::Dims;
using eigen::Index;
using eigen::Map;
using eigen::PackedIn;
using eigen::PackedOut;
using eigen::Strided;
using eigen::visit_float;
using Vec = Eigen::array<Index, 2>;

namespace {

template <class T>
using Vector = Eigen::Tensor<T, 1, Eigen::RowMajor, Index>;

// A [C] parameter's values, or `fallback` everywhere when it is absent.
template <class T>
Vector<T> param(eigen::Context& ctx, const TensorView& v, Index c, double fallback, const char* op, const char* arg) {
  Vector<T> out(c);
  if (!v.defined) {
    out.setConstant(static_cast<T>(fallback));
  } else {
    out = PackedIn<T, 1>(ctx, v, op, arg).map();
  }
  return out;
}
template <class T>
void set_param(eigen::Context& ctx, const TensorView& v, const Vector<T>& value, const char* op, const char* arg) {
  if (!v.defined) return;
  PackedOut<T, 1> out(v, op, arg);
  out.map() = value;
  out.finish(ctx);
}

// The [A, C, B] shape of x and whether the views share a dense layout that has it.
struct Form {
  Index a, c, b, m;  // m = values per channel = a * b
  bool dense;
};
Form form(const TensorView& x, std::initializer_list<const TensorView*> others) {
  const Index n = x.sizes[0], c = x.sizes[1], hw = x.dim() == 4 ? x.sizes[2] * x.sizes[3] : 1;
  bool same = true;
  for (const TensorView* o : others) same = same && eigen::same_layout(x, *o);
  if (same && x.is_contiguous()) return {n, c, hw, n * hw, true};
  if (same && x.dim() == 4 && x.is_channels_last()) return {n * hw, c, 1, n * hw, true};
  return {n, c, hw, n * hw, false};
}

// Calls f(expr...) with each view as an [A, C, B] expression of the form.
template <class F, class... S>
void with_form(const Form& fm, const char* op, F&& f, std::pair<S*, const TensorView*>... v) {
  const Dims<3> d{fm.a, fm.c, fm.b};
  if (fm.dense) {
    f(Map<S, 3>(v.first, d)...);
    return;
  }
  auto strided = [&](auto* p, const TensorView* view) {
    using E = std::remove_pointer_t<decltype(p)>;
    return Strided<E>(*view, op, "tensor");
  };
  auto s = std::make_tuple(strided(v.first, v.second)...);
  std::apply([&](auto&... e) { f(e.expr().reshape(d)...); }, s);
}

const Eigen::array<Index, 2> kOverChannel{0, 2};

// out = the per-channel sum of e (an [A, C, B] expression) times `scale`. With B = 1
// (channels-last, rank 2) over dim 0 of e as [A, C], which Eigen reduces with packets
// (4x faster than over {0, 2} with a unit dimension).
template <class T, class E>
void channel_sum(eigen::Device& dev, const Form& fm, const E& e, T scale, Vector<T>& out) {
  if (fm.b == 1)
    out.device(dev) = e.reshape(Dims<2>{fm.a, fm.c}).sum(Eigen::array<Index, 1>{0}) * scale;
  else
    out.device(dev) = e.sum(kOverChannel) * scale;
}

}  // namespace

// Synchronised (op_args.h): the shared CPU loops, which reduce between the statistics and
// the normalisation.
void EigenBackend::batch_norm_fwd(const BatchNormFwdArgs& a) {
  if (a.sync) return loops::batch_norm_fwd(kName, a);
  if (loops::has_epilogue(a)) {  // the plain batch norm, then the fused residual add and ReLU
    batch_norm_fwd(loops::without_epilogue(a));
    return visit_float("batch_norm_fwd", a.y.dtype, [&](auto t) { loops::epilogue<decltype(t)>(a); });
  }
  visit_float("batch_norm_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const Form fm = form(a.x, {&a.y});
    if (a.training)
      STRATA_CHECK(fm.m > 1, "batch_norm_fwd: training needs more than one value per channel, got x ", a.x.sizes.str());
    else
      STRATA_CHECK(a.running_mean.defined && a.running_var.defined,
                   "batch_norm_fwd: eval mode needs running_mean and running_var");
    const char* op = "batch_norm_fwd";
    const Index c = fm.c;
    const Dims<3> bc{1, c, 1}, rep{fm.a, 1, fm.b};
    Vector<T> mean(c), var(c);
    Vector<T> rm = param<T>(*ctx_, a.running_mean, c, 0.0, op, "running_mean");
    Vector<T> rv = param<T>(*ctx_, a.running_var, c, 1.0, op, "running_var");
    const Vector<T> gamma = param<T>(*ctx_, a.gamma, c, 1.0, op, "gamma");
    const Vector<T> beta = param<T>(*ctx_, a.beta, c, 0.0, op, "beta");
    auto& dev = ctx_->device;
    with_form(fm, op, [&](auto x, auto y) {
      const T inv_m = static_cast<T>(1.0 / static_cast<double>(fm.m));
      if (a.training) {
        channel_sum(dev, fm, x, inv_m, mean);
        y.device(dev) = x - mean.reshape(bc).broadcast(rep);
        channel_sum(dev, fm, y.square(), inv_m, var);
      } else {
        mean = rm;
        var = rv;
      }
      const Vector<T> invstd = (var + static_cast<T>(a.eps)).sqrt().inverse();
      const Vector<T> scale = gamma * invstd;
      if (a.training)
        y.device(dev) = y * scale.reshape(bc).broadcast(rep) + beta.reshape(bc).broadcast(rep);
      else
        y.device(dev) = (x - mean.reshape(bc).broadcast(rep)) * scale.reshape(bc).broadcast(rep) +
                        beta.reshape(bc).broadcast(rep);
      set_param<T>(*ctx_, a.save_mean, mean, op, "save_mean");
      set_param<T>(*ctx_, a.save_invstd, invstd, op, "save_invstd");
    }, std::pair<const T*, const TensorView*>{a.x.ptr<const T>(), &a.x}, std::pair<T*, const TensorView*>{a.y.ptr<T>(), &a.y});
    if (a.training) {
      const T m = static_cast<T>(a.momentum);
      const T unbias = static_cast<T>(static_cast<double>(fm.m) / static_cast<double>(fm.m - 1));
      rm = rm * (T(1) - m) + mean * m;
      rv = rv * (T(1) - m) + var * unbias * m;
      set_param<T>(*ctx_, a.running_mean, rm, op, "running_mean");
      set_param<T>(*ctx_, a.running_var, rv, op, "running_var");
    }
  });
}

// With xhat = (x - mean) * invstd and M values per channel:
//   dbeta = sum dy, dgamma = sum dy * xhat,
//   training: dx = gamma * invstd / M * (M * dy - dbeta - xhat * dgamma)
//   eval:     dx = gamma * invstd * dy (the statistics are constants).
// A fused forward's backward masks dy first (relu_mask.h).
void EigenBackend::batch_norm_bwd(const BatchNormBwdArgs& fused) {
  if (fused.sync) return loops::batch_norm_bwd(kName, fused);
  visit_float("batch_norm_bwd", fused.x.dtype, [&](auto t) {
    using T = decltype(t);
    ops::masked_batch_norm_bwd<T>(fused, [&](const BatchNormBwdArgs& a) {
      const char* op = "batch_norm_bwd";
      const Form fm = a.dx.defined ? form(a.x, {&a.dy, &a.dx}) : form(a.x, {&a.dy});
      const Index c = fm.c;
      const Dims<3> bc{1, c, 1}, rep{fm.a, 1, fm.b};
      const Vector<T> mean = param<T>(*ctx_, a.save_mean, c, 0.0, op, "save_mean");
      const Vector<T> invstd = param<T>(*ctx_, a.save_invstd, c, 1.0, op, "save_invstd");
      const Vector<T> gamma = param<T>(*ctx_, a.gamma, c, 1.0, op, "gamma");
      Vector<T> sum_dy(c), sum_dy_xhat(c);
      auto& dev = ctx_->device;
      // dev_x: where the deviations x - mean go (dx, or scratch when dx is not wanted).
      auto sums = [&](auto x, auto dy, auto dev_x) {
        channel_sum(dev, fm, dy, T(1), sum_dy);
        dev_x.device(dev) = x - mean.reshape(bc).broadcast(rep);
        channel_sum(dev, fm, dy * dev_x, T(1), sum_dy_xhat);
        sum_dy_xhat.device(dev) = sum_dy_xhat * invstd;
      };
      auto grad = [&](auto dy, auto dx) {  // dx holds the deviations
        const T big_m = static_cast<T>(fm.m);
        const Vector<T> k = gamma * invstd / big_m;
        dx.device(dev) = k.reshape(bc).broadcast(rep) *
                         (dy * big_m - sum_dy.reshape(bc).broadcast(rep) -
                          dx * (invstd * sum_dy_xhat).reshape(bc).broadcast(rep));
      };
      using P = std::pair<const T*, const TensorView*>;
      if (a.dx.defined) {
        with_form(fm, op, [&](auto x, auto dy, auto dx) {
          sums(x, dy, dx);
          if (a.training)
            grad(dy, dx);
          else  // the statistics were constants
            dx.device(dev) = (gamma * invstd).reshape(bc).broadcast(rep) * dy;
        }, P{a.x.ptr<const T>(), &a.x}, P{a.dy.ptr<const T>(), &a.dy}, std::pair<T*, const TensorView*>{a.dx.ptr<T>(), &a.dx});
      } else {
        Map<T, 3> scratch(ctx_->slots[0][0].get<T>(fm.m * c), fm.a, c, fm.b);
        with_form(fm, op, [&](auto x, auto dy) { sums(x, dy, scratch); }, P{a.x.ptr<const T>(), &a.x},
                  P{a.dy.ptr<const T>(), &a.dy});
      }
      set_param<T>(*ctx_, a.dgamma, sum_dy_xhat, op, "dgamma");
      set_param<T>(*ctx_, a.dbeta, sum_dy, op, "dbeta");
    });
  });
}

}  // namespace strata::backends
