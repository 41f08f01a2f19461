// Element-wise ops as Eigen expressions (context.h's elementwise()): relu, add,
// scale, axpy, dropout, and fill and copy for every dtype.
#include <type_traits>

#include "strata/backends/eigen/context.h"
#include "strata/backends/cpu/space_to_depth.h"
#include "strata/core/dtype_dispatch.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::elementwise;
using eigen::In;
using eigen::Index;
using eigen::Out;
using eigen::visit_float;

// relu keeps x where x > 0 and writes 0 elsewhere (NaN included), as the reference.
void EigenBackend::relu_fwd(const ReluFwdArgs& a) {
  visit_float("relu_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    elementwise(*ctx_, "relu_fwd", false, [](auto x) { return (x > x.constant(T(0))).select(x, x.constant(T(0))); },
                Out<T>{a.y}, In<T>{a.x});
  });
}

void EigenBackend::relu_bwd(const ReluBwdArgs& a) {
  visit_float("relu_bwd", a.dy.dtype, [&](auto t) {
    using T = decltype(t);
    elementwise(*ctx_, "relu_bwd", false,
                [](auto y, auto dy) { return (y > y.constant(T(0))).select(dy, dy.constant(T(0))); }, Out<T>{a.dx},
                In<T>{a.y}, In<T>{a.dy});
  });
}

void EigenBackend::add(const AddArgs& a) {
  visit_float("add", a.a.dtype, [&](auto t) {
    using T = decltype(t);
    elementwise(*ctx_, "add", false, [](auto x, auto y) { return x + y; }, Out<T>{a.y}, In<T>{a.a}, In<T>{a.b});
  });
}

void EigenBackend::scale(const ScaleArgs& a) {
  visit_float("scale", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const T alpha = static_cast<T>(a.alpha);
    elementwise(*ctx_, "scale", false, [alpha](auto x) { return x * alpha; }, Out<T>{a.y}, In<T>{a.x});
  });
}

void EigenBackend::axpy(const AxpyArgs& a) {
  visit_float("axpy", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const T alpha = static_cast<T>(a.alpha);
    elementwise(*ctx_, "axpy", false, [alpha](auto y, auto x) { return y + x * alpha; }, Out<T>{a.y}, In<T>{a.y},
                In<T>{a.x});
  });
}

namespace {

// Dropout's keep decision for the element at generator coordinates c (ops::dropout_keep
// of its row-major logical index), as 1 or 0.
struct KeepGenerator {
  uint64_t seed, offset;
  double p;
  eigen::Dims<eigen::kRank> sizes;
  template <size_t R>
  uint8_t operator()(const std::array<Index, R>& c) const {
    const auto k = static_cast<uint64_t>(eigen::linear_index(c, sizes));
    return ops::dropout_keep(seed, offset + k, p) ? 1 : 0;
  }
};

eigen::Dims<eigen::kRank> padded_sizes(const TensorView& v) {
  eigen::Dims<eigen::kRank> s;
  const int lead = eigen::kRank - v.dim();
  for (int i = 0; i < eigen::kRank; ++i) s[i] = i < lead ? 1 : v.sizes[i - lead];
  return s;
}

}  // namespace

// The mask first (its element's logical index decides), then y from x and the mask;
// x / (1 - p) is formed in double and rounded once, as the reference does.
void EigenBackend::dropout_fwd(const DropoutFwdArgs& args) {
  const DropoutFwdArgs a = with_rng_read(args);
  visit_float("dropout_fwd", a.x.dtype, [&](auto t) {
    using T = decltype(t);
    const KeepGenerator gen{a.seed, a.offset, a.p, padded_sizes(a.mask)};
    elementwise(*ctx_, "dropout_fwd", true, [&gen](auto m) { return m.generate(gen); }, Out<uint8_t>{a.mask},
                In<uint8_t>{a.mask});
    const double inv_keep = a.p < 1.0 ? 1.0 / (1.0 - a.p) : 0.0;
    elementwise(
        *ctx_, "dropout_fwd", false,
        [inv_keep](auto x, auto m) {
          return (m != m.constant(0)).select((x.template cast<double>() * inv_keep).template cast<T>(), x.constant(T(0)));
        },
        Out<T>{a.y}, In<T>{a.x}, In<uint8_t>{a.mask});
  });
}

void EigenBackend::dropout_bwd(const DropoutBwdArgs& a) {
  visit_float("dropout_bwd", a.dy.dtype, [&](auto t) {
    using T = decltype(t);
    const double inv_keep = a.p < 1.0 ? 1.0 / (1.0 - a.p) : 0.0;
    elementwise(
        *ctx_, "dropout_bwd", false,
        [inv_keep](auto dy, auto m) {
          return (m != m.constant(0))
              .select((dy.template cast<double>() * inv_keep).template cast<T>(), dy.constant(T(0)));
        },
        Out<T>{a.dx}, In<T>{a.dy}, In<uint8_t>{a.mask});
  });
}

namespace {

// The type Eigen stores a dtype's elements as: half types travel as their bits.
template <class S>
using Storage = std::conditional_t<std::is_same_v<S, f16_t> || std::is_same_v<S, bf16_t>, uint16_t, S>;

template <class S>
S from_storage(Storage<S> v) {
  if constexpr (std::is_same_v<Storage<S>, S>) {
    return v;
  } else {
    return S{v};
  }
}
template <class S>
Storage<S> to_storage(S v) {
  if constexpr (std::is_same_v<Storage<S>, S>) {
    return v;
  } else {
    return v.bits;
  }
}

// core's convert_element (saturating float -> int, NaN -> 0, round-to-nearest-even
// half types) as an Eigen functor, so every dtype pair converts as everywhere else.
template <class D, class S>
struct Convert {
  Storage<D> operator()(Storage<S> v) const { return to_storage(convert_element<D>(from_storage<S>(v))); }
};

}  // namespace

void EigenBackend::fill(const FillArgs& a) {
  visit_dtype(a.y.dtype, [&](auto t) {
    using S = decltype(t);
    using B = bits_t<sizeof(S)>;
    B bits;
    const S v = convert_element<S>(a.value);
    std::memcpy(&bits, &v, sizeof bits);
    elementwise(*ctx_, "fill", false, [bits](auto y) { return y.constant(bits); }, Out<B>{a.y}, In<B>{a.y});
  });
}

// A rearrangement that computes nothing: the loop the other CPU backends share.
void EigenBackend::space_to_depth_fwd(const SpaceToDepthArgs& a) { loops::space_to_depth_fwd(a); }
void EigenBackend::space_to_depth_bwd(const SpaceToDepthBwdArgs& a) { loops::space_to_depth_bwd(a); }

void EigenBackend::copy(const CopyArgs& a) {
  STRATA_CHECK(a.x.device.is_cpu() && a.y.device.is_cpu(),
               "copy: the eigen backend copies between cpu tensors only, got ", a.x.device.str(), " -> ",
               a.y.device.str(), " (x ", dtype_name(a.x.dtype), a.x.sizes.str(), ", y ", dtype_name(a.y.dtype),
               a.y.sizes.str(), ")");
  if (a.x.dtype == a.y.dtype) {
    visit_bits(a.x.dtype, [&](auto t) {
      using B = decltype(t);
      elementwise(*ctx_, "copy", false, [](auto x) { return x; }, Out<B>{a.y}, In<B>{a.x});
    });
    return;
  }
  visit_dtype(a.x.dtype, [&](auto xs) {
    using S = decltype(xs);
    visit_dtype(a.y.dtype, [&](auto ys) {
      using D = decltype(ys);
      elementwise(*ctx_, "copy", false, [](auto x) { return x.unaryExpr(Convert<D, S>{}); }, Out<Storage<D>>{a.y},
                  In<Storage<S>>{a.x});
    });
  });
}

}  // namespace strata::backends
