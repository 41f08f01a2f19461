#pragma once
// A read-only window on direct mode's memory plan (step_memory.h), for a program that
// writes a planned step out with its buffers where strata put them (codegen/): each arena
// a planned step lays out and allocates on this thread while an observer is installed is
// reported with its base address and every planned buffer's offset and size, in the order
// the step's plans asked for them.
#include <cstdint>
#include <vector>

namespace strata::ops::direct {

struct PlannedArena {
  const void* base = nullptr;
  int64_t bytes = 0;
  std::vector<int64_t> offsets, sizes;  // one per planned buffer
};

class ArenaObserver {
 public:
  virtual ~ArenaObserver() = default;
  virtual void on_arena(const PlannedArena& arena) = 0;
};

// Installs `o` on this thread for the guard's lifetime; the previous one is put back after.
class ScopedArenaObserver {
 public:
  explicit ScopedArenaObserver(ArenaObserver* o);
  ~ScopedArenaObserver();
  ScopedArenaObserver(const ScopedArenaObserver&) = delete;
  ScopedArenaObserver& operator=(const ScopedArenaObserver&) = delete;

 private:
  ArenaObserver* saved_;
};

}  // namespace strata::ops::direct
