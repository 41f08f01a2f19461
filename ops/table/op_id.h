#pragma once
#include <cstdint>
#include <string_view>

namespace strata::ops {

enum class OpId : uint16_t {
#define STRATA_OP(name, Args) name,
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

inline constexpr int kNumOps = 0
#define STRATA_OP(name, Args) +1
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
    ;

inline constexpr std::string_view kOpNames[] = {
#define STRATA_OP(name, Args) #name,
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

constexpr std::string_view op_name(OpId op) { return kOpNames[static_cast<int>(op)]; }

}  // namespace strata::ops
