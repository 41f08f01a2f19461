#include "strata/data/loader.h"

#include <chrono>
#include <cstring>

#include "strata/data/random.h"

namespace strata::data {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Stream tags so the order and the per-image generators never share a seed.
constexpr uint64_t kOrderStream = 0x6f72646572ull;      // "order"
constexpr uint64_t kTransformStream = 0x7866726dull;    // "xfrm"

}  // namespace

int64_t sharded_batches(int64_t n, int64_t batch, int64_t world, bool drop_last) {
  const int64_t global = batch * world;
  const int64_t full = n / global, rest = n % global;
  if (drop_last) return full;
  return full + (rest >= world ? 1 : 0);
}

std::vector<int64_t> shard_order(const std::vector<int64_t>& order, int64_t batch, int64_t rank, int64_t world,
                                 bool drop_last) {
  STRATA_CHECK(world >= 1 && rank >= 0 && rank < world, "Loader: shard rank ", rank, " is outside 0..", world - 1,
               " (shard_count ", world, ")");
  STRATA_CHECK(batch > 0, "Loader: batch_size must be positive, got ", batch);
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t global = batch * world;
  const int64_t full = n / global;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(full * batch + batch));
  for (int64_t g = 0; g < full; ++g) {
    const auto first = order.begin() + g * global + rank * batch;
    mine.insert(mine.end(), first, first + batch);
  }
  if (sharded_batches(n, batch, world, drop_last) > full) {
    // The partial last global batch: the first rest % world ranks take one row more.
    const int64_t rest = n - full * global, base = rest / world, extra = rest % world;
    const int64_t begin = full * global + rank * base + std::min(rank, extra);
    const int64_t count = base + (rank < extra ? 1 : 0);
    mine.insert(mine.end(), order.begin() + begin, order.begin() + begin + count);
  }
  return mine;
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions opts)
    : dataset_(std::move(dataset)), opts_(std::move(opts)) {
  STRATA_CHECK(dataset_ != nullptr, "Loader: dataset is null");
  const std::string& nm = dataset_->name();
  STRATA_CHECK(opts_.batch_size > 0, "Loader(", nm, "): batch_size must be positive, got ", opts_.batch_size);
  STRATA_CHECK(opts_.num_workers >= 0 && opts_.num_workers <= 256, "Loader(", nm,
               "): num_workers must be in 0..256, got ", opts_.num_workers);
  STRATA_CHECK(opts_.shard_count >= 1 && opts_.shard_rank >= 0 && opts_.shard_rank < opts_.shard_count, "Loader(",
               nm, "): shard_rank must be in 0..shard_count-1, got rank ", opts_.shard_rank, " of ", opts_.shard_count);
  STRATA_CHECK(opts_.prefetch >= 0, "Loader(", nm, "): prefetch must be >= 0, got ", opts_.prefetch);
  const DType tdt = dataset_->target_dtype();
  const Shape ts = dataset_->target_shape();
  STRATA_CHECK((tdt == DType::i64 && ts.size() == 0) || (tdt == DType::f32 && ts.size() == 1), "Loader(", nm,
               "): targets must be i64 [] or f32 [K], dataset has ", dtype_name(tdt), ts.str());
  image_shape_ = transformed_shape(dataset_->image_shape(), opts_.transforms);
  capacity_ = opts_.prefetch > 0 ? opts_.prefetch : 2 * opts_.num_workers;
  if (capacity_ < 1) capacity_ = 1;
  workers_.reserve(static_cast<size_t>(opts_.num_workers));
  for (int w = 0; w < opts_.num_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t Loader::batches_per_epoch() const {
  return sharded_batches(dataset_->size(), opts_.batch_size, opts_.shard_count, opts_.drop_last);
}

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_->size();
  std::vector<int64_t> order;
  if (!opts_.shuffle) {
    order.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
  } else {
    std::mt19937_64 rng(mix_seed(opts_.seed, kOrderStream, static_cast<uint64_t>(epoch)));
    order = random_permutation(n, rng);
  }
  if (opts_.shard_count == 1) return order;
  return shard_order(order, opts_.batch_size, opts_.shard_rank, opts_.shard_count, opts_.drop_last);
}

void Loader::start_epoch(int64_t epoch) {
  auto plan = std::make_shared<Plan>(Plan{epoch, epoch_order(epoch), batches_per_epoch()});
  std::map<int64_t, Slot> stale;
  {
    std::lock_guard lk(mu_);
    plan_ = std::move(plan);
    next_claim_ = next_consume_ = 0;
    stale.swap(ready_);  // freed outside the lock
  }
  work_cv_.notify_all();
}

Tensor Loader::allocate(const Shape& sizes, DType dt) const {
  return opts_.pin_memory ? Tensor::empty_pinned(sizes, dt) : Tensor::empty(sizes, dt);
}

Batch Loader::build(const Plan& plan, int64_t b) const {
  const int64_t n = static_cast<int64_t>(plan.order.size());
  const int64_t start = b * opts_.batch_size;
  const int64_t count = std::min(opts_.batch_size, n - start);
  const Shape in_shape = dataset_->image_shape();
  const int64_t in_numel = in_shape.numel(), out_numel = image_shape_.numel();
  const bool multi_label = dataset_->target_dtype() == DType::f32;
  const int64_t k = multi_label ? dataset_->target_shape()[0] : 1;

  Batch batch;
  batch.epoch = plan.epoch;
  batch.index = b;
  batch.images = allocate(Shape{count, image_shape_[0], image_shape_[1], image_shape_[2]}, DType::f32);
  batch.targets = multi_label ? allocate(Shape{count, k}, DType::f32) : allocate(Shape{count}, DType::i64);
  batch.indices.assign(plan.order.begin() + start, plan.order.begin() + start + count);

  // Per-thread buffers: workers are long-lived, so these are allocated once each.
  thread_local std::vector<uint8_t> raw;
  thread_local std::vector<float> img, scratch;
  raw.resize(static_cast<size_t>(in_numel));
  float* out = batch.images.data<float>();
  char* tgt = static_cast<char*>(batch.targets.data_ptr());
  const size_t tgt_bytes = static_cast<size_t>(k) * dtype_size(batch.targets.dtype());
  for (int64_t r = 0; r < count; ++r) {
    const int64_t idx = batch.indices[r];
    // One generator per sample, for the dataset's random reading and then the transforms.
    std::mt19937_64 rng(mix_seed(opts_.seed ^ kTransformStream, static_cast<uint64_t>(plan.epoch),
                                 static_cast<uint64_t>(idx)));
    const auto t0 = Clock::now();
    dataset_->read_random(idx, raw.data(), tgt + r * tgt_bytes, rng);
    const auto t1 = Clock::now();
    batch.read_seconds += std::chrono::duration<double>(t1 - t0).count();
    img.resize(static_cast<size_t>(in_numel));
    for (int64_t j = 0; j < in_numel; ++j) img[j] = static_cast<float>(raw[j]) / 255.0f;
    Shape chw = in_shape;
    if (!opts_.transforms.empty()) apply_transforms(opts_.transforms, img, chw, rng, scratch);
    STRATA_CHECK(chw == image_shape_, "Loader(", dataset_->name(), "): item ", idx, " transformed to ", chw.str(),
                 " but batches hold ", image_shape_.str());
    std::memcpy(out + r * out_numel, img.data(), sizeof(float) * static_cast<size_t>(out_numel));
    batch.transform_seconds += seconds_since(t1);
  }
  return batch;
}

void Loader::worker_loop() {
  std::unique_lock lk(mu_);
  while (true) {
    work_cv_.wait(lk, [&] {
      return stop_ || (plan_ && next_claim_ < plan_->num_batches && next_claim_ < next_consume_ + capacity_);
    });
    if (stop_) return;
    std::shared_ptr<const Plan> plan = plan_;
    const int64_t b = next_claim_++;
    lk.unlock();
    Slot slot;
    try {
      slot.batch = build(*plan, b);
    } catch (...) {
      slot.error = std::current_exception();
    }
    lk.lock();
    if (plan_ == plan) {  // else a new epoch started meanwhile: drop it
      ready_.emplace(b, std::move(slot));
      ready_cv_.notify_all();
    } else {
      lk.unlock();
      slot = Slot{};
      lk.lock();
    }
  }
}

std::optional<Batch> Loader::next() {
  if (!plan_) start_epoch(0);
  // plan_ and the counters change only on this (the consumer's) thread, so reading
  // them here without the lock is safe; workers only read them.
  if (next_consume_ >= plan_->num_batches) return std::nullopt;
  const auto t0 = Clock::now();
  Batch batch;
  if (workers_.empty()) {
    const int64_t b = next_consume_++;
    batch = build(*plan_, b);
  } else {
    Slot slot;
    {
      std::unique_lock lk(mu_);
      ready_cv_.wait(lk, [&] { return ready_.count(next_consume_) != 0; });
      auto it = ready_.find(next_consume_);
      slot = std::move(it->second);
      ready_.erase(it);
      ++next_consume_;
    }
    work_cv_.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    batch = std::move(*slot.batch);
  }
  batch.wait_seconds = seconds_since(t0);
  stats_.wait_seconds += batch.wait_seconds;
  stats_.read_seconds += batch.read_seconds;
  stats_.transform_seconds += batch.transform_seconds;
  ++stats_.batches;
  return batch;
}

}  // namespace strata::data
