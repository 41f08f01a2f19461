// The process the checkpoint-kill test (checkpoint_kill_test.cpp) kills with SIGKILL:
// it saves checkpoints of a small model through nn::save_checkpoint, over and over,
// and reports each completed save on stdout, so the test knows which steps were
// complete before the kill.
//
//   strata_checkpoint_writer PATH FIRST_STEP COUNT
//
// Step k's checkpoint holds kill_test_model() with kill_test_fill(k) applied and
// strata.step = k: the test rebuilds the expected values of whatever step it finds.
// Prints "ready" before the first save and "saved <k>" after each, each line written
// with one write(2) (no stdio buffer a kill could lose).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "checkpoint_kill_model.h"
#include "strata/nn/checkpoint.h"

namespace {
void say(const std::string& line) {
  const std::string s = line + "\n";
  if (::write(STDOUT_FILENO, s.data(), s.size()) != static_cast<ssize_t>(s.size())) std::_Exit(3);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PATH FIRST_STEP COUNT\n", argv[0]);
    return 2;
  }
  try {
    const std::string path = argv[1];
    const long long first = std::stoll(argv[2]), count = std::stoll(argv[3]);
    auto model = strata::testing::kill_test_model();
    say("ready");
    for (long long k = first; k < first + count; ++k) {
      strata::testing::kill_test_fill(*model, k);
      strata::nn::save_checkpoint(path, *model, nullptr, k, {{"test.writer_pid", std::to_string(::getpid())}});
      say("saved " + std::to_string(k));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
