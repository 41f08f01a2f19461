// Replays fuzz/corpus/<target>/ through a fuzz target's LLVMFuzzerTestOneInput without
// libFuzzer, so every build (gcc, the sanitizer build, CI) regression-tests the seeds
// and every input that once crashed a reader (regression_*).
//   strata_fuzz_replay_<target> DIR...
// Fails on a crash or sanitizer report (the process dies), on an exception other
// than strata::Error (the target rethrows those), and on an empty corpus.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i)
    for (const auto& e : std::filesystem::directory_iterator(argv[i]))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "corpus replay: no inputs found\n");
    return 1;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "corpus replay: cannot read %s\n", f.c_str());
      return 1;
    }
    // Printed first, so a crash's output names the input that caused it.
    std::fprintf(stderr, "%s\n", f.filename().c_str());
    try {
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "corpus replay: %s: unexpected exception: %s\n", f.c_str(), e.what());
      return 1;
    }
  }
  std::printf("corpus replay: %zu inputs, no crash\n", files.size());
  return 0;
}
