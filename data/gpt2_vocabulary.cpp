#include "strata/data/gpt2_vocabulary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "strata/core/error.h"
#include "strata/core/file.h"

namespace strata::data {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kWho = "Gpt2Tokenizer";
constexpr std::string_view kFetchHint = "tools/get-data.sh gpt2-bpe DIR puts GPT-2's files in DIR/package";
constexpr std::string_view kEndOfTextToken = "<|endoftext|>";
// GPT-2's files are 1 MB and 0.5 MB; anything near this is not a vocabulary.
constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves and the 68 others (controls, space,
// 0x7F-0xA0, 0xAD) for 256, 257, ... in byte order, so that no token holds white space or a control
// character. The largest is U+0143.
constexpr char32_t kAlphabetEnd = 256 + 68;
struct ByteAlphabet {
  std::array<int16_t, kAlphabetEnd> byte_of;  // code point -> byte, -1 for none
  ByteAlphabet() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_of[printable ? static_cast<char32_t>(b) : next++] = static_cast<int16_t>(b);
    }
  }
  // The bytes that a token written in the alphabet stands for; nullopt when a character is not one of
  // the 256 (all of them are one or two bytes of UTF-8).
  std::optional<std::string> bytes_of(std::string_view written) const {
    std::string out;
    for (size_t i = 0; i < written.size();) {
      const auto b0 = static_cast<unsigned char>(written[i]);
      char32_t cp = b0;
      if (b0 >= 0x80) {
        if (b0 < 0xC2 || b0 > 0xDF || i + 1 >= written.size()) return std::nullopt;
        const auto b1 = static_cast<unsigned char>(written[i + 1]);
        if ((b1 & 0xC0) != 0x80) return std::nullopt;
        cp = (static_cast<char32_t>(b0 & 0x1F) << 6) | (b1 & 0x3F);
        ++i;
      }
      ++i;
      if (cp >= kAlphabetEnd || byte_of[cp] < 0) return std::nullopt;
      out += static_cast<char>(byte_of[cp]);
    }
    return out;
  }
};

std::string read_file_of(const fs::path& file) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_regular_file(file, kMaxFileBytes);
  } catch (const Error& e) {
    STRATA_FAIL(kWho, ": ", e.what(), " (", kFetchHint, ")");
  }
  return {bytes.begin(), bytes.end()};
}

// encoder.json: fills tokens, end_of_text and byte_token; returns token bytes -> id.
std::unordered_map<std::string, int32_t> read_encoder(const fs::path& file, const ByteAlphabet& alphabet,
                                                      Gpt2Vocabulary& v) {
  const std::string text = read_file_of(file);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    STRATA_FAIL(kWho, ": ", quoted(file), " is not valid JSON: ", e.what());
  }
  STRATA_CHECK(json.is_object(), kWho, ": ", quoted(file), " is a JSON ", json.type_name(),
               ", not an object of token -> id");
  const auto size = static_cast<int64_t>(json.size());
  STRATA_CHECK(size > 256 && size < (int64_t{1} << 31), kWho, ": ", quoted(file), " holds ", size,
               " tokens; a byte-pair vocabulary has the 256 bytes and more");
  v.tokens.assign(static_cast<size_t>(size), {});
  std::vector<std::string_view> written_as(static_cast<size_t>(size));  // for messages
  std::unordered_map<std::string, int32_t> id_of;
  for (const auto& [written, value] : json.items()) {
    STRATA_CHECK(!written.empty(), kWho, ": ", quoted(file), " has an empty token (id ", value.dump(), ")");
    STRATA_CHECK(value.is_number_integer(), kWho, ": ", quoted(file), ": the id of token '", written, "' is ",
                 value.dump(), ", not an integer");
    const auto id = value.get<int64_t>();
    STRATA_CHECK(id >= 0 && id < size, kWho, ": ", quoted(file), ": token '", written, "' has id ", id,
                 ", outside 0..", size - 1, " (the ids of ", size, " tokens)");
    const auto slot = static_cast<size_t>(id);
    STRATA_CHECK(written_as[slot].empty(), kWho, ": ", quoted(file), ": id ", id, " is given to two tokens, '",
                 written_as[slot], "' and '", written, "'");
    written_as[slot] = written;
    std::optional<std::string> bytes = alphabet.bytes_of(written);
    STRATA_CHECK(bytes.has_value(), kWho, ": ", quoted(file), ": token '", written, "' (id ", id,
                 ") has a character outside GPT-2's 256 byte characters");
    v.tokens[slot] = *bytes;
    id_of.emplace(std::move(*bytes), static_cast<int32_t>(id));
  }
  const auto eot = id_of.find(std::string(kEndOfTextToken));
  STRATA_CHECK(eot != id_of.end(), kWho, ": ", quoted(file), " has no ", kEndOfTextToken, " token");
  v.end_of_text = eot->second;
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      STRATA_FAIL(kWho, ": ", quoted(file), " has no token for the byte ", hex,
                  " (a byte-pair vocabulary has one for each of the 256)");
    }
    v.byte_token[static_cast<size_t>(b)] = it->second;
  }
  return id_of;
}

// vocab.bpe: fills merges, checking them against encoder.json's tokens.
void read_merges(const fs::path& file, const fs::path& encoder_file, const ByteAlphabet& alphabet,
                 const std::unordered_map<std::string, int32_t>& id_of, Gpt2Vocabulary& v) {
  const std::string text = read_file_of(file);
  STRATA_CHECK(text.starts_with("#version"), kWho, ": ", quoted(file), ": the first line is '",
               text.substr(0, std::min(text.find('\n'), size_t{40})), "', not GPT-2's '#version: 0.2'");
  STRATA_CHECK(text.ends_with('\n'), kWho, ": ", quoted(file), " does not end with a newline (cut short?)");
  std::vector<std::string_view> lines;  // the merges, without the version line
  for (size_t pos = text.find('\n') + 1; pos < text.size();) {
    const size_t eol = text.find('\n', pos);
    lines.emplace_back(text.data() + pos, eol - pos);
    pos = eol + 1;
  }
  const size_t expected = 256 + lines.size() + 1;
  STRATA_CHECK(v.tokens.size() == expected, kWho, ": ", quoted(encoder_file), " has ", v.tokens.size(),
               " tokens, but 256 bytes + ", lines.size(), " merges (", quoted(file), ") + ", kEndOfTextToken, " make ",
               expected, " (GPT-2's: 256 + 50000 + 1 = 50257)");
  struct Parsed {
    int32_t left, right, result;
  };
  std::vector<Parsed> parsed;
  parsed.reserve(lines.size());
  std::vector<int32_t> made_last(v.tokens.size(), -1);  // token -> the last merge that makes it
  auto id_of_written = [&](std::string_view written, size_t line, std::string_view role) {
    const std::optional<std::string> bytes = alphabet.bytes_of(written);
    const auto it = bytes ? id_of.find(*bytes) : id_of.end();
    STRATA_CHECK(it != id_of.end(), kWho, ": ", quoted(file), " line ", line, ": the merge '", lines[line - 2], "' ",
                 role, " '", written, "', which is not a token of ", quoted(encoder_file));
    return it->second;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t line_no = i + 2;
    const size_t space = line.find(' ');
    STRATA_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                     line.find(' ', space + 1) == std::string_view::npos,
                 kWho, ": ", quoted(file), " line ", line_no, " is '", line,
                 "', not two tokens separated by one space");
    const std::string_view left = line.substr(0, space), right = line.substr(space + 1);
    const int32_t l = id_of_written(left, line_no, "names");
    const int32_t r = id_of_written(right, line_no, "names");
    const auto result = id_of.find(v.tokens[static_cast<size_t>(l)] + v.tokens[static_cast<size_t>(r)]);
    STRATA_CHECK(result != id_of.end(), kWho, ": ", quoted(file), " line ", line_no, ": the merge '", line,
                 "' makes '", left, right, "', which is not a token of ", quoted(encoder_file));
    const auto [it, fresh] = v.merges.emplace(Gpt2Vocabulary::merge_key(l, r),
                                              Gpt2Vocabulary::Merge{static_cast<int32_t>(i), result->second});
    STRATA_CHECK(fresh, kWho, ": ", quoted(file), " line ", line_no, " repeats the merge '", line, "' of line ",
                 it->second.rank + 2);
    made_last[static_cast<size_t>(result->second)] = static_cast<int32_t>(i);
    parsed.push_back({l, r, result->second});
  }
  // Gpt2Tokenizer's merge loop equals encoder.py's only when a merge never makes a pair ranked below
  // itself, which holds when each merge comes after those that make its parts: the order BPE learns them in.
  for (size_t i = 0; i < parsed.size(); ++i)
    for (const int32_t part : {parsed[i].left, parsed[i].right}) {
      const int32_t maker = made_last[static_cast<size_t>(part)];
      STRATA_CHECK(maker < static_cast<int32_t>(i), kWho, ": ", quoted(file), " line ", i + 2, ": the merge '",
                   lines[i], "' uses a token that line ", maker + 2,
                   " makes; a merge must come after those that make its parts (the order they were learned in)");
    }
}

}  // namespace

Gpt2Vocabulary read_gpt2_vocabulary(const fs::path& dir) {
  std::error_code ec;
  STRATA_CHECK(fs::is_directory(dir, ec), kWho, ": the folder ", quoted(dir),
               fs::exists(dir, ec) ? " is not a folder" : " does not exist", " (", kFetchHint, ")");
  const ByteAlphabet alphabet;
  Gpt2Vocabulary v;
  const fs::path encoder_file = dir / "encoder.json";
  const auto id_of = read_encoder(encoder_file, alphabet, v);
  read_merges(dir / "vocab.bpe", encoder_file, alphabet, id_of, v);
  return v;
}

}  // namespace strata::data
