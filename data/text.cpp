#include "strata/data/text.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "strata/core/error.h"
#include "strata/core/file.h"

namespace strata::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    STRATA_CHECK(ids[i] >= 0 && ids[i] < kVocabSize, "ByteTokenizer::decode: token ", ids[i], " at position ", i,
                 " is not a byte (the vocabulary is 0..255)");
    out[i] = static_cast<char>(ids[i]);
  }
  return out;
}

namespace {
// The Brown Corpus's text files are named by genre and number ("ca01" ... "cr09"); the package
// beside them holds CONTENTS, README and package.json, which are not corpus text.
bool is_brown_text_file(const std::string& name) {
  return name.size() == 4 && std::islower(static_cast<unsigned char>(name[0])) &&
         std::islower(static_cast<unsigned char>(name[1])) && std::isdigit(static_cast<unsigned char>(name[2])) &&
         std::isdigit(static_cast<unsigned char>(name[3]));
}
}  // namespace

std::string brown_to_text(std::string_view tagged) {
  std::string out;
  size_t pos = 0;
  while (pos < tagged.size()) {
    size_t eol = tagged.find('\n', pos);
    if (eol == std::string_view::npos) eol = tagged.size();
    const std::string_view line = tagged.substr(pos, eol - pos);
    pos = eol + 1;
    std::string sentence;
    bool open_quote = false;  // the previous word opened a quotation: no space after it
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
      if (j == i) break;
      std::string_view token = line.substr(i, j - i);
      i = j;
      const size_t slash = token.rfind('/');
      std::string word(slash == std::string_view::npos || slash == 0 ? token : token.substr(0, slash));
      const bool opening = word == "``" || word == "(";
      const bool closing = word == "''" || word == "." || word == "," || word == ";" || word == ":" || word == "?" ||
                           word == "!" || word == ")" || word == "'";
      if (word == "``" || word == "''") word.assign(1, '"');
      if (!sentence.empty() && !closing && !open_quote) sentence += ' ';
      sentence += word;
      open_quote = opening;
    }
    if (!sentence.empty()) out += sentence + '\n';
  }
  return out;
}

TextCorpus load_text(const std::filesystem::path& path, double held_out_fraction, std::string_view suffix,
                     TextFormat format, const Tokenizer& tokenizer) {
  namespace fs = std::filesystem;
  STRATA_CHECK(held_out_fraction >= 0 && held_out_fraction < 1, "load_text: held_out_fraction must be in [0, 1), got ",
               held_out_fraction);
  std::error_code ec;
  STRATA_CHECK(fs::exists(path, ec), "load_text: ", path.string(), " does not exist");
  TextCorpus c;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file() && e.path().filename().string().ends_with(suffix) &&
          (format != TextFormat::brown || is_brown_text_file(e.path().filename().string())))
        c.files.push_back(e.path());
    std::sort(c.files.begin(), c.files.end());
  } else {
    c.files.push_back(path);
  }
  // One text, encoded once: a tokenizer that merges across a file's end (GPT-2's joins white space)
  // sees the corpus as it is written.
  std::string text;
  for (const fs::path& f : c.files) {
    const std::vector<uint8_t> bytes = read_regular_file(f);
    const std::string_view file_text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    text += format == TextFormat::brown ? brown_to_text(file_text) : std::string(file_text);
    if (c.files.size() > 1) text += '\n';
  }
  STRATA_CHECK(!text.empty(), "load_text: ", path.string(), " holds no text (", c.files.size(), " file(s))");
  const std::vector<int32_t> all = tokenizer.encode(text);
  const auto held = static_cast<size_t>(std::floor(held_out_fraction * static_cast<double>(all.size())));
  c.train.assign(all.begin(), all.end() - static_cast<std::ptrdiff_t>(held));
  c.held_out.assign(all.end() - static_cast<std::ptrdiff_t>(held), all.end());
  return c;
}

TextBatches::TextBatches(std::vector<int32_t> tokens, int64_t batch, int64_t block, uint64_t seed)
    : tokens_(std::move(tokens)), batch_(batch), block_(block), gen_(seed) {
  STRATA_CHECK(batch >= 1 && block >= 1, "TextBatches: batch ", batch, " and block ", block, " must be >= 1");
  STRATA_CHECK(static_cast<int64_t>(tokens_.size()) > block, "TextBatches: ", tokens_.size(),
               " tokens cannot make a window of ", block, " and its next token");
}

std::pair<Tensor, Tensor> TextBatches::next() {
  std::vector<int64_t> x(static_cast<size_t>(batch_ * block_)), y(x.size());
  const uint64_t starts = static_cast<uint64_t>(tokens_.size()) - static_cast<uint64_t>(block_);
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t s = static_cast<int64_t>(gen_.next_u64() % starts);  // modulo bias < starts / 2^64
    for (int64_t t = 0; t < block_; ++t) {
      x[static_cast<size_t>(b * block_ + t)] = tokens_[static_cast<size_t>(s + t)];
      y[static_cast<size_t>(b * block_ + t)] = tokens_[static_cast<size_t>(s + t + 1)];
    }
  }
  return {Tensor::from_vector(x, Shape{batch_, block_}), Tensor::from_vector(y, Shape{batch_, block_})};
}

}  // namespace strata::data
