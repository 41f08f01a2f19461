#include "strata/ops/direct/step_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "strata/core/error.h"
#include "strata/ops/direct/arena_observer.h"
#include "strata/ops/direct/arena_plan.h"
#include "strata/ops/direct/graph_capture.h"

namespace strata::ops::direct {

namespace detail {

constinit thread_local Recording* t_recording = nullptr;
constinit thread_local const CaptureCheck* t_capture = nullptr;  // graph_capture.h
constinit thread_local Assignment* t_assignment = nullptr;
constinit std::atomic<int> g_passes{0};
constinit thread_local ArenaObserver* t_arena_observer = nullptr;  // arena_observer.h

namespace {

// Address space without memory behind it: a recording's placeholder buffers. Distinct
// from every real allocation (host memory and, under CUDA's unified addressing, device
// memory), so a kernel argument's address says which buffer it is; any access faults.
class ReservedAddresses final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = mmap(nullptr, std::max<size_t>(bytes, 1), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    STRATA_CHECK(p != MAP_FAILED, "direct mode memory plan: could not reserve ", bytes,
                 " bytes of address space for a placeholder buffer");
    return p;
  }
  void deallocate(void* p, size_t bytes) override { munmap(p, std::max<size_t>(bytes, 1)); }
  AllocatorStats stats() const override { return {}; }
  void reset_peak() override {}
};

ReservedAddresses& reserved_addresses() {
  static ReservedAddresses a;
  return a;
}

}  // namespace

struct Recording {
  struct Buffer {
    uintptr_t begin = 0, end = 0;
    int64_t planned_at = 0;  // the position of the next kernel call when it was planned
    int64_t first = kUnused, last = -1;  // the kernel calls that touch it
    static constexpr int64_t kUnused = INT64_MAX;
    bool to_end = false;  // Lifetime::to_step_end
  };
  std::vector<Buffer> buffers;                    // in the order the plans asked for them
  std::map<uintptr_t, size_t> by_begin;           // begin address -> index in buffers
  std::vector<std::shared_ptr<Storage>> storage;  // placeholders, alive to the end
  std::vector<std::function<void()>> undo;
  int64_t position = 0;

  void use(const void* data) {
    const auto a = reinterpret_cast<uintptr_t>(data);
    auto it = by_begin.upper_bound(a);
    if (it == by_begin.begin()) return;
    Buffer& b = buffers[std::prev(it)->second];
    if (a >= b.end) return;  // an address of no planned buffer (a parameter, a model input)
    b.first = std::min(b.first, position);
    b.last = std::max(b.last, position);
  }
};

struct Assignment {
  std::shared_ptr<Storage> arena;
  const std::vector<int64_t>* offsets = nullptr;
  const std::vector<int64_t>* bytes = nullptr;
  size_t next = 0;
};

void note_use(const void* data) {
  if (t_recording) t_recording->use(data);
}
void next_position() {
  if (t_recording) ++t_recording->position;
}

}  // namespace detail

Tensor detail::planned_empty_in_pass(const Shape& sizes, DType dt, Device d, MemoryFormat fmt, int life_value) {
  using detail::t_assignment;
  using detail::t_recording;
  const auto life = static_cast<Lifetime>(life_value);
  if (!t_recording && !t_assignment) return Tensor::empty(sizes, dt, d, fmt);  // another thread's pass
  const int64_t bytes = sizes.numel() * static_cast<int64_t>(dtype_size(dt));
  if (t_recording) {
    auto storage = std::make_shared<Storage>(static_cast<size_t>(bytes), d, detail::reserved_addresses());
    const auto begin = reinterpret_cast<uintptr_t>(storage->data());
    const int64_t at = t_recording->position;
    t_recording->by_begin[begin] = t_recording->buffers.size();
    detail::Recording::Buffer b;
    b.begin = begin;
    b.end = begin + static_cast<uintptr_t>(bytes);
    b.planned_at = at;
    b.to_end = life == Lifetime::to_step_end;
    t_recording->buffers.push_back(b);
    t_recording->storage.push_back(storage);
    return Tensor::in_storage(std::move(storage), 0, sizes, dt, fmt);
  }
  detail::Assignment& as = *t_assignment;
  const size_t i = as.next++;
  STRATA_CHECK(i < as.offsets->size() && (*as.bytes)[i] == bytes, "direct mode memory plan: the step asked for buffer ",
               i, " (", bytes, " bytes) where its recording ",
               i < as.offsets->size() ? "planned " + std::to_string((*as.bytes)[i]) + " bytes"
                                      : "planned only " + std::to_string(as.offsets->size()) + " buffers",
               "; a step must make the same plans each time it runs (internal error)");
  return Tensor::in_storage(as.arena, (*as.offsets)[i], sizes, dt, fmt);
}


Tensor planned_grad(const Tensor& param, const Shape& sizes, DType dt) {
  STRATA_CHECK(param.defined(), "planned_grad: the parameter is undefined (internal error)");
  // In the parameter's layout (a channels-last convolution's weight gradient stages nothing).
  const MemoryFormat fmt = Tensor::format_like(param, sizes);
  const Tensor home = param.grad_home();
  if (home.defined() && home.sizes() == sizes && home.dtype() == dt && home.device() == param.device() &&
      (fmt == MemoryFormat::channels_last ? home.is_channels_last() : home.is_contiguous()))
    return home;
  return planned_empty(sizes, dt, param.device(), fmt, Lifetime::to_step_end);
}

bool planned_in_step(const Tensor& t) {
  if (!t.defined()) return false;
  const Storage* s = t.impl().storage.get();
  if (detail::t_recording)
    return std::any_of(detail::t_recording->storage.begin(), detail::t_recording->storage.end(),
                       [&](const auto& p) { return p.get() == s; });
  return detail::t_assignment && detail::t_assignment->arena.get() == s;
}

int64_t buffer_alignment(DeviceType t) { return t == DeviceType::cpu ? 64 : 16; }

void on_recording_end(std::function<void()> undo) {
  STRATA_CHECK(detail::t_recording != nullptr, "on_recording_end: no recording pass is running");
  detail::t_recording->undo.push_back(std::move(undo));
}

ScopedArenaObserver::ScopedArenaObserver(ArenaObserver* o) : saved_(detail::t_arena_observer) {
  detail::t_arena_observer = o;
}
ScopedArenaObserver::~ScopedArenaObserver() { detail::t_arena_observer = saved_; }

StepMemory::StepMemory() = default;
StepMemory::~StepMemory() = default;

StepMemory::RecordingPass::RecordingPass(StepMemory& m) : m_(m), rec_(std::make_unique<detail::Recording>()) {
  STRATA_CHECK(!detail::t_recording && !detail::t_assignment,
               "direct mode memory plan: a planned step started inside another");
  detail::t_recording = rec_.get();
  detail::g_passes.fetch_add(1, std::memory_order_relaxed);
}

StepMemory::RecordingPass::~RecordingPass() {
  detail::t_recording = nullptr;
  detail::g_passes.fetch_sub(1, std::memory_order_relaxed);
  // Plans made against placeholders go before the placeholders do.
  for (auto& undo : rec_->undo) undo();
}

void StepMemory::RecordingPass::keep(const Tensor& t) {
  if (t.defined()) rec_->use(t.data_ptr());
}

void StepMemory::RecordingPass::lay_out(Device d) {
  std::vector<BufferLifetime> lifetimes;
  lifetimes.reserve(rec_->buffers.size());
  int64_t sum = 0;
  for (const auto& b : rec_->buffers) {
    // A buffer lives from the first kernel call that touches it, not from when it was
    // planned (a plan makes its gradient buffers before the calls that write them); one
    // that no call touches holds its place at the position it was planned.
    const bool used = b.first != detail::Recording::Buffer::kUnused;
    const int64_t first = used ? b.first : b.planned_at;
    const int64_t last = b.to_end ? std::max(rec_->position, first) : (used ? b.last : first);
    lifetimes.push_back({static_cast<int64_t>(b.end - b.begin), first, last});
    sum += static_cast<int64_t>(b.end - b.begin);
  }
  const ArenaPlan plan = plan_arena(lifetimes, buffer_alignment(d.type));
  m_.offsets_ = plan.offsets;
  m_.bytes_.clear();
  for (const auto& l : lifetimes) m_.bytes_.push_back(l.bytes);
  m_.arena_bytes_ = plan.arena_bytes;
  // A step whose plans all exist already (eval after training at the same shape) plans nothing.
  if (!lifetimes.empty()) m_.last_ = {static_cast<int64_t>(lifetimes.size()), plan.arena_bytes, sum, plan.lower_bound};
}

StepMemory::AssignmentPass::AssignmentPass(StepMemory& m, Device d)
    : m_(m), as_(std::make_unique<detail::Assignment>()) {
  STRATA_CHECK(!detail::t_recording && !detail::t_assignment,
               "direct mode memory plan: a planned step started inside another");
  if (m.arena_bytes_ > 0) {
    as_->arena = std::make_shared<Storage>(static_cast<size_t>(m.arena_bytes_), d, allocator_for(d));
    std::erase_if(m.arenas_, [](const auto& a) { return a.second.expired(); });
    m.arenas_.emplace_back(as_->arena.get(), as_->arena);
    if (detail::t_arena_observer)
      detail::t_arena_observer->on_arena({as_->arena->data(), m.arena_bytes_, m.offsets_, m.bytes_});
  }
  as_->offsets = &m.offsets_;
  as_->bytes = &m.bytes_;
  detail::t_assignment = as_.get();
  detail::g_passes.fetch_add(1, std::memory_order_relaxed);
}

StepMemory::AssignmentPass::~AssignmentPass() {
  detail::t_assignment = nullptr;
  detail::g_passes.fetch_sub(1, std::memory_order_relaxed);
}

void StepMemory::AssignmentPass::finish() {
  STRATA_CHECK(as_->next == m_.offsets_.size(), "direct mode memory plan: the step asked for ", as_->next,
               " buffers where its recording planned ", m_.offsets_.size(),
               "; a step must make the same plans each time it runs (internal error)");
}

bool StepMemory::holds(const Tensor& t) const {
  if (!t.defined()) return false;
  const Storage* s = t.impl().storage.get();
  return std::any_of(arenas_.begin(), arenas_.end(),
                     [&](const auto& a) { return a.first == s && !a.second.expired(); });
}

bool StepMemory::known(const std::string& key) const {
  return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
}

void StepMemory::remember(const std::string& key) {
  // Bounded like the layers' plan caches; a forgotten key is recorded again, and a
  // recording whose plans all exist plans nothing.
  constexpr size_t kKeys = 16;
  keys_.insert(keys_.begin(), key);
  if (keys_.size() > kKeys) keys_.pop_back();
}

}  // namespace strata::ops::direct
