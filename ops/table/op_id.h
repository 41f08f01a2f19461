#pragma once
#include <cstdint>
#include <string_view>

namespace strata::ops {

enum class OpId : uint16_t {
#define STRATA_OP(name, Args, kind) name,
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

inline constexpr int kNumOps = 0
#define STRATA_OP(name, Args, kind) +1
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
    ;

inline constexpr std::string_view kOpNames[] = {
#define STRATA_OP(name, Args, kind) #name,
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

constexpr std::string_view op_name(OpId op) { return kOpNames[static_cast<int>(op)]; }

// The families of ops, the third column of the op table. Backends state what they
// support per kind and name single ops only where one differs from its kind.
enum class OpKind : uint8_t { conv, norm, activation, pool, linear, elementwise, loss, reduce, memory, optimizer };
inline constexpr int kNumOpKinds = 10;
inline constexpr std::string_view kOpKindNames[kNumOpKinds] = {
    "conv", "norm", "activation", "pool", "linear", "elementwise", "loss", "reduce", "memory", "optimizer"};

inline constexpr OpKind kOpKinds[] = {
#define STRATA_OP(name, Args, kind) OpKind::kind,
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

constexpr OpKind op_kind(OpId op) { return kOpKinds[static_cast<int>(op)]; }
constexpr std::string_view op_kind_name(OpKind k) { return kOpKindNames[static_cast<int>(k)]; }

// Whether the op's 4-D operands carry a spatial layout (NCHW, NHWC or strided views of them).
constexpr bool is_spatial(OpKind k) { return k == OpKind::conv || k == OpKind::norm || k == OpKind::pool; }

}  // namespace strata::ops
