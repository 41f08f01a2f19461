#include "strata/codegen/cuda/state_text.h"

#include <sstream>

namespace strata::codegen::cuda {

std::string state_members(const std::vector<CallText>& texts, const std::string& run) {
  std::ostringstream s;
  s << "  int64_t workspace_bytes = 0;  // the most any call's plan needs\n"
    << "  DeviceMemory workspace_memory;\n  void* workspace = nullptr;\n"
    << "  cudaGraph_t graph = nullptr;\n  cudaGraphExec_t exec = nullptr;\n";
  for (const CallText& t : texts)
    if (!t.member.empty()) s << "  " << t.member << "\n";
  s << "\n  State(const std::string& path, bool use_graph);\n  ~State() {\n"
    << "    if (exec) cudaGraphExecDestroy(exec);\n    if (graph) cudaGraphDestroy(graph);\n  }\n"
    << "  void need_workspace(int64_t bytes) { workspace_bytes = std::max(workspace_bytes, bytes); }\n"
    << "  void " << run << "();\n};\n\n";
  return s.str();
}

std::string state_loads(const std::vector<CallText>& texts, const std::string& bytes) {
  std::ostringstream s;
  s << "  if (cudnnGetVersion() != static_cast<size_t>(kCudnnVersion))\n"
    << "    std::fprintf(stderr, \"warning: generated with cuDNN %lld, running on cuDNN %zu: strata's bits are \"\n"
    << "                 \"promised for the same version only\\n\", static_cast<long long>(kCudnnVersion), "
       "cudnnGetVersion());\n"
    << "  CHECK(cudaMemcpy(weights.p, file.data(), " << bytes << ", cudaMemcpyHostToDevice));\n";
  for (const CallText& t : texts)
    if (!t.load.empty()) s << "  {  // " << t.comment << "\n" << t.load << "  }\n";
  s << "  workspace_memory = DeviceMemory(workspace_bytes);\n  workspace = workspace_memory.p;\n"
    << "  if (!use_graph) return;\n";
  return s.str();
}

std::string state_capture(const std::string& run) {
  return "  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));\n"
         "  try {\n    " + run + "();\n  } catch (...) {\n    cudaGraph_t partial = nullptr;\n"
         "    cudaStreamEndCapture(stream, &partial);\n    if (partial) cudaGraphDestroy(partial);\n    throw;\n  }\n"
         "  CHECK(cudaStreamEndCapture(stream, &graph));\n  CHECK(cudaGraphInstantiate(&exec, graph, 0));\n}\n\n";
}

}  // namespace strata::codegen::cuda
