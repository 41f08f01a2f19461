#pragma once
// Whether ops record the tape. Thread-local, on by default; NoGradGuard turns it
// off for a scope (inference, optimizer steps).
namespace strata::autograd {

class GradMode {
 public:
  static bool enabled();
  static void set_enabled(bool on);
};

class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace strata::autograd
