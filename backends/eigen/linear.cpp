// linear as tensor contractions: y = x w^T (+ b), dx = dy w, dw = dy^T x, db = sum of
// dy over the batch. A transposed operand (a dense view with swapped strides) is
// contracted over its other dimension instead of being copied.
#include <optional>

#include "strata/backends/api/linear_epilogue.h"
#include "strata/backends/eigen/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::Dims;
using eigen::Index;
using eigen::Map;
using eigen::PackedIn;
using eigen::PackedOut;
using eigen::visit_float;

namespace {

// A rank-2 input as a dense matrix in memory order: row-major as is, or (t = true)
// its transpose when the view is a dense column-major one; anything else is packed.
template <class T>
class Operand {
 public:
  Operand(eigen::Context& ctx, const TensorView& v, const char* op, const char* arg) {
    const Index r = v.sizes[0], c = v.sizes[1];
    t_ = !v.is_contiguous() && (r == 1 || v.strides[0] == 1) && (c == 1 || v.strides[1] == r);
    if (t_) {
      map_.emplace(v.ptr<const T>(), Dims<2>{c, r});
    } else {
      packed_.emplace(ctx, v, op, arg);
      map_.emplace(packed_->map());
    }
  }
  const Map<const T, 2>& map() const { return *map_; }
  // The memory dimension holding logical dimension d.
  Index dim(Index d) const { return t_ ? 1 - d : d; }

 private:
  bool t_ = false;
  std::optional<PackedIn<T, 2>> packed_;
  std::optional<Map<const T, 2>> map_;
};

using Pair = Eigen::array<Eigen::IndexPair<Index>, 1>;

// A rank-1 parameter as a dense [n] vector.
template <class T>
Map<const T, 1> vec(eigen::Context& ctx, const TensorView& v, std::optional<PackedIn<T, 1>>& keep, const char* op,
                    const char* arg) {
  keep.emplace(ctx, v, op, arg);
  return keep->map();
}

}  // namespace

void EigenBackend::linear_fwd(const LinearFwdArgs& a) {
  if (a.act || a.z.defined || a.norm_eps) return linear_fwd_composed(*this, a);
  visit_float("linear_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const Operand<T> x(*ctx_, a.x, "linear_fwd", "x"), w(*ctx_, a.w, "linear_fwd", "w");
    PackedOut<T, 2> y(a.y, "linear_fwd", "y");
    const Pair in{Eigen::IndexPair<Index>(x.dim(1), w.dim(1))};
    // Contracting x's batch-major map with w's yields [N, out] (free dims in order),
    // unless x is transposed: then its free dim comes first as well.
    if (a.b.defined) {
      std::optional<PackedIn<T, 1>> keep;
      const auto b = vec<T>(*ctx_, a.b, keep, "linear_fwd", "b");
      y.map().device(ctx_->device) = x.map().contract(w.map(), in) +
                                     b.reshape(Dims<2>{1, a.y.sizes[1]}).broadcast(Dims<2>{a.y.sizes[0], 1});
    } else {
      y.map().device(ctx_->device) = x.map().contract(w.map(), in);
    }
    y.finish(*ctx_);
  });
}

void EigenBackend::linear_bwd_data(const LinearBwdDataArgs& a) {
  if (a.act) return linear_act_bwd_data_composed(*this, a);
  visit_float("linear_bwd_data", a.dy.dtype, [&](auto t) {
    using T = decltype(t);
    const Operand<T> dy(*ctx_, a.dy, "linear_bwd_data", "dy"), w(*ctx_, a.w, "linear_bwd_data", "w");
    PackedOut<T, 2> dx(a.dx, "linear_bwd_data", "dx");
    dx.map().device(ctx_->device) = dy.map().contract(w.map(), Pair{Eigen::IndexPair<Index>(dy.dim(1), w.dim(0))});
    dx.finish(*ctx_);
  });
}

void EigenBackend::linear_bwd_weight(const LinearBwdWeightArgs& a) {
  visit_float("linear_bwd_weight", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const Operand<T> x(*ctx_, a.x, "linear_bwd_weight", "x"), dy(*ctx_, a.dy, "linear_bwd_weight", "dy");
    PackedOut<T, 2> dw(a.dw, "linear_bwd_weight", "dw");
    dw.map().device(ctx_->device) = dy.map().contract(x.map(), Pair{Eigen::IndexPair<Index>(dy.dim(0), x.dim(0))});
    dw.finish(*ctx_);
    if (a.db.defined) {
      PackedOut<T, 1> db(a.db, "linear_bwd_weight", "db");
      db.map().device(ctx_->device) = dy.map().sum(Eigen::array<Index, 1>{dy.dim(0)});
      db.finish(*ctx_);
    }
  });
}

}  // namespace strata::backends
