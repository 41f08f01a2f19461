#pragma once
// strata_train's outputs, guarded before the first step, so that what a run writes
// never destroys what it reads or what another run writes, and a folder that cannot
// take a checkpoint fails at start-up instead of after the first epoch.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/file.h"
#include "examples/train/options.h"

namespace strata::train {

class GuardedOutputs {
 public:
  // Checks, throwing strata::Error naming the option, the path and the reason:
  //  - no output (--checkpoint, --metrics) is one of `inputs` (the dataset's files),
  //    and --metrics is not the --resume checkpoint (--checkpoint may be: resuming
  //    from a checkpoint and writing on to it is how a run continues);
  //  - --checkpoint and --metrics are not the same file;
  //  - each output is absent or a regular file, and its folder takes a trial write of
  //    `checkpoint_bytes` (the checkpoint) or a few KB (the metrics): core/file.h;
  // then holds the checkpoint's lock (FileLock, "<checkpoint>.lock") until destroyed,
  // so a second run writing the same checkpoint is refused naming this one. Holding
  // it, it removes what killed runs left beside the checkpoint: their partial writes
  // ("<checkpoint>.tmp.<pid>" of processes that no longer run). A lock file left by a
  // killed run is taken over. notes() says both.
  GuardedOutputs(const TrainOptions& o, const std::vector<std::filesystem::path>& inputs,
                 uint64_t checkpoint_bytes);

  // One line each (no newline): a stale lock taken over, a stale temporary removed.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::unique_ptr<FileLock> lock_;
  std::vector<std::string> notes_;
};

}  // namespace strata::train
