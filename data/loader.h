#pragma once
// Loader: turns a Dataset into batches of f32 NCHW images and targets.
//
//   auto ds = std::make_shared<InMemoryDataset>(load_fashion_mnist(dir, Split::train));
//   Loader loader(ds, {.batch_size = 128, .seed = 1, .num_workers = 2,
//                      .transforms = {norm::fashion_mnist()}});
//   for (int64_t e = 0; e < epochs; ++e) {
//     loader.start_epoch(e);
//     while (auto b = loader.next()) train_step(b->images, b->targets);
//     log("waiting for data: ", loader.stats().wait_seconds, " s");
//   }
//
// Order: with shuffle, epoch e visits a permutation drawn from
// std::mt19937_64(mix_seed(seed, e)); the same seed gives the same order on every
// run and platform. Random transforms, and a dataset's random reading (Dataset::read_random:
// an image folder's RandomResizedCrop), use a generator seeded from (seed, epoch, dataset
// index), so batches are identical whatever num_workers is.
//
// Data parallel (shard_count > 1): every rank builds the same permutation of epoch e
// and takes its slice of each global batch of shard_count x batch_size rows: rank r
// gets rows [r*B, (r+1)*B) of each full global batch, and the last partial one is split
// as evenly as possible (sizes differ by at most one). Each sample is visited once per
// epoch across the ranks, and every rank runs the same number of batches (a collective
// step needs all of them); the one exception: a final partial global batch with fewer
// rows than ranks is dropped, since some rank would get an empty batch. With
// shard_count 1 the order is exactly the one-process order.
//
// Prefetch: num_workers threads build whole batches ahead of the consumer, at most
// `prefetch` batches beyond the one being consumed (claimed or ready), and next()
// returns them in order. An exception thrown while building a batch (unreadable file,
// corrupt JPEG, ...) is rethrown by the next() that would have returned that batch.
// Destruction stops the workers after the batch each is building.
//
// Memory: batches are fresh tensors; with pin_memory they come from
// pinned_host_allocator() (page-locked once a GPU backend installs one) so the
// trainer's host-to-device copies can be asynchronous and faster.
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "strata/core/tensor.h"
#include "strata/data/dataset.h"
#include "strata/data/transforms.h"

namespace strata::data {

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;   // drop a final batch smaller than batch_size
  int num_workers = 0;      // 0: batches are built inside next(), on the caller's thread
  int prefetch = 0;         // bound on batches in flight; 0: 2 * num_workers
  bool pin_memory = false;  // set when the model runs on a GPU
  int64_t shard_rank = 0;   // data parallel: this process's rank in 0..shard_count-1
  int64_t shard_count = 1;  // data parallel: the number of ranks (world size)
  std::vector<Transform> transforms = {};
};

struct Batch {
  Tensor images;                 // f32 [B,C,H,W], contiguous
  Tensor targets;                // i64 [B] (class index) or f32 [B,K] (multi-label)
  std::vector<int64_t> indices;  // dataset index of each row
  int64_t epoch = 0;
  int64_t index = 0;          // batch number within the epoch
  double wait_seconds = 0;    // how long next() blocked (or built, with 0 workers) for it
  double read_seconds = 0;    // building it: time in Dataset::read (file reads, decoding, crops)
  double transform_seconds = 0;  // building it: u8 -> f32 and the transforms, copies into the batch
};

struct LoaderStats {
  double wait_seconds = 0;  // total time next() spent waiting for data since the last reset
  int64_t batches = 0;      // batches returned since the last reset
  // Worker time spent building those batches (summed over workers, so it can exceed the wall time):
  // reading items (Batch::read_seconds) and transforming them (Batch::transform_seconds).
  double read_seconds = 0, transform_seconds = 0;
};

// The rows of `order` (one epoch, every rank's) that rank `rank` of `world` visits, by
// the rule above; `batch` is the per-rank batch size.
std::vector<int64_t> shard_order(const std::vector<int64_t>& order, int64_t batch, int64_t rank, int64_t world,
                                 bool drop_last);
// The batches per epoch of every rank for `n` samples, by the same rule.
int64_t sharded_batches(int64_t n, int64_t batch, int64_t world, bool drop_last);

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions opts);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return opts_; }
  int64_t batches_per_epoch() const;
  Shape image_shape() const { return image_shape_; }  // [C,H,W] of a batch row, after transforms

  // The dataset indices epoch `epoch` visits on this rank, in order.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  // Starts (or restarts) an epoch; batches of a previous epoch still in flight are
  // discarded. next() starts epoch 0 if no epoch was started.
  void start_epoch(int64_t epoch);
  // The next batch of the current epoch, or nullopt when the epoch is done.
  std::optional<Batch> next();

  LoaderStats stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  struct Plan {
    int64_t epoch;
    std::vector<int64_t> order;
    int64_t num_batches;
  };
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  Batch build(const Plan& plan, int64_t b) const;
  Tensor allocate(const Shape& sizes, DType dt) const;
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions opts_;
  Shape image_shape_;
  int capacity_ = 1;
  LoaderStats stats_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::shared_ptr<const Plan> plan_;
  int64_t next_claim_ = 0, next_consume_ = 0;
  std::map<int64_t, Slot> ready_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace strata::data
