#pragma once
// Direct mode's per-module plan cache. A module plans its calls at the first
// forward for an input (sizes, strides, dtype, data pointer and a module-specific
// variant such as BatchNorm's training flag) and reuses the plan for every later
// forward with the same input; a new input makes a new plan. Within a network each
// layer's input is the previous layer's planned output, so its pointer is stable and
// every forward after the first is a cache hit.
//
// Each entry keeps its input tensor alive, so a key's data pointer can never be
// reused by another allocation while the entry exists. The cache is small and
// bounded (least recently used entry evicted), ordered, and never rehashes.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/core/tensor.h"

namespace strata::nn {

struct PlanKey {
  Shape sizes, strides;
  DType dtype = DType::f32;
  const void* data = nullptr;
  int64_t variant = 0;

  static PlanKey of(const Tensor& x, int64_t variant = 0) {
    return {x.sizes(), x.strides(), x.dtype(), x.data_ptr(), variant};
  }
  friend bool operator==(const PlanKey& a, const PlanKey& b) {
    return a.sizes == b.sizes && a.strides == b.strides && a.dtype == b.dtype && a.data == b.data &&
           a.variant == b.variant;
  }
};

template <class Entry>
class PlanCache {
 public:
  static constexpr size_t kCapacity = 4;

  // The entry for x (and variant); on a miss, make(entry, x) plans a new one.
  template <class Make>
  Entry& get(const Tensor& x, int64_t variant, Make&& make) {
    const PlanKey key = PlanKey::of(x, variant);
    if (auto it = slot_of(key); it != slots_.end()) {
      std::rotate(slots_.begin(), it, it + 1);
      return slots_.front()->entry;
    }
    auto slot = std::make_unique<Slot>();
    slot->key = key;
    slot->input = x;
    make(slot->entry, x);
    if (slots_.size() == kCapacity) slots_.pop_back();
    slots_.insert(slots_.begin(), std::move(slot));
    ++plans_made_;
    return slots_.front()->entry;
  }
  // The entry for x (and variant), or nullptr; the order is left as it is.
  Entry* find(const Tensor& x, int64_t variant) {
    const auto it = slot_of(PlanKey::of(x, variant));
    return it == slots_.end() ? nullptr : &(*it)->entry;
  }
  size_t size() const { return slots_.size(); }
  int64_t plans_made() const { return plans_made_; }
  void clear() { slots_.clear(); }

 private:
  struct Slot {
    PlanKey key;
    Tensor input;
    Entry entry;
  };
  using Slots = std::vector<std::unique_ptr<Slot>>;
  typename Slots::iterator slot_of(const PlanKey& key) {
    return std::find_if(slots_.begin(), slots_.end(), [&](const auto& s) { return s->key == key; });
  }
  Slots slots_;
  int64_t plans_made_ = 0;
};

}  // namespace strata::nn
