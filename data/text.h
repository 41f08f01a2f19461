#pragma once
// Text for language models: a byte-level tokenizer that needs no files (one token per byte,
// a vocabulary of 256: any text round-trips, UTF-8 included), a corpus read from a file or a
// folder of files into one token stream (by any Tokenizer: this one or GPT-2's, gpt2_tokenizer.h)
// with a held-out tail, and nanoGPT's batches of windows.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/random.h"
#include "strata/core/tensor.h"
#include "strata/data/tokenizer.h"

namespace strata::data {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;
  std::vector<int32_t> encode(std::string_view text) const override;
  // Token ids outside [0, 256) are a strata::Error naming the first one and its position.
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return kVocabSize; }
};

// How the files of a corpus are written: plain text, or the Brown Corpus's tagged form (each
// word written word/tag, one tab-indented sentence a line: Francis & Kucera, "Brown Corpus
// Manual", 1964/1979), read back as plain text by brown_to_text.
enum class TextFormat : uint8_t { plain, brown };

// The Brown Corpus's tagged text as the words it tags: tags dropped, `` and '' as ", no space
// before closing punctuation nor after an opening quote; a sentence a line.
std::string brown_to_text(std::string_view tagged);

struct TextCorpus {
  std::vector<int32_t> train, held_out;      // token ids: the first part and the last
  std::vector<std::filesystem::path> files;  // what was read, in reading order
};
// A file, or every regular file under a folder whose name ends in `suffix` (recursively, in path
// order, each followed by a newline; in the Brown format only the corpus's own files, "ca01" ...
// "cr09"), as one text encoded by `tokenizer` (bytes by default); the last `held_out_fraction` of
// the tokens is held out (for the validation loss). An empty corpus, a missing path or a fraction
// outside [0, 1) is an error.
TextCorpus load_text(const std::filesystem::path& file_or_folder, double held_out_fraction = 0.1,
                     std::string_view suffix = "", TextFormat format = TextFormat::plain,
                     const Tokenizer& tokenizer = ByteTokenizer());

// (x, y) batches of `batch` windows of `block` tokens from a token stream, as nanoGPT's
// get_batch draws them: each window starts at a uniformly drawn position (from the seeded
// generator), x = tokens[s, s + block) and y = tokens[s + 1, s + block + 1), both i64
// [batch, block] on the CPU. The stream must hold more than `block` tokens.
class TextBatches {
 public:
  TextBatches(std::vector<int32_t> tokens, int64_t batch, int64_t block, uint64_t seed);
  std::pair<Tensor, Tensor> next();
  int64_t tokens() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  std::vector<int32_t> tokens_;
  int64_t batch_, block_;
  Generator gen_;
};

}  // namespace strata::data
