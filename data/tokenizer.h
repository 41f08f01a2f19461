#pragma once
// What a tokenizer is to the rest of strata: text to token ids and back, with a vocabulary of ids
// [0, vocab_size()). One interface so that a corpus (load_text, text.h) and a program (strata_gpt) take
// any of them: ByteTokenizer (text.h: one token per byte, no files) or Gpt2Tokenizer (gpt2_tokenizer.h:
// GPT-2's byte-pair encoding, from its two files).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside [0, vocab_size()) are a strata::Error naming the first one and its position.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
};

}  // namespace strata::data
