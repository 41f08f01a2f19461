#pragma once
// GPT-2's byte-pair encoding (Radford et al., "Language Models are Unsupervised Multitask Learners",
// 2019), token for token as openai/gpt-2's src/encoder.py computes it, read from the model's two files
// in one folder (tools/get-data.sh gpt2-bpe DIR fetches them):
//   encoder.json  a JSON object, token -> id; a token is written in GPT-2's byte-to-unicode alphabet
//                 (each of the 256 bytes is one printable character: ' ' is "Ġ", '\n' is "Ċ")
//   vocab.bpe     a "#version" line, then one merge a line, "Ġ t", in the order they were learned
//
// encode: the text is split into pieces by GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (PCRE2 with Unicode properties; \s is Unicode's White_Space, as in Python's regex module that
// encoder.py uses: the JavaScript port in npm's gpt-3-encoder counts U+FEFF and not U+0085 instead, and
// so differs from both on text holding those two characters). Each piece's UTF-8 bytes start as byte
// tokens and are merged pair by pair, the lowest-ranked pair first, until no pair of the piece is a merge.
// Letters and numbers are those of the PCRE2 library's Unicode tables (Debian 12's: Unicode 14): a
// character assigned after that is neither.
//
// Invalid UTF-8 is not an error: GPT-2's byte alphabet has every byte, so each maximal run of bytes that
// are not valid UTF-8 is a piece of its own, merged like the others, and the valid text around it is
// split as if the run were not there (its neighbours are encoded as they would be alone). encode never
// loses a byte: decode(encode(s)) == s for every byte string s. (encoder.py takes only Unicode strings,
// so there is no reference for such input.)
//
// "<|endoftext|>" in the text is plain text (several tokens), as in encoder.py and gpt-3-encoder: strata
// never parses it out of the input. A caller that wants the token appends end_of_text() to the ids.
//
// decode returns the tokens' bytes as they are, including the partial UTF-8 of a character cut by the
// ids' ends (encoder.py replaces such bytes with U+FFFD; keeping them makes decode exact).
//
// Loading is strict: a missing or unreadable file, JSON that does not parse or is not an object of
// integer ids, ids that are not exactly 0 .. size-1, a token outside the byte alphabet, a byte without a
// token, a malformed merge line, a merge naming a token encoder.json lacks (or making one), a merge
// listed twice or before one that makes its part, no <|endoftext|>, or a vocabulary whose size is not
// 256 bytes + one token per merge + <|endoftext|> (GPT-2's: 256 + 50000 + 1 = 50257) is a strata::Error
// naming the file, the line or token, and what is wrong.
//
// encode and decode may be called from several threads at once (encode's per-piece cache is locked).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/data/tokenizer.h"

namespace strata::data {

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // GPT-2's own files: 50257 tokens, the last <|endoftext|>.
  static constexpr int64_t kVocabSize = 50257;
  static constexpr int32_t kEndOfText = 50256;

  // Reads dir/encoder.json and dir/vocab.bpe.
  explicit Gpt2Tokenizer(const std::filesystem::path& dir);
  ~Gpt2Tokenizer() override;
  Gpt2Tokenizer(const Gpt2Tokenizer&) = delete;
  Gpt2Tokenizer& operator=(const Gpt2Tokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  // The id of <|endoftext|> in the files read (kEndOfText for GPT-2's).
  int32_t end_of_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::data
