// Hostile numbers given to strata_train and strata_infer: learning rates that make a
// run diverge and checkpoints whose weights are not finite.
#include <cmath>
#include <filesystem>

#include "cli_fixture.h"
#include "core/file.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;

// A copy of the trained checkpoint whose output layer's bias holds a NaN, as a run
// that diverged before the save check wrote them.
fs::path nan_checkpoint(const fs::path& dir, std::string* tensor) {
  nn::safetensors::Contents c = nn::safetensors::load(HostileCli::checkpoint().string());
  for (auto& [name, t] : c.tensors)
    if (t.dim() == 1 && t.size(0) == 10 && name.size() > 5 && name.substr(name.size() - 5) == ".bias" &&
        name.rfind("optimizer.", 0) != 0) {
      std::vector<float> v = t.to_vector<float>();
      v[3] = std::nanf("");
      t = Tensor::from_vector(v, t.sizes());
      *tensor = name;
    }
  const fs::path p = dir / "nan.safetensors";
  nn::safetensors::save(p.string(), c.tensors, c.metadata);
  return p;
}

TEST_F(HostileCli, NonFiniteCheckpointsAreRefusedNamingTheFileAndTheTensor) {
  std::string tensor;
  const fs::path nan = nan_checkpoint(dir(), &tensor);
  ASSERT_FALSE(tensor.empty());
  const std::string named = "'" + tensor + "' holds 1 NaN";
  ProgramResult r = infer({"--checkpoint", nan.string(), "--idx", data_dir().string()});
  EXPECT_TRUE(runtime_error(r, {nan.c_str(), named.c_str(), "diverged run"}));
  r = train({"--resume", nan.string()});
  EXPECT_TRUE(runtime_error(r, {nan.c_str(), named.c_str(), "diverged run"}));

  // Loaded anyway on request: a warning naming the tensor, then the outputs (infer) or
  // the first loss (train) are refused, blaming the checkpoint, not the learning rate.
  r = infer({"--checkpoint", nan.string(), "--idx", data_dir().string(), "--allow-non-finite"});
  EXPECT_TRUE(runtime_error(r, {"warning", named.c_str(), "output for item 0", "is not finite", "no class"}));
  EXPECT_FALSE(mentions(r.out, {"class:"})) << "a class was printed: " << r.out;
  r = train({"--resume", nan.string(), "--allow-non-finite", "--epochs", "2"});
  EXPECT_TRUE(mentions(r.out, {"warning", named.c_str()})) << r.describe();
  EXPECT_TRUE(runtime_error(r, {"training diverged", "resumed from a checkpoint holding non-finite values",
                                nan.c_str()}));
}

}  // namespace
}  // namespace strata::testing
