#include "strata/data/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "strata/core/allocator.h"
#include "data_test_util.h"

namespace strata::data {
namespace {

// n images of shape [c,h,w]; pixel j of item i = (i * 10 + j) % 256; label i % 3.
std::shared_ptr<InMemoryDataset> synthetic(int64_t n, int64_t c = 1, int64_t h = 2, int64_t w = 2) {
  std::vector<uint8_t> px(static_cast<size_t>(n * c * h * w));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c * h * w; ++j) px[i * c * h * w + j] = static_cast<uint8_t>((i * 10 + j) % 256);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[i] = i % 3;
  return std::make_shared<InMemoryDataset>("synthetic", Tensor::from_vector(px, Shape{n, c, h, w}),
                                           Tensor::from_vector(labels, Shape{n}), 3);
}

// Wraps a dataset: counts reads, optionally sleeps, and throws for one index.
class InstrumentedDataset final : public Dataset {
 public:
  explicit InstrumentedDataset(std::shared_ptr<const Dataset> inner, int64_t throw_at = -1,
                               std::chrono::milliseconds delay = {})
      : inner_(std::move(inner)), throw_at_(throw_at), delay_(delay) {}
  std::string name() const override { return "instrumented"; }
  int64_t size() const override { return inner_->size(); }
  Shape image_shape() const override { return inner_->image_shape(); }
  Shape target_shape() const override { return inner_->target_shape(); }
  DType target_dtype() const override { return inner_->target_dtype(); }
  int64_t num_classes() const override { return inner_->num_classes(); }
  void read(int64_t i, uint8_t* image, void* target) const override {
    reads.fetch_add(1);
    if (delay_.count()) std::this_thread::sleep_for(delay_);
    STRATA_CHECK(i != throw_at_, "instrumented: cannot read item ", i);
    inner_->read(i, image, target);
  }
  mutable std::atomic<int64_t> reads{0};

 private:
  std::shared_ptr<const Dataset> inner_;
  int64_t throw_at_;
  std::chrono::milliseconds delay_;
};

std::vector<Batch> epoch(Loader& loader, int64_t e) {
  loader.start_epoch(e);
  std::vector<Batch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

std::vector<int64_t> visited(const std::vector<Batch>& batches) {
  std::vector<int64_t> v;
  for (const Batch& b : batches) v.insert(v.end(), b.indices.begin(), b.indices.end());
  return v;
}

TEST(Loader, SameSeedSameOrderAndEveryIndexOncePerEpoch) {
  auto ds = synthetic(10);
  Loader a(ds, {.batch_size = 3, .seed = 42}), b(ds, {.batch_size = 3, .seed = 42}), c(ds, {.batch_size = 3, .seed = 43});
  const std::vector<int64_t> a0 = visited(epoch(a, 0)), a1 = visited(epoch(a, 1));
  EXPECT_EQ(a0, visited(epoch(b, 0)));
  EXPECT_EQ(a1, visited(epoch(b, 1)));
  EXPECT_NE(a0, a1);  // a new order each epoch
  EXPECT_NE(a0, visited(epoch(c, 0)));
  EXPECT_EQ(a0, a.epoch_order(0));
  for (const auto& order : {a0, a1}) {
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  Loader seq(ds, {.batch_size = 4, .shuffle = false});
  EXPECT_EQ(visited(epoch(seq, 3)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Loader, BatchesHoldTheRightPixelsAndLabels) {
  auto ds = synthetic(5, 2, 1, 3);
  Loader loader(ds, {.batch_size = 2, .seed = 9});
  const std::vector<Batch> batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].images.sizes(), (Shape{1, 2, 1, 3}));
  for (const Batch& b : batches) {
    ASSERT_EQ(b.images.dtype(), DType::f32);
    ASSERT_EQ(b.targets.dtype(), DType::i64);
    const std::vector<float> px = b.images.to_vector<float>();
    const std::vector<int64_t> y = b.targets.to_vector<int64_t>();
    for (size_t r = 0; r < b.indices.size(); ++r) {
      const int64_t i = b.indices[r];
      EXPECT_EQ(y[r], i % 3);
      for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(px[r * 6 + j], static_cast<float>((i * 10 + j) % 256) / 255.0f);
    }
  }
}

TEST(Loader, DropLast) {
  auto ds = synthetic(10);
  Loader keep(ds, {.batch_size = 4}), drop(ds, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(keep.batches_per_epoch(), 3);
  EXPECT_EQ(drop.batches_per_epoch(), 2);
  const auto kb = epoch(keep, 0), db = epoch(drop, 0);
  ASSERT_EQ(kb.size(), 3u);
  EXPECT_EQ(kb[2].images.size(0), 2);
  ASSERT_EQ(db.size(), 2u);
  for (const Batch& b : db) EXPECT_EQ(b.images.size(0), 4);
  Loader none(ds, {.batch_size = 11, .drop_last = true});
  EXPECT_FALSE(none.next());
}

TEST(Loader, WorkersGiveTheSameBatchesAsNoWorkers) {
  auto ds = synthetic(37, 3, 4, 4);
  const std::vector<Transform> ts = {PadRandomCrop{2, 4, 4}, RandomHorizontalFlip{0.5}, Resize{5, 3},
                                     Normalize{{0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}}};
  Loader serial(ds, {.batch_size = 5, .seed = 7, .num_workers = 0, .transforms = ts});
  Loader parallel(ds, {.batch_size = 5, .seed = 7, .num_workers = 4, .prefetch = 3, .transforms = ts});
  EXPECT_EQ(parallel.image_shape(), (Shape{3, 5, 3}));
  for (int64_t e = 0; e < 3; ++e) {
    const auto s = epoch(serial, e), p = epoch(parallel, e);
    ASSERT_EQ(s.size(), p.size());
    for (size_t k = 0; k < s.size(); ++k) {
      EXPECT_EQ(s[k].index, p[k].index);
      EXPECT_EQ(s[k].indices, p[k].indices);
      EXPECT_EQ(s[k].images.sizes(), p[k].images.sizes());
      EXPECT_EQ(s[k].images.to_vector<float>(), p[k].images.to_vector<float>()) << "epoch " << e << " batch " << k;
      EXPECT_EQ(s[k].targets.to_vector<int64_t>(), p[k].targets.to_vector<int64_t>());
    }
  }
}

TEST(Loader, RandomTransformsChangeWithTheEpochButNotTheRun) {
  auto ds = synthetic(8, 1, 4, 4);
  const std::vector<Transform> ts = {PadRandomCrop{1, 0, 0}, RandomHorizontalFlip{}};
  Loader a(ds, {.batch_size = 8, .shuffle = false, .seed = 3, .transforms = ts});
  Loader b(ds, {.batch_size = 8, .shuffle = false, .seed = 3, .num_workers = 2, .transforms = ts});
  const auto a0 = epoch(a, 0), a1 = epoch(a, 1), b1 = epoch(b, 1);
  EXPECT_NE(a0[0].images.to_vector<float>(), a1[0].images.to_vector<float>());
  EXPECT_EQ(a1[0].images.to_vector<float>(), b1[0].images.to_vector<float>());
}

TEST(Loader, WorkerExceptionReachesTheConsumer) {
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(workers);
    auto ds = std::make_shared<InstrumentedDataset>(synthetic(9), /*throw_at=*/4);
    Loader loader(ds, {.batch_size = 2, .shuffle = false, .num_workers = workers});
    EXPECT_TRUE(loader.next());                                   // items 0,1
    EXPECT_TRUE(loader.next());                                   // items 2,3
    EXPECT_ERROR_MENTIONS(loader.next(), "cannot read item 4");  // items 4,5
    EXPECT_TRUE(loader.next());                                   // items 6,7
  }
}

TEST(Loader, PrefetchIsBoundedAndShutdownIsClean) {
  auto ds = std::make_shared<InstrumentedDataset>(synthetic(100), -1, std::chrono::milliseconds(1));
  {
    Loader loader(ds, {.batch_size = 2, .shuffle = false, .num_workers = 4, .prefetch = 3});
    loader.start_epoch(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    EXPECT_LE(ds->reads.load(), 3 * 2);  // at most 3 batches in flight
    EXPECT_TRUE(loader.next());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_LE(ds->reads.load(), 4 * 2);
    // Destroyed mid-epoch with workers busy or waiting: must not hang.
  }
  {
    Loader idle(ds, {.num_workers = 3});  // never started
  }
  {
    // Restarting an epoch mid-way discards in-flight batches and starts over.
    Loader loader(ds, {.batch_size = 10, .shuffle = false, .num_workers = 2});
    loader.start_epoch(0);
    EXPECT_EQ(loader.next()->indices.front(), 0);
    EXPECT_EQ(loader.next()->indices.front(), 10);
    const auto all = epoch(loader, 0);
    ASSERT_EQ(all.size(), 10u);
    EXPECT_EQ(all.front().indices.front(), 0);
  }
}

TEST(Loader, ReportsTimeSpentWaiting) {
  auto ds = std::make_shared<InstrumentedDataset>(synthetic(6), -1, std::chrono::milliseconds(5));
  Loader loader(ds, {.batch_size = 2, .num_workers = 0});
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(loader.stats().batches, 3);
  EXPECT_GE(loader.stats().wait_seconds, 0.025);  // 6 reads of >= 5 ms on this thread
  EXPECT_GE(batches[0].wait_seconds, 0.008);
  loader.reset_stats();
  EXPECT_EQ(loader.stats().batches, 0);
  EXPECT_EQ(loader.stats().wait_seconds, 0.0);
}

class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    ++count;
    return cpu_allocator().allocate(bytes);
  }
  void deallocate(void* p, size_t bytes) override { cpu_allocator().deallocate(p, bytes); }
  AllocatorStats stats() const override { return {}; }
  void reset_peak() override {}
  std::atomic<int> count{0};
};

TEST(Loader, PinnedBatchesComeFromThePinnedAllocator) {
  CountingAllocator counting;
  Allocator* previous = &pinned_host_allocator();
  set_pinned_host_allocator(&counting);
  {
    auto ds = synthetic(4);
    Loader pinned(ds, {.batch_size = 2, .shuffle = false, .num_workers = 1, .pin_memory = true});
    auto b = pinned.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->images.to_vector<float>()[5], 11.0f / 255.0f);  // item 1, pixel 1
    EXPECT_GE(counting.count.load(), 2);  // images and targets
    const int before = counting.count.load();
    Loader plain(ds, {.batch_size = 2, .num_workers = 0});
    EXPECT_TRUE(plain.next());
    EXPECT_EQ(counting.count.load(), before);
  }
  set_pinned_host_allocator(previous);
}

TEST(Loader, RejectsBadOptions) {
  auto ds = synthetic(4);
  EXPECT_ERROR_MENTIONS(Loader(ds, {.batch_size = 0}), "batch_size");
  EXPECT_ERROR_MENTIONS(Loader(ds, {.num_workers = -1}), "num_workers");
  EXPECT_ERROR_MENTIONS(Loader(ds, {.transforms = {norm::cifar10()}}), "Normalize");
  EXPECT_ERROR_MENTIONS(Loader(nullptr, {}), "null");
}

TEST(InMemoryDataset, ValidatesInputs) {
  const Tensor x = Tensor::empty(Shape{2, 1, 2, 2}, DType::u8);
  EXPECT_ERROR_MENTIONS(InMemoryDataset("d", x, Tensor::from_vector<int64_t>({0, 1, 2}, Shape{3}), 3),
                        "2 images but 3 labels");
  EXPECT_ERROR_MENTIONS(InMemoryDataset("d", x, Tensor::from_vector<int64_t>({0, 5}, Shape{2}), 3),
                        "label 5 of item 1");
  EXPECT_ERROR_MENTIONS(InMemoryDataset("d", Tensor::empty(Shape{2, 4}, DType::u8),
                                        Tensor::from_vector<int64_t>({0, 1}, Shape{2}), 3),
                        "u8 [N,C,H,W]");
}

// Data parallel: the ranks' batches, step by step, are the one-process global batch cut in rank slices.
TEST(LoaderShard, RanksTogetherVisitEverySampleOnceAndInGlobalOrder) {
  for (int64_t n : {1, 7, 24, 25, 29, 100}) {
    for (int64_t world : {1, 2, 3, 4}) {
      for (bool drop_last : {false, true}) {
        const int64_t b = 4;
        auto ds = synthetic(n);
        LoaderOptions one;
        one.batch_size = b * world;
        one.seed = 11;
        one.drop_last = drop_last;
        const std::vector<int64_t> global = Loader(ds, one).epoch_order(3);
        std::vector<std::vector<int64_t>> per_rank;
        std::vector<int64_t> bpe;
        for (int64_t r = 0; r < world; ++r) {
          LoaderOptions o = one;
          o.batch_size = b;
          o.shard_rank = r;
          o.shard_count = world;
          Loader l(ds, o);
          per_rank.push_back(l.epoch_order(3));
          bpe.push_back(l.batches_per_epoch());
        }
        const std::string what = "n " + std::to_string(n) + " world " + std::to_string(world) +
                                 (drop_last ? " drop_last" : "");
        // Every rank runs the same number of batches, each non-empty.
        for (int64_t r = 0; r < world; ++r) {
          EXPECT_EQ(bpe[r], bpe[0]) << what;
          EXPECT_GE(static_cast<int64_t>(per_rank[r].size()), bpe[r]) << what << " rank " << r;
          // (One process keeps the whole order; drop_last then leaves its tail unvisited.)
          if (world > 1) EXPECT_LE(static_cast<int64_t>(per_rank[r].size()), bpe[r] * b) << what << " rank " << r;
        }
        // Interleaving the ranks' batches gives the global order (what is visited, in order).
        std::vector<int64_t> joined;
        for (int64_t k = 0; k < bpe[0]; ++k)
          for (int64_t r = 0; r < world; ++r) {
            const auto& v = per_rank[r];
            const int64_t lo = k * b, hi = std::min<int64_t>(lo + b, static_cast<int64_t>(v.size()));
            joined.insert(joined.end(), v.begin() + lo, v.begin() + hi);
          }
        ASSERT_LE(joined.size(), global.size()) << what;
        EXPECT_TRUE(std::equal(joined.begin(), joined.end(), global.begin())) << what;
        std::set<int64_t> unique(joined.begin(), joined.end());
        EXPECT_EQ(unique.size(), joined.size()) << what << ": a sample visited twice";
        // Everything is visited, except a final global batch smaller than the world
        // (and, with drop_last, any partial one).
        const int64_t rest = n % (b * world);
        const int64_t dropped = drop_last ? rest : (rest < world ? rest : 0);
        EXPECT_EQ(static_cast<int64_t>(joined.size()), n - dropped) << what;
      }
    }
  }
}

TEST(LoaderShard, WorldOneIsTheOneProcessLoader) {
  auto ds = synthetic(37);
  LoaderOptions a;
  a.batch_size = 5;
  a.seed = 4;
  LoaderOptions b = a;
  b.shard_rank = 0;
  b.shard_count = 1;
  Loader la(ds, a), lb(ds, b);
  EXPECT_EQ(la.epoch_order(2), lb.epoch_order(2));
  EXPECT_EQ(la.batches_per_epoch(), lb.batches_per_epoch());
  EXPECT_EQ(la.batches_per_epoch(), 8);
}

TEST(LoaderShard, BatchesOfARankHoldItsSlice) {
  auto ds = synthetic(10);
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  o.shard_rank = 1;
  o.shard_count = 2;
  Loader l(ds, o);
  // Global batches of 4: [0..3], [4..7], then the rest 8, 9 split one each.
  l.start_epoch(0);
  std::vector<std::vector<int64_t>> got;
  while (auto batch = l.next()) got.push_back(batch->indices);
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{2, 3}, {6, 7}, {9}}));
}

TEST(LoaderShard, BadRankIsRefused) {
  auto ds = synthetic(4);
  LoaderOptions o;
  o.shard_rank = 2;
  o.shard_count = 2;
  try {
    Loader l(ds, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard_rank must be in 0..shard_count-1, got rank 2 of 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace strata::data
