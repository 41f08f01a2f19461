#pragma once
// Tensor: a cheap, refcounted handle to sizes, strides, an element offset, a dtype,
// a device and a Storage. Copies of a handle share everything (like torch.Tensor);
// views share the storage but have their own sizes/strides.
// NCHW vs NHWC is a matter of strides: a channels-last tensor still reports its
// sizes as [N,C,H,W].
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/dtype.h"
#include "strata/core/device.h"
#include "strata/core/error.h"
#include "strata/core/memory_format.h"
#include "strata/core/shape.h"
#include "strata/core/storage.h"

namespace strata {

namespace autograd {
class Node;
}

class Tensor;

// The dims a reduction runs over: one (`x.sum(1)`), a list (`x.sum({0, 2})`) or, left
// empty, every dim. Negative dims count from the end, as in PyTorch.
class Dims {
 public:
  Dims() = default;
  Dims(int d) { dims_.push_back(d); }  // NOLINT: x.sum(1) reads as LibTorch's
  Dims(std::initializer_list<int> ds) : dims_(ds) {}
  Dims(std::vector<int> ds) : dims_(std::move(ds)) {}  // NOLINT
  const std::vector<int>& list() const { return dims_; }
  bool all() const { return dims_.empty(); }

 private:
  std::vector<int> dims_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes, strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  Device device;
  // Autograd state lives here so that every handle to a tensor sees the same grad.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  // Where this parameter's gradient is to live (a view of a data-parallel gradient
  // bucket, dist/grad_buckets.h), or null: direct mode's plans write it there
  // (ops/direct/step_memory.h's planned_grad), so no copy moves it into the bucket.
  std::shared_ptr<TensorImpl> grad_home;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialised memory from the device's allocator.
  static Tensor empty(const Shape& sizes, DType dt = DType::f32, Device d = Device::cpu(),
                      MemoryFormat fmt = MemoryFormat::contiguous);
  // Host memory from pinned_host_allocator() (page-locked once a GPU backend installs
  // one): what a device copies from by DMA, after the copy call returns.
  static Tensor empty_pinned(const Shape& sizes, DType dt = DType::f32, MemoryFormat fmt = MemoryFormat::contiguous);
  // An output "like x": x's device, the format x suggests (rank 4 to rank 4 only),
  // the given sizes and dtype (x's by default).
  static Tensor empty_like(const Tensor& x, const Shape& sizes, DType dt);
  static Tensor empty_like(const Tensor& x, const Shape& sizes);
  // The memory format empty_like gives an output of `sizes` made like x.
  static MemoryFormat format_like(const Tensor& x, const Shape& sizes);
  // Tensor::empty placed at `byte_offset` in a storage that exists (direct mode's step
  // arenas, ops/direct/step_memory.h), on the storage's device; it must fit, aligned to dt.
  static Tensor in_storage(std::shared_ptr<Storage> storage, int64_t byte_offset, const Shape& sizes, DType dt,
                           MemoryFormat fmt = MemoryFormat::contiguous);
  // A view over memory the caller owns and keeps alive.
  static Tensor borrow(void* data, const Shape& sizes, DType dt, Device d = Device::cpu());
  // A CPU tensor holding a copy of `values` (count must equal sizes.numel()).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& sizes);

  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& strides() const { return impl().strides; }
  int64_t size(int dim) const;
  int dim() const { return impl().sizes.size(); }
  int64_t numel() const { return impl().sizes.numel(); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  std::string str() const;  // "f32[8,3,32,32] on cpu"

  void* data_ptr() const;
  // In-place writes: copy_into, the ops' in-place forms (fill_, axpy_, the optimizer steps)
  // and Model::train_step report theirs here; a write through data() or data_ptr() must be
  // reported by hand. Copies derived from a tensor (Conv2d's folded weights) compare
  // version() with the one they were made from. Per storage: a write to any view counts.
  uint64_t version() const;
  void note_write() const;
  // What a copy derived from this tensor is made from: its memory and its version. While the
  // stamp stays the same, nothing reported a write and no set_data moved it (an undefined
  // tensor's stamp is {}).
  struct Stamp {
    const void* data = nullptr;
    uint64_t version = 0;
    bool operator==(const Stamp&) const = default;
  };
  Stamp stamp() const;
  template <class T>
  T* data() const {
    STRATA_CHECK(dtype_of<T>::value == dtype(), "Tensor::data: asked for ", dtype_name(dtype_of<T>::value),
                 " but tensor is ", str());
    return static_cast<T*>(data_ptr());
  }

  bool is_contiguous() const;
  bool is_channels_last() const;  // rank 4, strides of channels_last_strides(sizes)
  bool is_non_overlapping_dense() const;
  // The format an output computed from this tensor takes: channels_last when this is
  // channels-last and not also contiguous (C == 1 or H == W == 1 are both), else
  // contiguous. Every op and layer that allocates "like x" goes through it.
  MemoryFormat suggested_format() const;

  // Views (share storage).
  Tensor view(const Shape& sizes) const;  // needs a contiguous tensor; one -1 allowed
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const;
  Tensor permute(const std::vector<int>& dims) const;
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  // A new handle to the same data with no autograd state. Nodes save outputs this
  // way: saving the output handle itself would make a cycle (output -> node -> output).
  Tensor detach() const { return as_strided(sizes(), strides(), offset()); }

  // A tensor in the requested memory format: `*this` if it already is, else a copy.
  Tensor contiguous(MemoryFormat fmt = MemoryFormat::contiguous) const;
  Tensor clone(MemoryFormat fmt = MemoryFormat::contiguous) const;

  // Host access for tests and I/O: copies out as the requested type (CPU tensors;
  // other devices go through their backend's copy first).
  template <class T>
  std::vector<T> to_vector() const;
  double item() const;

  // ---- The tensor API, in LibTorch's names. Each call is recorded on the tape when an input
  // requires grad, and runs on the default dispatcher: the best backend of the tensor's
  // device, chosen once (autograd/default_dispatch.h). The explicit-dispatcher free functions
  // of ops/ and autograd/ stay the measured paths. Defined by the autograd layer
  // (autograd/tensor_methods.cpp). view(), as_strided(), permute() and narrow() above are
  // storage views the tape does not see; the views below (reshape ... slice) are recorded.
  Tensor reshape(const Shape& sizes) const;  // a view when the strides allow, else a copy
  Tensor flatten(int start_dim = 0, int end_dim = -1) const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor t() const;  // rank <= 2: transpose(0, 1)
  Tensor permuted(const std::vector<int>& dims) const;  // permute, recorded
  Tensor unsqueeze(int dim) const;
  Tensor squeeze(int dim) const;
  Tensor squeeze() const;  // every size-1 dim
  Tensor expand(const Shape& sizes) const;  // -1 keeps a dim; stride 0 on the broadcast ones
  Tensor slice(int dim, int64_t start, int64_t end, int64_t step = 1) const;  // end clamps; negatives count back
  Tensor select(int dim, int64_t index) const;  // the dim removed
  Tensor index_select(int dim, const Tensor& index) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;   // 2-D only
  Tensor bmm(const Tensor& other) const;  // 3-D only, equal batches
  Tensor sum(Dims dims = {}, bool keepdim = false) const;
  Tensor mean(Dims dims = {}, bool keepdim = false) const;
  Tensor amax(Dims dims = {}, bool keepdim = false) const;  // gradient split evenly among ties
  Tensor amin(Dims dims = {}, bool keepdim = false) const;
  Tensor max(Dims dims = {}, bool keepdim = false) const { return amax(std::move(dims), keepdim); }
  Tensor min(Dims dims = {}, bool keepdim = false) const { return amin(std::move(dims), keepdim); }
  Tensor var(Dims dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor argmax(int dim, bool keepdim = false) const;  // i64
  Tensor argmax() const;                               // of the flattened tensor
  Tensor argmin(int dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor softmax(int dim) const;
  Tensor log_softmax(int dim) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(double min, double max) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;  // u8 0/1, no gradient
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor to(DType dt) const;   // a copy in dtype dt (this tensor when it already is); recorded
  Tensor to(Device d) const;   // a copy on device d (this tensor when it already is there)
  Tensor to(MemoryFormat fmt) const;
  // Reverse-mode pass from this tensor (one element unless grad is given) into the .grad() of
  // the leaves. retain_graph keeps the saved tensors for a second pass.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool r);
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& g) { impl().grad = g.impl_; }
  // Every handle to this tensor now sees src's memory and strides (PyTorch's set_data):
  // a module re-lays its parameters out (channels-last) without its layers' handles
  // going stale. Same sizes, dtype and device; the autograd state stays.
  void set_data(const Tensor& src);
  Tensor grad_home() const { return Tensor(impl().grad_home); }
  void set_grad_home(const Tensor& h) { impl().grad_home = h.impl_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  bool is_leaf() const { return impl().grad_fn == nullptr; }

  TensorImpl& impl() const {
    STRATA_CHECK(impl_ != nullptr, "Tensor: use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// The tensor API's free functions and operators (defined with the methods above): the
// element-wise ones broadcast with NumPy's rules; a scalar operand is a rank-0 tensor of the
// other's dtype and device.
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);  // u8, as Tensor::eq
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
Tensor& operator+=(Tensor& a, const Tensor& b);  // a = a + b: a new tensor, as x = x + y reads
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond u8 (nonzero: a)
Tensor cat(const std::vector<Tensor>& xs, int dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int dim = 0);  // the last may be shorter
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int dim = 0);

// Copies src into dst elementwise (same sizes; any strides; any dtypes). The CPU
// implementation lives in core; a GPU backend installs one for its device.
void copy_into(const Tensor& src, const Tensor& dst);
using CopyHook = void (*)(const Tensor& src, const Tensor& dst);
void set_device_copy_hook(DeviceType t, CopyHook fn);

}  // namespace strata
