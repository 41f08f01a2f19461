#pragma once
// GPT-2's two vocabulary files read into what Gpt2Tokenizer (gpt2_tokenizer.h) merges with: each
// token's bytes, the one-byte tokens, and the merges by their pair of token ids. The checks that loading
// makes, and the files' format, are in gpt2_tokenizer.h.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata::data {

struct Gpt2Vocabulary {
  struct Merge {
    int32_t rank;    // its line in vocab.bpe after the version line, from 0: lower merges first
    int32_t result;  // the id of the token it makes
  };
  std::vector<std::string> tokens;  // id -> the bytes it stands for
  std::array<int32_t, 256> byte_token{};  // byte -> the id of its one-byte token
  std::unordered_map<uint64_t, Merge> merges;  // merge_key(left id, right id) -> the merge
  int32_t end_of_text = -1;

  static uint64_t merge_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  const Merge* find_merge(int32_t left, int32_t right) const {
    const auto it = merges.find(merge_key(left, right));
    return it == merges.end() ? nullptr : &it->second;
  }
};

// Reads dir/encoder.json and dir/vocab.bpe; every problem is a strata::Error naming the file.
Gpt2Vocabulary read_gpt2_vocabulary(const std::filesystem::path& dir);

}  // namespace strata::data
