#include "strata/data/gpt2_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <functional>
#include <limits>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <utility>

#include "strata/core/error.h"
#include "strata/data/gpt2_vocabulary.h"

namespace strata::data {

namespace {

// GPT-2's pattern with \s and \S written as Unicode's White_Space, which is what Python's regex module
// (encoder.py's) matches; PCRE2's own \s also takes U+180E.
constexpr std::string_view kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
    R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

// The cache holds short pieces (words): a long one is rarely seen twice. It is emptied when full, which
// bounds its memory on a large corpus and changes no result.
constexpr size_t kCachedPieceBytes = 64;
constexpr size_t kCacheEntries = size_t{1} << 18;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

struct CodeFree {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

struct Gpt2Tokenizer::Impl {
  Gpt2Vocabulary vocab;
  std::unique_ptr<pcre2_code, CodeFree> pattern;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>, PieceHash, std::equal_to<>> cache;

  void append_piece(std::string_view piece, std::vector<int32_t>& out) const;
  void merge(std::string_view piece, std::vector<int32_t>& out) const;
};

Gpt2Tokenizer::Gpt2Tokenizer(const std::filesystem::path& dir) : impl_(std::make_unique<Impl>()) {
  impl_->vocab = read_gpt2_vocabulary(dir);
  int code = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF: bytes that are not UTF-8 are never matched (encode makes them pieces of their
  // own) and never read as characters; PCRE2_NO_UTF_CHECK without it would be undefined on them.
  impl_->pattern.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset, nullptr));
  STRATA_CHECK(impl_->pattern != nullptr, "Gpt2Tokenizer: PCRE2 cannot compile GPT-2's pattern (at offset ",
               offset, "): ", pcre2_message(code), " (PCRE2 10.40 or later, with Unicode, is needed)");
  // The JIT gives the same matches faster; where it is not available, pcre2_match interprets.
  pcre2_jit_compile(impl_->pattern.get(), PCRE2_JIT_COMPLETE);
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

int64_t Gpt2Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->vocab.tokens.size()); }

int32_t Gpt2Tokenizer::end_of_text() const { return impl_->vocab.end_of_text; }

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  if (text.empty()) return ids;
  std::unique_ptr<pcre2_match_data, MatchDataFree> match(
      pcre2_match_data_create_from_pattern(impl_->pattern.get(), nullptr));
  STRATA_CHECK(match != nullptr, "Gpt2Tokenizer::encode: no memory for PCRE2's match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t done = 0;
  while (done < text.size()) {
    const int rc = pcre2_match(impl_->pattern.get(), subject, text.size(), done, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {  // the pattern matches every character: what is left is not UTF-8
      impl_->append_piece(text.substr(done), ids);
      break;
    }
    STRATA_CHECK(rc > 0, "Gpt2Tokenizer::encode: PCRE2 failed at byte ", done, " of ", text.size(), ": ",
                 pcre2_message(rc));
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    // Each alternative takes a character or more, so matches move forward; a stall would loop forever.
    STRATA_CHECK(span[0] >= done && span[1] > span[0], "Gpt2Tokenizer::encode: PCRE2 matched an empty piece at byte ",
                 span[0]);
    if (span[0] > done) impl_->append_piece(text.substr(done, span[0] - done), ids);  // bytes that are not UTF-8
    impl_->append_piece(text.substr(span[0], span[1] - span[0]), ids);
    done = span[1];
  }
  return ids;
}

void Gpt2Tokenizer::Impl::append_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > kCachedPieceBytes) return merge(piece, out);
  {
    const std::lock_guard lock(cache_mutex);
    if (const auto it = cache.find(piece); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge(piece, out);
  const std::lock_guard lock(cache_mutex);
  if (cache.size() >= kCacheEntries) cache.clear();
  cache.emplace(std::string(piece), std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
}

// encoder.py merges round by round: the lowest-ranked pair of the piece at each place it occurs, left to
// right, then the next lowest, which costs O(n^2) on a long piece. A heap of (rank, place) makes the same
// merges in O(n log n): a merge only makes pairs ranked above itself (read_gpt2_vocabulary checks that
// each merge comes after those that make its parts), so every place of one rank is merged, leftmost
// first, before any pair that those merges made.
void Gpt2Tokenizer::Impl::merge(std::string_view piece, std::vector<int32_t>& out) const {
  STRATA_CHECK(piece.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
               "Gpt2Tokenizer::encode: a piece of ", piece.size(), " bytes (a word of 2 GiB or more)");
  const auto n = static_cast<int32_t>(piece.size());
  if (n == 0) return;
  std::vector<int32_t> id(static_cast<size_t>(n)), prev(id.size()), next(id.size());
  for (int32_t i = 0; i < n; ++i) {
    id[static_cast<size_t>(i)] = vocab.byte_token[static_cast<unsigned char>(piece[static_cast<size_t>(i)])];
    prev[static_cast<size_t>(i)] = i - 1;
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  using Candidate = std::pair<int32_t, int32_t>;  // (rank, place of its left token)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto merge_at = [&](int32_t left) -> const Gpt2Vocabulary::Merge* {
    if (left < 0 || next[static_cast<size_t>(left)] < 0) return nullptr;
    return vocab.find_merge(id[static_cast<size_t>(left)], id[static_cast<size_t>(next[static_cast<size_t>(left)])]);
  };
  const auto consider = [&](int32_t left) {
    if (const auto* m = merge_at(left)) heap.emplace(m->rank, left);
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    const auto l = static_cast<size_t>(left);
    const auto* m = id[l] < 0 ? nullptr : merge_at(left);
    if (m == nullptr || m->rank != rank) continue;  // this place has changed since it was pushed
    const auto r = static_cast<size_t>(next[l]);
    id[l] = m->result;
    id[r] = -1;
    next[l] = next[r];
    if (next[l] >= 0) prev[static_cast<size_t>(next[l])] = left;
    consider(prev[l]);
    consider(left);
  }
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) out.push_back(id[static_cast<size_t>(i)]);
}

std::string Gpt2Tokenizer::decode(const std::vector<int32_t>& ids) const {
  const std::vector<std::string>& tokens = impl_->vocab.tokens;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    STRATA_CHECK(ids[i] >= 0 && static_cast<size_t>(ids[i]) < tokens.size(), "Gpt2Tokenizer::decode: token ",
                 ids[i], " at position ", i, " is not in the vocabulary (ids 0..", tokens.size() - 1, ")");
    out += tokens[static_cast<size_t>(ids[i])];
  }
  return out;
}

}  // namespace strata::data
