#include "strata/dist/data_parallel.h"

#include "strata/core/error.h"

namespace strata::dist {

namespace {
bool dense(const Tensor& t) { return t.is_contiguous() || t.is_channels_last(); }
}  // namespace

DataParallel::DataParallel(nn::Model& model, ProcessGroup& pg, const DataParallelOptions& o)
    : model_(model), pg_(pg), o_(o), params_(model.module().named_parameters()) {
  STRATA_CHECK(model_.device().is_cuda(), "DataParallel: the model must be on a CUDA device (NCCL), it is on ",
               model_.device().str(), " (backend ", model_.backend_name(), ")");
  STRATA_CHECK(!params_.empty(), "DataParallel: the model has no parameters");
  dtype_ = params_.front().second.dtype();
  std::vector<size_t> bytes;
  for (const auto& [name, p] : params_) {
    STRATA_CHECK(p.dtype() == dtype_, "DataParallel: parameter ", name, " is ", dtype_name(p.dtype()), " but ",
                 params_.front().first, " is ", dtype_name(dtype_), ": one dtype for all parameters");
    bytes.push_back(p.nbytes());
  }
  STRATA_CHECK(dtype_ == DType::f32 || dtype_ == DType::f64, "DataParallel: parameters are ", dtype_name(dtype_),
               "; gradients are averaged in f32 or f64 (train half precision as mixed precision: f32 parameters "
               "with --precision bf16/fp16)");

  // Rank 0's weights everywhere. Host buffers (batch norm's step counter) are the same
  // on every rank by construction: each rank runs the same steps.
  std::vector<Tensor> state;
  for (const auto& [name, t] : model_.state_dict())
    if (t.device().is_cuda()) state.push_back(t);
  pg_.broadcast(state);

  for (auto& ids : plan_buckets(bytes, o_.bucket_bytes)) {
    Bucket b;
    for (size_t i : ids) b.count += static_cast<size_t>(params_[i].second.numel());
    if (ids.size() > 1) b.staging = Tensor::empty(Shape{static_cast<int64_t>(b.count)}, dtype_, model_.device());
    b.params = std::move(ids);
    buckets_.push_back(std::move(b));
  }
  model_.set_gradient_hook([this] { average_gradients(); });
}

DataParallel::~DataParallel() { model_.set_gradient_hook({}); }

void DataParallel::average_gradients() {
  if (pg_.world() == 1) return;
  ++steps_;
  std::vector<Tensor> grads(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    grads[i] = params_[i].second.grad();
    STRATA_CHECK(grads[i].defined(), "DataParallel: parameter ", params_[i].first,
                 " has no gradient after backward; every parameter must take part in the loss on every rank");
    STRATA_CHECK(grads[i].dtype() == dtype_ && dense(grads[i]) && grads[i].numel() == params_[i].second.numel(),
                 "DataParallel: the gradient of ", params_[i].first, " is ", dtype_name(grads[i].dtype()),
                 grads[i].sizes().str(), " with strides ", grads[i].strides().str(), "; expected a dense ",
                 dtype_name(dtype_), params_[i].second.sizes().str());
  }
  pg_.begin();
  for (const Bucket& b : buckets_) {
    if (!b.staging.defined()) {
      const Tensor& g = grads[b.params.front()];
      pg_.all_reduce_mean(g.data_ptr(), b.count, dtype_);
      continue;
    }
    char* base = static_cast<char*>(b.staging.data_ptr());
    size_t off = 0;
    for (size_t i : b.params) {
      pg_.copy(base + off, grads[i].data_ptr(), grads[i].nbytes());
      off += grads[i].nbytes();
    }
    pg_.all_reduce_mean(base, b.count, dtype_);
    off = 0;
    for (size_t i : b.params) {
      pg_.copy(grads[i].data_ptr(), base + off, grads[i].nbytes());
      off += grads[i].nbytes();
    }
  }
  const std::string what = "all-reduce of the gradients of step " + std::to_string(steps_);
  pg_.end(what.c_str());
}

std::string DataParallel::describe() const {
  return std::to_string(pg_.world()) + " ranks, " + nn::group_thousands(model_.num_parameters()) +
         " parameters in " + std::to_string(buckets_.size()) + " gradient buckets of <= " +
         std::to_string(o_.bucket_bytes / (1024 * 1024)) + " MiB (" + std::string(dtype_name(dtype_)) +
         "), NCCL all-reduce (average)";
}

}  // namespace strata::dist
