// GPT-2's byte-pair tokenizer (data/gpt2_tokenizer.h) on a tiny vocabulary that the test writes in
// GPT-2's file format: merges by rank, every place of a pair left to right, GPT-2's pre-split, bytes
// that are not UTF-8, a long word, and the loader's refusals. gpt2_tokenizer_vectors_test.cpp checks the
// real vocabulary against the reference implementation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <future>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "strata/data/gpt2_tokenizer.h"
#include "strata/data/text.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using data::Gpt2Tokenizer;
using data::testing::TempDir;
using data::testing::write_text;

// A token as GPT-2's files write it, restated from encoder.py's bytes_to_unicode: the printable bytes
// stand for themselves, the 68 others for U+0100, U+0101, ... in byte order.
std::string written(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    unsigned cp = b;
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
      cp = 256;
      for (unsigned below = 0; below < b; ++below)
        if (!((below >= '!' && below <= '~') || (below >= 0xA1 && below <= 0xAC) || below >= 0xAE)) ++cp;
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

// Bytes get the ids (5 b + 3) mod 256, so that no id is its byte; merge i makes id 256 + i; then
// <|endoftext|>.
int32_t byte_id(unsigned char b) { return static_cast<int32_t>((5 * b + 3) % 256); }

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"b", "c"}, {"a", "b"}, {"a", "a"}, {"aa", "a"}, {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"},
    {" ", "w"}, {"o", "r"}, {" w", "or"}, {"'", "s"}};
int32_t merge_id(const std::string& left, const std::string& right) {
  for (size_t i = 0; i < kMerges.size(); ++i)
    if (kMerges[i] == std::pair{left, right}) return static_cast<int32_t>(256 + i);
  ADD_FAILURE() << "no merge " << left << " + " << right;
  return -1;
}
const int32_t kTinyEndOfText = 256 + static_cast<int32_t>(kMerges.size());

nlohmann::json tiny_encoder() {
  nlohmann::json e = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) e[written(std::string(1, static_cast<char>(b)))] = byte_id(static_cast<unsigned char>(b));
  for (const auto& [l, r] : kMerges) e[written(l + r)] = merge_id(l, r);
  e["<|endoftext|>"] = kTinyEndOfText;
  return e;
}
std::string tiny_merges() {
  std::string out = "#version: 0.2\n";
  for (const auto& [l, r] : kMerges) out += written(l) + " " + written(r) + "\n";
  return out;
}
void write_vocabulary(const fs::path& dir, const std::string& encoder_json, const std::string& vocab_bpe) {
  write_text(dir / "encoder.json", encoder_json);
  write_text(dir / "vocab.bpe", vocab_bpe);
}

class Gpt2TokenizerTiny : public ::testing::Test {
 protected:
  Gpt2TokenizerTiny() {
    write_vocabulary(tmp_.path(), tiny_encoder().dump(), tiny_merges());
    tok_ = std::make_unique<Gpt2Tokenizer>(tmp_.path());
  }
  std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) const {
    std::vector<int32_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  }
  TempDir tmp_;
  std::unique_ptr<Gpt2Tokenizer> tok_;
};

TEST_F(Gpt2TokenizerTiny, MergesTheLowestRankedPairFirstWhereverItIs) {
  EXPECT_EQ(tok_->vocab_size(), 256 + static_cast<int64_t>(kMerges.size()) + 1);
  EXPECT_EQ(tok_->encode("c"), (std::vector<int32_t>{byte_id('c')}));
  // "b c" is ranked above "a b": abc is a + bc, not ab + c.
  EXPECT_EQ(tok_->encode("abc"), (std::vector<int32_t>{byte_id('a'), merge_id("b", "c")}));
  EXPECT_EQ(tok_->encode("ab"), (std::vector<int32_t>{merge_id("a", "b")}));
  EXPECT_EQ(tok_->encode("hello"), (std::vector<int32_t>{merge_id("hell", "o")}));
}

TEST_F(Gpt2TokenizerTiny, MergesEveryPlaceOfAPairFromLeftToRightBeforeTheNextPair) {
  const int32_t aa = merge_id("a", "a"), aaa = merge_id("aa", "a"), a = byte_id('a');
  EXPECT_EQ(tok_->encode("aa"), (std::vector<int32_t>{aa}));
  EXPECT_EQ(tok_->encode("aaa"), (std::vector<int32_t>{aaa}));         // a a | a, then aa a
  EXPECT_EQ(tok_->encode("aaaa"), (std::vector<int32_t>{aa, aa}));     // no merge makes aaaa
  EXPECT_EQ(tok_->encode("aaaaa"), (std::vector<int32_t>{aa, aaa}));   // aa aa a, then aa + aaa
  EXPECT_EQ(tok_->encode("aaaaaaa"), (std::vector<int32_t>{aa, aa, aaa}));
  EXPECT_NE(tok_->encode("a"), (std::vector<int32_t>{aa}));
  EXPECT_EQ(tok_->encode("a"), (std::vector<int32_t>{a}));
}

TEST_F(Gpt2TokenizerTiny, SplitsTextWithGpt2sPatternFirst) {
  const int32_t hello = merge_id("hell", "o"), wor = merge_id(" w", "or"), space = byte_id(' ');
  // " world": the space belongs to the word; "ll" inside "world" is never seen because "or" + "l" splits it.
  EXPECT_EQ(tok_->encode("hello world"), (std::vector<int32_t>{hello, wor, byte_id('l'), byte_id('d')}));
  // Two spaces: the first stands alone (white space not followed by a non-space), the second joins the word.
  EXPECT_EQ(tok_->encode("hello  world"), (std::vector<int32_t>{hello, space, wor, byte_id('l'), byte_id('d')}));
  // A contraction is a piece of its own; "he" and "'s" would otherwise be one letter run and one
  // punctuation run.
  EXPECT_EQ(tok_->encode("he's"), (std::vector<int32_t>{merge_id("h", "e"), merge_id("'", "s")}));
  // White space at the end, and a letter run that does not merge across the digit.
  EXPECT_EQ(tok_->encode("ab1ab \n"),
            (std::vector<int32_t>{merge_id("a", "b"), byte_id('1'), merge_id("a", "b"), space, byte_id('\n')}));
  EXPECT_EQ(tok_->encode(""), std::vector<int32_t>{});
}

TEST_F(Gpt2TokenizerTiny, DecodeGivesTheBytesBackAndRefusesUnknownIds) {
  for (const std::string s : {"hello  world\n", "aaaaa bc", "\t\t x", "Grüße 世界 \xF0\x9F\x98\x80"})
    EXPECT_EQ(tok_->decode(tok_->encode(s)), s);
  EXPECT_STRATA_ERROR(tok_->decode({merge_id("a", "b"), kTinyEndOfText + 1}), "Gpt2Tokenizer::decode", "token 269",
                      "position 1", "not in the vocabulary", "0..268");
  EXPECT_STRATA_ERROR(tok_->decode({-1}), "token -1", "position 0");
}

TEST_F(Gpt2TokenizerTiny, EndOfTextIsAnIdAndNeverParsedOutOfText) {
  EXPECT_EQ(tok_->end_of_text(), kTinyEndOfText);
  EXPECT_EQ(tok_->decode({kTinyEndOfText}), "<|endoftext|>");
  const std::vector<int32_t> ids = tok_->encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  for (const int32_t id : ids) EXPECT_NE(id, kTinyEndOfText);
}

TEST_F(Gpt2TokenizerTiny, BytesThatAreNotUtf8AreAPieceOfTheirOwnAndRoundTrip) {
  // The text around a run that is not UTF-8 is encoded as if alone; the run is merged like any piece.
  EXPECT_EQ(tok_->encode("hello\xFF\xFE world"),
            cat({tok_->encode("hello"), {byte_id(0xFF), byte_id(0xFE)}, tok_->encode(" world")}));
  EXPECT_EQ(tok_->encode("ab \xE2\x82"), cat({tok_->encode("ab "), {byte_id(0xE2), byte_id(0x82)}}));  // cut short
  EXPECT_EQ(tok_->encode("\xC0\xAF" "ab"), cat({{byte_id(0xC0), byte_id(0xAF)}, tok_->encode("ab")}));  // overlong '/'
  EXPECT_EQ(tok_->encode("\xED\xA0\x80"), (std::vector<int32_t>{byte_id(0xED), byte_id(0xA0), byte_id(0x80)}));  // a surrogate
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  for (const std::string& s : {every_byte, every_byte + every_byte, std::string("\x80 aa\xC3", 5)})
    EXPECT_EQ(tok_->decode(tok_->encode(s)), s);
}

TEST_F(Gpt2TokenizerTiny, ALongWordTakesLinearTimeNotQuadratic) {
  // encoder.py's round-by-round loop would take about 10^12 steps on this; the heap takes milliseconds.
  const std::string word(1'000'000, 'a');
  const std::vector<int32_t> ids = tok_->encode(word);
  ASSERT_EQ(ids.size(), 500'000u);  // a a merged everywhere; no merge joins aa aa
  EXPECT_EQ(ids.front(), merge_id("a", "a"));
  EXPECT_EQ(ids.back(), merge_id("a", "a"));
  EXPECT_EQ(tok_->decode(ids), word);
}

TEST_F(Gpt2TokenizerTiny, EncodesFromSeveralThreadsAtOnce) {
  const std::string text = "hello world, he's here: aaaaa abc\n";
  const std::vector<int32_t> expected = tok_->encode(text);
  std::vector<std::future<std::vector<int32_t>>> runs;
  for (int t = 0; t < 4; ++t)
    runs.push_back(std::async(std::launch::async, [&] {
      size_t tokens = 0;
      for (int i = 0; i < 200; ++i) tokens += tok_->encode(text + std::to_string(i % 7)).size();
      EXPECT_GT(tokens, 0u);
      return tok_->encode(text);
    }));
  for (auto& r : runs) EXPECT_EQ(r.get(), expected);
}

TEST_F(Gpt2TokenizerTiny, LoadTextEncodesTheWholeCorpusWithIt) {
  const TempDir corpus;
  write_text(corpus / "a.txt", "hello ");
  write_text(corpus / "b.txt", "world");
  const data::TextCorpus c = data::load_text(corpus.path(), 0.0, ".txt", data::TextFormat::plain, *tok_);
  EXPECT_EQ(c.train, tok_->encode("hello \nworld\n"));  // one text: the space and the newline are one piece
}

// The loader's refusals: each case spoils the tiny files one way.
struct BadFiles {
  const char* what;
  std::string encoder_json, vocab_bpe;
  std::vector<const char*> message;
};

TEST(Gpt2TokenizerLoading, RefusesFilesThatAreNotAVocabularyNamingTheFileAndTheFault) {
  const std::string good_encoder = tiny_encoder().dump(), good_merges = tiny_merges();
  auto encoder_with = [&](auto&& change) {
    nlohmann::json e = tiny_encoder();
    change(e);
    return e.dump();
  };
  const std::string merge_bc = written("b") + " " + written("c") + "\n";
  const std::string merge_ab = written("a") + " " + written("b") + "\n";
  const std::string no_version = good_merges.substr(good_merges.find('\n') + 1);
  auto last_line_is = [&](const std::string& line) {  // the last merge is "' s"
    return good_merges.substr(0, good_merges.size() - 4) + line;
  };
  std::string swapped = good_merges;  // "aa a" before "a a", which makes its part "aa"
  const std::string aa_line = written("a") + " " + written("a") + "\n", aaa_line = written("aa") + " " + written("a") + "\n";
  swapped.replace(swapped.find(aa_line), aa_line.size() + aaa_line.size(), aaa_line + aa_line);
  std::string repeated = good_merges;
  repeated.replace(repeated.find(merge_ab), merge_ab.size(), merge_bc);  // b c twice; a b's token then unmade
  const std::vector<BadFiles> cases = {
      {"not JSON", "{\"a\": 1,", good_merges, {"encoder.json", "is not valid JSON"}},
      {"an array", "[1, 2, 3]", good_merges, {"encoder.json", "is a JSON array", "not an object"}},
      {"a string id", encoder_with([](auto& e) { e["!"] = "three"; }), good_merges,
       {"encoder.json", "the id of token '!'", "not an integer"}},
      {"an id past the end", encoder_with([](auto& e) { e["<|endoftext|>"] = 5000; }), good_merges,
       {"encoder.json", "'<|endoftext|>' has id 5000", "outside 0..268"}},
      {"an id twice", encoder_with([&](auto& e) { e[written("he")] = byte_id('h'); }), good_merges,
       {"encoder.json", "is given to two tokens"}},
      {"no <|endoftext|>",
       encoder_with([](auto& e) {
         e.erase("<|endoftext|>");
         e["<|end|>"] = kTinyEndOfText;
       }),
       good_merges, {"encoder.json", "has no <|endoftext|> token"}},
      {"a character outside the alphabet", encoder_with([](auto& e) { e["a\xE4\xB8\x96"] = e["<|endoftext|>"]; e.erase("<|endoftext|>"); }),
       good_merges, {"encoder.json", "has a character outside GPT-2's 256 byte characters"}},
      {"a byte without a token",
       encoder_with([](auto& e) {
         e["zz"] = e[written("\n")];
         e.erase(written("\n"));
       }),
       good_merges, {"encoder.json", "no token for the byte 0x0A"}},
      {"a merge fewer than tokens", good_encoder, last_line_is(""),
       {"encoder.json", "has 269 tokens", "11 merges", "make 268", "50257"}},
      {"no version line", good_encoder, no_version, {"vocab.bpe", "the first line is 'b c'", "#version"}},
      {"no newline at the end", good_encoder, good_merges.substr(0, good_merges.size() - 1),
       {"vocab.bpe", "does not end with a newline"}},
      {"three tokens on a line", good_encoder, last_line_is("a b c\n"),
       {"vocab.bpe", "line 13", "'a b c'", "not two tokens separated by one space"}},
      {"a merge naming an unknown token", good_encoder, last_line_is("zz s\n"),
       {"vocab.bpe", "line 13", "names 'zz'", "not a token of", "encoder.json"}},
      {"a merge making an unknown token", good_encoder, last_line_is("' c\n"),
       {"vocab.bpe", "line 13", "makes ''c'", "not a token of"}},
      {"a merge before the one making its part", good_encoder, swapped,
       {"vocab.bpe", "line 4", "uses a token that line 5 makes", "order they were learned in"}},
      {"a merge listed twice", good_encoder, repeated, {"vocab.bpe", "line 3 repeats the merge", "of line 2"}},
  };
  for (const BadFiles& c : cases) {
    SCOPED_TRACE(c.what);
    const TempDir tmp;
    write_vocabulary(tmp.path(), c.encoder_json, c.vocab_bpe);
    try {
      const Gpt2Tokenizer tok(tmp.path());
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      std::vector<const char*> parts = c.message;
      parts.push_back("Gpt2Tokenizer: ");
      for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
    }
  }
}

TEST(Gpt2TokenizerLoading, AMissingFolderOrFileSaysHowToFetchThem) {
  const TempDir tmp;
  EXPECT_STRATA_ERROR(Gpt2Tokenizer(tmp.path() / "nowhere"), "Gpt2Tokenizer", "nowhere", "does not exist",
                      "tools/get-data.sh gpt2-bpe");
  write_text(tmp / "vocab.bpe", tiny_merges());
  EXPECT_STRATA_ERROR(Gpt2Tokenizer(tmp.path()), "Gpt2Tokenizer", "encoder.json", "tools/get-data.sh gpt2-bpe");
  write_text(tmp / "encoder.json", tiny_encoder().dump());
  fs::remove(tmp / "vocab.bpe");
  EXPECT_STRATA_ERROR(Gpt2Tokenizer(tmp.path()), "Gpt2Tokenizer", "vocab.bpe", "tools/get-data.sh gpt2-bpe");
  EXPECT_STRATA_ERROR(Gpt2Tokenizer(tmp / "encoder.json"), "is not a folder");
}

}  // namespace
}  // namespace strata::testing
