#include "strata/core/tensor.h"

#include <algorithm>
#include <limits>

#include "strata/core/dtype_dispatch.h"

namespace strata {

namespace {

// Byte count of a dense tensor. Element and byte counts must fit int64 (numel() and
// nbytes() are computed without checks everywhere else), so a shape past that is an
// error here rather than a wrapped-around, too small allocation later.
size_t checked_bytes(const char* who, const Shape& sizes, DType dt) {
  for (int64_t s : sizes) STRATA_CHECK(s >= 0, who, ": negative size in ", sizes.str());
  const int64_t n = sizes.checked_numel();
  int64_t bytes = 0;
  STRATA_CHECK(n >= 0 && !__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dt)), &bytes), who, ": size ",
               sizes.str(), " of ", dtype_name(dt), " overflows: the byte count does not fit in 63 bits");
  return static_cast<size_t>(bytes);
}

CopyHook g_cuda_copy = nullptr;

template <class Fn>
void for_each_index(const Shape& sizes, Fn&& fn) {
  const int nd = sizes.size();
  const int64_t n = sizes.numel();
  if (n == 0) return;
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t k = 0; k < n; ++k) {
    fn(idx);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

void cpu_copy(const Tensor& src, const Tensor& dst) {
  const Shape& sizes = src.sizes();
  const int nd = sizes.size();
  visit_dtype(src.dtype(), [&](auto s) {
    using S = decltype(s);
    visit_dtype(dst.dtype(), [&](auto d) {
      using D = decltype(d);
      const S* sp = static_cast<const S*>(src.data_ptr());
      D* dp = static_cast<D*>(dst.data_ptr());
      if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
        std::copy_n(reinterpret_cast<const D*>(sp), src.numel(), dp);
        return;
      }
      for_each_index(sizes, [&](const std::array<int64_t, kMaxDims>& idx) {
        int64_t so = 0, doff = 0;
        for (int i = 0; i < nd; ++i) {
          so += idx[i] * src.strides()[i];
          doff += idx[i] * dst.strides()[i];
        }
        dp[doff] = convert_element<D>(sp[so]);
      });
    });
  });
}

// A tensor of `sizes` in `fmt` at element `offset` of `storage`, which the caller checked it fits.
Tensor placed(std::shared_ptr<Storage> storage, int64_t offset, const Shape& sizes, DType dt, MemoryFormat fmt) {
  auto impl = std::make_shared<TensorImpl>();
  impl->device = storage->device();
  impl->storage = std::move(storage);
  impl->offset = offset;
  impl->sizes = sizes;
  impl->strides = fmt == MemoryFormat::channels_last ? channels_last_strides(sizes) : contiguous_strides(sizes);
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

}  // namespace

Tensor Tensor::empty(const Shape& sizes, DType dt, Device d, MemoryFormat fmt) {
  const size_t bytes = checked_bytes("Tensor::empty", sizes, dt);
  return placed(std::make_shared<Storage>(bytes, d, allocator_for(d)), 0, sizes, dt, fmt);
}

Tensor Tensor::empty_pinned(const Shape& sizes, DType dt, MemoryFormat fmt) {
  const size_t bytes = checked_bytes("Tensor::empty_pinned", sizes, dt);
  return placed(std::make_shared<Storage>(bytes, Device::cpu(), pinned_host_allocator()), 0, sizes, dt, fmt);
}

Tensor Tensor::in_storage(std::shared_ptr<Storage> storage, int64_t byte_offset, const Shape& sizes, DType dt,
                          MemoryFormat fmt) {
  STRATA_CHECK(storage != nullptr, "Tensor::in_storage: no storage");
  const size_t bytes = checked_bytes("Tensor::in_storage", sizes, dt);
  const auto elem = static_cast<int64_t>(dtype_size(dt));
  STRATA_CHECK(byte_offset >= 0 && byte_offset % elem == 0 &&
                   static_cast<size_t>(byte_offset) + bytes <= storage->bytes(),
               "Tensor::in_storage: ", dtype_name(dt), sizes.str(), " at byte ", byte_offset,
               " does not fit, aligned, in a storage of ", storage->bytes(), " bytes");
  return placed(std::move(storage), byte_offset / elem, sizes, dt, fmt);
}

Tensor Tensor::borrow(void* data, const Shape& sizes, DType dt, Device d) {
  return placed(std::make_shared<Storage>(data, checked_bytes("Tensor::borrow", sizes, dt), d), 0, sizes, dt,
                MemoryFormat::contiguous);
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& sizes) {
  STRATA_CHECK(static_cast<int64_t>(values.size()) == sizes.numel(), "Tensor::from_vector: ", values.size(),
               " values for shape ", sizes.str());
  Tensor t = empty(sizes, dtype_of<T>::value);
  std::copy(values.begin(), values.end(), static_cast<T*>(t.data_ptr()));
  return t;
}

int64_t Tensor::size(int dim) const {
  const int nd = this->dim();
  const int d = dim < 0 ? dim + nd : dim;
  STRATA_CHECK(d >= 0 && d < nd, "Tensor::size: dim ", dim, " out of range for ", str());
  return sizes()[d];
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype())) + sizes().str() + " on " + device().str();
}

void* Tensor::data_ptr() const {
  const TensorImpl& t = impl();
  if (!t.storage || !t.storage->data()) return nullptr;
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<int64_t>(dtype_size(t.dtype));
}

uint64_t Tensor::version() const {
  const TensorImpl& t = impl();
  return t.storage ? t.storage->version() : 0;
}

Tensor::Stamp Tensor::stamp() const { return impl_ ? Stamp{data_ptr(), version()} : Stamp{}; }

void Tensor::note_write() const {
  if (impl_ && impl_->storage) impl_->storage->bump_version();
}

bool Tensor::is_contiguous() const { return is_contiguous_layout(sizes(), strides()); }
bool Tensor::is_channels_last() const { return is_channels_last_layout(sizes(), strides()); }

bool Tensor::is_non_overlapping_dense() const { return is_contiguous() || is_channels_last(); }

MemoryFormat Tensor::format_like(const Tensor& x, const Shape& sizes) {
  return x.dim() == 4 && sizes.size() == 4 ? x.suggested_format() : MemoryFormat::contiguous;
}

Tensor Tensor::empty_like(const Tensor& x, const Shape& sizes, DType dt) {
  return empty(sizes, dt, x.device(), format_like(x, sizes));
}
Tensor Tensor::empty_like(const Tensor& x, const Shape& sizes) { return empty_like(x, sizes, x.dtype()); }

void Tensor::set_data(const Tensor& src) {
  STRATA_CHECK(src.sizes() == sizes() && src.dtype() == dtype() && src.device() == device(), "Tensor::set_data: ",
               src.str(), " cannot replace the data of ", str(), " (sizes, dtype and device must agree)");
  TensorImpl& i = impl();
  i.storage = src.impl().storage;
  i.strides = src.impl().strides;
  i.offset = src.impl().offset;
}

MemoryFormat Tensor::suggested_format() const {
  return is_channels_last() && !is_contiguous() ? MemoryFormat::channels_last : MemoryFormat::contiguous;
}

Tensor Tensor::view(const Shape& new_sizes) const {
  STRATA_CHECK(is_contiguous(), "Tensor::view: needs a contiguous tensor, got ", str(),
               " with strides ", strides().str(), " (call contiguous() first)");
  Shape s = new_sizes;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      STRATA_CHECK(infer < 0, "Tensor::view: more than one -1 in ", new_sizes.str());
      infer = i;
    } else {
      STRATA_CHECK(s[i] >= 0 && !__builtin_mul_overflow(known, s[i], &known), "Tensor::view: cannot view ", str(),
                   " as ", new_sizes.str(), " (negative size or element count overflow)");
    }
  }
  if (infer >= 0) {
    STRATA_CHECK(known > 0 && numel() % known == 0, "Tensor::view: cannot view ", str(), " as ", new_sizes.str());
    s[infer] = numel() / known;
  }
  STRATA_CHECK(s.numel() == numel(), "Tensor::view: cannot view ", str(), " as ", new_sizes.str(),
               " (element counts differ)");
  return as_strided(s, contiguous_strides(s), offset());
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t off) const {
  STRATA_CHECK(sizes.size() == strides.size(), "Tensor::as_strided: sizes ", sizes.str(), " and strides ",
               strides.str(), " differ in rank");
  const TensorImpl& t = impl();
  // A view may repeat elements (stride 0), but its element and byte counts must still
  // fit int64, as for Tensor::empty: ops size their outputs from them.
  const int64_t n = sizes.checked_numel();
  int64_t view_bytes = 0;
  STRATA_CHECK(n >= 0 && !__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(t.dtype)), &view_bytes),
               "Tensor::as_strided: size ", sizes.str(), " of ", dtype_name(t.dtype),
               " is negative or overflows: the byte count does not fit in 63 bits");
  // Bounds check: the furthest element must stay inside the storage.
  int64_t last = off;
  bool overflow = false;
  for (int i = 0; i < sizes.size(); ++i) {
    STRATA_CHECK(sizes[i] >= 0 && strides[i] >= 0, "Tensor::as_strided: negative size or stride");
    if (sizes[i] == 0) last = -1;
    int64_t step = 0;
    if (last >= 0)
      overflow |= __builtin_mul_overflow(sizes[i] - 1, strides[i], &step) || __builtin_add_overflow(last, step, &last);
  }
  STRATA_CHECK(!overflow, "Tensor::as_strided: view ", sizes.str(), " strides ", strides.str(), " offset ", off,
               " reaches past any storage (offset overflow)");
  const int64_t cap = t.storage ? static_cast<int64_t>(t.storage->bytes() / dtype_size(t.dtype)) : 0;
  STRATA_CHECK(off >= 0 && last < cap, "Tensor::as_strided: view ", sizes.str(), " strides ", strides.str(),
               " offset ", off, " reaches past the storage of ", cap, " elements");
  auto impl2 = std::make_shared<TensorImpl>();
  impl2->storage = t.storage;
  impl2->sizes = sizes;
  impl2->strides = strides;
  impl2->offset = off;
  impl2->dtype = t.dtype;
  impl2->device = t.device;
  return Tensor(std::move(impl2));
}

Tensor Tensor::permute(const std::vector<int>& dims) const {
  STRATA_CHECK(static_cast<int>(dims.size()) == dim(), "Tensor::permute: ", dims.size(), " dims given for ", str());
  Shape s, st;
  std::array<bool, kMaxDims> seen{};
  for (int d : dims) {
    STRATA_CHECK(d >= 0 && d < dim() && !seen[d], "Tensor::permute: dims are not a permutation for ", str());
    seen[d] = true;
    s.push_back(sizes()[d]);
    st.push_back(strides()[d]);
  }
  return as_strided(s, st, offset());
}

Tensor Tensor::narrow(int d, int64_t start, int64_t length) const {
  STRATA_CHECK(d >= 0 && d < dim(), "Tensor::narrow: dim ", d, " out of range for ", str());
  // Written so that no sum can overflow, whatever start and length are.
  STRATA_CHECK(start >= 0 && length >= 0 && start <= sizes()[d] && length <= sizes()[d] - start,
               "Tensor::narrow: start ", start, " length ", length, " out of bounds for dim ", d, " of ", str());
  Shape s = sizes();
  s[d] = length;
  return as_strided(s, strides(), offset() + start * strides()[d]);
}

Tensor Tensor::contiguous(MemoryFormat fmt) const {
  if (fmt == MemoryFormat::contiguous ? is_contiguous() : is_channels_last()) return *this;
  return clone(fmt);
}

Tensor Tensor::clone(MemoryFormat fmt) const {
  Tensor out = empty(sizes(), dtype(), device(), fmt);
  copy_into(*this, out);
  return out;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> v(static_cast<size_t>(numel()));
  Tensor dst = borrow(v.data(), sizes(), dtype_of<T>::value);
  copy_into(*this, dst);
  return v;
}

double Tensor::item() const {
  STRATA_CHECK(numel() == 1, "Tensor::item: needs one element, got ", str());
  return to_vector<double>()[0];
}

Tensor& Tensor::set_requires_grad(bool r) {
  STRATA_CHECK(!r || is_floating(dtype()), "Tensor::set_requires_grad: only floating tensors can require grad, got ",
               str());
  impl().requires_grad = r;
  return *this;
}

void copy_into(const Tensor& src, const Tensor& dst) {
  STRATA_CHECK(src.sizes() == dst.sizes(), "copy: source ", src.str(), " and destination ", dst.str(),
               " differ in shape");
  dst.note_write();
  if (src.device().is_cpu() && dst.device().is_cpu()) return cpu_copy(src, dst);
  STRATA_CHECK(g_cuda_copy != nullptr, "copy: from ", src.str(), " to ", dst.str(),
               " needs the cuda backend, which is not built or found no GPU");
  g_cuda_copy(src, dst);
}

void set_device_copy_hook(DeviceType t, CopyHook fn) {
  STRATA_CHECK(t == DeviceType::cuda, "set_device_copy_hook: only cuda can install a copy hook");
  g_cuda_copy = fn;
}

#define STRATA_INSTANTIATE(T)                                                        \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, const Shape&); \
  template std::vector<T> Tensor::to_vector<T>() const;
STRATA_INSTANTIATE(float)
STRATA_INSTANTIATE(double)
STRATA_INSTANTIATE(int32_t)
STRATA_INSTANTIATE(int64_t)
STRATA_INSTANTIATE(uint8_t)
#undef STRATA_INSTANTIATE

}  // namespace strata
