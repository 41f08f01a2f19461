#pragma once
// Backends register themselves by name at start-up. The registry answers "which
// backends exist (for this device)" and "give me backend X"; asking for one that was
// not built, or that was built but cannot run here (no GPU), is a clear error.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/api/backend.h"
#include "core/error.h"

namespace strata::backends {

class Registry {
 public:
  void add(std::unique_ptr<Backend> b);
  // A backend that was compiled in but cannot run on this machine, and why.
  void add_unavailable(std::string name, std::string reason);

  Backend& get(std::string_view name) const;
  Backend* find(std::string_view name) const;
  std::vector<std::string> names() const;  // available ones, in registration order
  std::vector<Backend*> for_device(DeviceType t) const;
  std::string describe() const;  // "reference, null, onednn; unavailable: cuda (no GPU)"
  // The backend to use when the user names none: the first of cuda, onednn,
  // openblas, reference that is built and can run here (of `device`'s type when
  // given). The null backend, which computes nothing, is never chosen.
  std::string_view best(std::optional<DeviceType> device = std::nullopt) const;

  // The concrete backend object behind `name`, for static and direct dispatch.
  template <BackendImpl Impl>
  Impl& impl() const {
    auto* a = dynamic_cast<BackendAdapter<Impl>*>(&get(Impl::kName));
    STRATA_CHECK(a != nullptr, "registry: backend '", Impl::kName, "' is not of the requested type");
    return a->impl();
  }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::pair<std::string, std::string>> unavailable_;
};

// The process-wide registry, holding every backend this build has compiled in.
Registry& registry();

}  // namespace strata::backends
