#pragma once
// The backend contract, generated from the op table: one pure virtual function
// per op, all with the signature `void op(const Args&)`.
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "strata/backends/api/capabilities.h"
#include "strata/core/device.h"
#include "strata/core/dtype.h"
#include "strata/core/error.h"
#include "strata/core/memory_format.h"
#include "strata/ops/table/op_args.h"
#include "strata/ops/table/op_id.h"

namespace strata::backends {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual DeviceType device_type() const = 0;
  // What the backend runs (its table, written once in its register.cpp).
  virtual const Capabilities& capabilities() const = 0;
  // Whether `op` runs for inputs of dtype `dt`; the front end asks before dispatch.
  bool supports(ops::OpId op, DType dt) const { return capabilities().supports(op, dt); }
  // The library, its version and settings, for logs ("" when there is nothing to say).
  virtual std::string describe() const = 0;
  // TF32 for f32 convolutions and matrix products; an error on a backend without it.
  virtual void set_allow_tf32(bool on) = 0;
  // The layout a network's 4-D activations and convolution weights run fastest in here when
  // computing in `compute` under the backend's current settings; a model built without a
  // layout of its own takes it (nn::ModelOptions::memory_format).
  virtual MemoryFormat preferred_memory_format(DType compute) const = 0;
  // Waits for queued work (a no-op on synchronous CPU backends).
  virtual void synchronize() = 0;
#define STRATA_OP(name, Args, kind) virtual void name(const ops::Args& args) = 0;
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

// What a backend class must provide to be used statically (template parameter)
// and, through BackendAdapter, virtually: the very same member functions.
template <class B>
concept BackendImpl = requires(B& b, const B& cb) {
  { B::kName } -> std::convertible_to<std::string_view>;
  { B::kDevice } -> std::convertible_to<DeviceType>;
  { cb.capabilities() } -> std::convertible_to<const Capabilities&>;
  b.synchronize();
#define STRATA_OP(name, Args, kind) b.name(std::declval<const ops::Args&>());
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
};

// A backend class's preferred_memory_format, or NCHW for one that states no preference.
template <BackendImpl Impl>
MemoryFormat preferred_memory_format(const Impl& b, DType compute) {
  if constexpr (requires { b.preferred_memory_format(compute); })
    return b.preferred_memory_format(compute);
  else
    return MemoryFormat::contiguous;
}

// The thin virtual adapter the registry holds over each backend class. Virtual and
// static dispatch therefore run the very same function bodies.
template <BackendImpl Impl>
class BackendAdapter final : public Backend {
 public:
  template <class... A>
  explicit BackendAdapter(A&&... a) : impl_(std::forward<A>(a)...) {}
  std::string_view name() const override { return Impl::kName; }
  DeviceType device_type() const override { return Impl::kDevice; }
  const Capabilities& capabilities() const override { return impl_.capabilities(); }
  std::string describe() const override {
    if constexpr (requires { impl_.describe(); })
      return impl_.describe();
    else
      return {};
  }
  void set_allow_tf32(bool on) override {
    if constexpr (requires { impl_.set_allow_tf32(on); })
      impl_.set_allow_tf32(on);
    else
      STRATA_CHECK(!on, "backend '", Impl::kName, "' has no TF32 mode (TF32 is a cuda backend setting)");
  }
  MemoryFormat preferred_memory_format(DType compute) const override {
    return backends::preferred_memory_format(impl_, compute);
  }
  void synchronize() override { impl_.synchronize(); }
#define STRATA_OP(name, Args, kind) \
  void name(const ops::Args& args) override { impl_.name(args); }
#include "strata/ops/table/op_table.def"
#undef STRATA_OP
  Impl& impl() { return impl_; }

 private:
  Impl impl_;
};

// What each backend library exports: its factory, `make_backend_<name>()`. A
// backend that is compiled in but cannot run here (no GPU) returns no backend and
// the reason instead; the registry reports it.
struct BackendFactoryResult {
  std::unique_ptr<Backend> backend;
  std::string unavailable_reason;
};

}  // namespace strata::backends
