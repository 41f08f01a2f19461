#pragma once
// The tensor views of an argument struct (op_args.h), found without a list per op:
// every Args is an aggregate, so the number of its members is the longest brace
// initialisation that compiles, and a structured binding of that many names reaches
// each one. Direct mode's memory planner reads which buffers each kernel call touches
// through it (ops/direct/step_memory.h); an op added to the table needs nothing here.
#include <span>
#include <type_traits>
#include <utility>

#include "strata/ops/table/tensor_view.h"

namespace strata::ops {

namespace detail {

// Converts to any member type; only used in unevaluated brace initialisations.
struct AnyMember {
  template <class T>
  operator T() const;  // NOLINT: implicit on purpose
};

template <class T, class... A>
constexpr int member_count() {
  if constexpr (requires { T{std::declval<A>()..., AnyMember{}}; })
    return member_count<T, A..., AnyMember>();
  else
    return static_cast<int>(sizeof...(A));
}

template <class F, class M>
void visit_if_view(F& f, M& m) {
  if constexpr (std::is_same_v<std::remove_const_t<M>, TensorView>) {
    f(m);
  } else if constexpr (std::is_same_v<std::remove_const_t<M>, std::span<const TensorView>>) {
    for (const TensorView& v : m) f(v);  // a list's views (the multi-tensor optimizer steps)
  }
}

}  // namespace detail

// The number of members of the aggregate Args.
template <class Args>
inline constexpr int kArgMembers = detail::member_count<Args>();

// Calls f(view) for each TensorView member of `a` and each view of its view lists, in
// declaration order.
template <class Args, class F>
void for_each_view(const Args& a, F&& f) {
  static_assert(std::is_aggregate_v<Args>, "for_each_view: argument structs are aggregates");
  constexpr int n = kArgMembers<Args>;
  static_assert(n >= 1 && n <= 15, "for_each_view: add a case for an argument struct of this many members");
  auto each = [&](const auto&... m) { (detail::visit_if_view(f, m), ...); };
  if constexpr (n == 1) {
    const auto& [m1] = a;
    each(m1);
  } else if constexpr (n == 2) {
    const auto& [m1, m2] = a;
    each(m1, m2);
  } else if constexpr (n == 3) {
    const auto& [m1, m2, m3] = a;
    each(m1, m2, m3);
  } else if constexpr (n == 4) {
    const auto& [m1, m2, m3, m4] = a;
    each(m1, m2, m3, m4);
  } else if constexpr (n == 5) {
    const auto& [m1, m2, m3, m4, m5] = a;
    each(m1, m2, m3, m4, m5);
  } else if constexpr (n == 6) {
    const auto& [m1, m2, m3, m4, m5, m6] = a;
    each(m1, m2, m3, m4, m5, m6);
  } else if constexpr (n == 7) {
    const auto& [m1, m2, m3, m4, m5, m6, m7] = a;
    each(m1, m2, m3, m4, m5, m6, m7);
  } else if constexpr (n == 8) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8);
  } else if constexpr (n == 9) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9);
  } else if constexpr (n == 10) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9, m10] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9, m10);
  } else if constexpr (n == 11) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11);
  } else if constexpr (n == 12) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12);
  } else if constexpr (n == 13) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13);
  } else if constexpr (n == 14) {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14);
  } else {
    const auto& [m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15] = a;
    each(m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15);
  }
}

}  // namespace strata::ops
