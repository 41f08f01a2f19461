// Text for language models (data/text.h): the byte tokenizer round-trips any text, a corpus
// reads a file or a folder in path order with a held-out tail, and batches are nanoGPT's windows,
// y one token after x, the same for the same seed.
#include <gtest/gtest.h>

#include <filesystem>

#include "data_test_util.h"
#include "strata/data/text.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using data::testing::TempDir;
using data::testing::write_text;

TEST(Text, TheByteTokenizerRoundTripsAnyText) {
  const data::ByteTokenizer tok;
  const std::string text = "Grüße, 世界!\n\t  tabs and  spaces\r\n\xF0\x9F\x98\x80 end";
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids.size(), text.size());  // one token per byte
  EXPECT_EQ(ids[0], 'G');
  EXPECT_EQ(ids[2], 0xC3);  // the first byte of ü
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_STRATA_ERROR(tok.decode({65, 256}), "decode", "token 256", "position 1");
}

TEST(Text, ACorpusIsItsFilesInPathOrderWithAHeldOutTail) {
  const TempDir tmp;
  const fs::path& d = tmp.path();
  fs::create_directories(d / "b");
  write_text(d / "b" / "2.txt", "bb");
  write_text(d / "a.txt", "aaaa");
  write_text(d / "c.txt", "cccc");
  const data::TextCorpus c = data::load_text(d, 0.25);
  ASSERT_EQ(c.files.size(), 3u);
  EXPECT_EQ(c.files[0].filename(), "a.txt");
  EXPECT_EQ(c.files[1].filename(), "2.txt");
  const data::ByteTokenizer tok;
  EXPECT_EQ(tok.decode(c.train) + tok.decode(c.held_out), "aaaa\nbb\ncccc\n");
  EXPECT_EQ(c.held_out.size(), 3u);  // floor(0.25 * 13)
  EXPECT_EQ(data::load_text(d, 0.0, "2.txt").files.size(), 1u);  // only the names that end so
  const data::TextCorpus one = data::load_text(d / "a.txt", 0.0);
  EXPECT_EQ(tok.decode(one.train), "aaaa");
  EXPECT_TRUE(one.held_out.empty());
  EXPECT_STRATA_ERROR(data::load_text(d / "missing"), "load_text", "missing", "does not exist");
  write_text(d / "empty.txt", "");
  EXPECT_STRATA_ERROR(data::load_text(d / "empty.txt"), "load_text", "no text");
  EXPECT_STRATA_ERROR(data::load_text(d, 1.0), "held_out_fraction", "[0, 1)");
}

TEST(Text, TheBrownCorpussTaggedTextReadsBackAsPlainText) {
  EXPECT_EQ(data::brown_to_text("\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ,/, and/cc "
                                "Atlanta's/np$ 1/2/cd (/( so/rb )/) ./.\n\n\n\tNext/ap ?/.\n"),
            "The jury said \"no evidence\", and Atlanta's 1/2 (so).\nNext?\n");
  EXPECT_EQ(data::brown_to_text(""), "");
  // In the Brown format a folder's README and package.json are not corpus text.
  const data::testing::TempDir tmp;
  write_text(tmp / "ca01", "\tA/at cat/nn ./.\n");
  write_text(tmp / "README", "The Brown Corpus/np\n");
  const data::TextCorpus c = data::load_text(tmp.path(), 0.0, "", data::TextFormat::brown);
  ASSERT_EQ(c.files.size(), 1u);
  EXPECT_EQ(data::ByteTokenizer().decode(c.train), "A cat.\n");
}

TEST(Text, BatchesAreWindowsWithTheNextTokenAsTarget) {
  std::vector<int32_t> stream(100);
  for (int i = 0; i < 100; ++i) stream[static_cast<size_t>(i)] = i;
  data::TextBatches a(stream, 4, 8, 7), b(stream, 4, 8, 7), c(stream, 4, 8, 8);
  const auto [x, y] = a.next();
  ASSERT_EQ(x.sizes(), Shape({4, 8}));
  EXPECT_EQ(x.dtype(), DType::i64);
  const std::vector<int64_t> xv = x.to_vector<int64_t>(), yv = y.to_vector<int64_t>();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_EQ(yv[i], xv[i] + 1);  // the stream counts up: the target is the next token
    if (i % 8 != 0) {
      EXPECT_EQ(xv[i], xv[i - 1] + 1);  // a window is consecutive
    }
    EXPECT_LT(yv[i], 100);
  }
  EXPECT_EQ(b.next().first.to_vector<int64_t>(), xv);   // the same seed, the same windows
  EXPECT_NE(c.next().first.to_vector<int64_t>(), xv);   // another seed, other windows
  EXPECT_STRATA_ERROR(data::TextBatches(std::vector<int32_t>(8, 1), 1, 8, 0), "TextBatches", "8 tokens",
                      "window of 8");
}

}  // namespace
}  // namespace strata::testing
