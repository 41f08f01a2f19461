#pragma once
// Backends register themselves by name at start-up and are created when first asked for. The registry
// answers "which backends exist (for this device)", "which of them can run here, and why not" and "give me
// backend X"; asking for one that was not built, or that was built but cannot run here (no GPU), is a
// clear error.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/core/error.h"

namespace strata::backends {

class Registry {
 public:
  using Factory = BackendFactoryResult (*)();
  // Why the backend cannot run here ("" when it looks as if it can), found cheaply without creating it:
  // a device backend asks whether there is a device at all. A backend without a probe (the CPU ones,
  // whose factories do not fail) counts as usable until its factory says otherwise.
  using Probe = std::string (*)();

  // A backend created on first use: a program that never asks for it (or for "all of them") never
  // initialises its device or loads its libraries.
  void add_factory(std::string name, DeviceType device, Factory make, Probe probe = nullptr);
  void add(std::unique_ptr<Backend> b);
  // A backend that was compiled in but cannot run on this machine, and why.
  void add_unavailable(std::string name, std::string reason);

  // These create the backend if needed (initialising its device on first use).
  Backend& get(std::string_view name) const;
  Backend* find(std::string_view name) const;
  std::vector<std::string> names() const;  // available ones, in registration order; creates every backend
  std::vector<Backend*> for_device(DeviceType t) const;  // creates the backends of that device type
  // Creates and probes nothing: "built: reference, null, onednn, cuda", plus "; unavailable here: cuda
  // (why)" for those already found unusable.
  std::string describe() const;
  // Creates nothing but probes those not tried yet (cuda: the driver's device count, which maps the
  // driver library but creates no context and loads neither cuDNN nor cuBLAS): "built: reference, null,
  // onednn, cuda; usable here: reference, null, onednn; unavailable here: cuda (no usable CUDA device
  // (...))", without the last part when all are usable. A probe that passes does not promise the
  // device initialises: get() says why when it does not.
  std::string describe_usable() const;
  // The backend to use when the user names none: the first of cuda, onednn, openblas, eigen, reference
  // that is built and can run here (of `device`'s type when given; creates those it tries). The null
  // backend, which computes nothing, is never chosen.
  std::string_view best(std::optional<DeviceType> device = std::nullopt) const;

  // The concrete backend object behind `name`, for static and direct dispatch.
  template <BackendImpl Impl>
  Impl& impl() const {
    auto* a = dynamic_cast<BackendAdapter<Impl>*>(&get(Impl::kName));
    STRATA_CHECK(a != nullptr, "registry: backend '", Impl::kName, "' is not of the requested type");
    return a->impl();
  }

 private:
  struct Entry {
    std::string name;
    DeviceType device;
    Factory make = nullptr;            // null once tried
    std::unique_ptr<Backend> backend;  // set when available
    std::string why;                   // set when unavailable
    Probe probe = nullptr;
    std::optional<std::string> probed;  // the probe's answer, asked once
  };
  Entry* entry(std::string_view name) const;
  Backend* open(Entry& e) const;

  mutable std::recursive_mutex mutex_;  // a factory may ask the registry for another backend
  std::vector<std::unique_ptr<Entry>> entries_;
};

// The process-wide registry, holding every backend this build has compiled in.
Registry& registry();

}  // namespace strata::backends
