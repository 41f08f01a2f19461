#pragma once
// kernels.h and kernels.cu of a cuda emitter's project (internal to codegen/cuda): the launchers
// around strata's kernels are the program's own code (strata launches through its context), each
// with the blocks of strata's source it launches (snippets.h, by tag), so that a program carries
// only the kernels its calls run: those of the launchers model.cpp calls (kernels::<name>).
#include <set>
#include <string>
#include <vector>

#include "strata/codegen/cuda/call_text.h"

namespace strata::codegen::cuda {

struct Launcher {
  const char* name;                // kernels::<name> in model.cpp; a helper's own name otherwise
  std::vector<const char*> tags;   // the snippet blocks it launches
  std::vector<const char*> needs;  // helpers (entries with an empty decl) it calls
  const char* decl;                // kernels.h: comment and declaration ("" for a helper)
  const char* def;                 // kernels.cu: a helper's in the anonymous namespace
};

// A prediction's launchers (launchers.cpp) and those a training step adds (train_kernels.cpp).
const std::vector<Launcher>& prediction_launchers();
const std::vector<Launcher>& train_launchers();
const std::vector<Launcher>& transformer_launchers();  // a GPT's (transformer_text.cpp)

// The launchers the calls' run texts call ("kernels::add(" -> "add").
std::set<std::string> launchers_called(const std::vector<CallText>& texts);
// kernels.h and kernels.cu with those launchers, the helpers they need and strata's blocks they
// launch (with every untagged block: indexing, element types, launches; a training step's op-table
// pieces when a training launcher is among them). Throws on a name no table has (internal error).
std::string kernels_h(const std::set<std::string>& called);
std::string kernels_cu(const std::set<std::string>& called);

}  // namespace strata::codegen::cuda
