#include "strata/dist/grad_buckets.h"

#include <cstring>

#include "strata/core/error.h"
#include "strata/ops/direct/step_memory.h"

namespace strata::dist {

std::optional<DType> exchange_dtype_from_name(const std::string& name, const char* option) {
  if (name.empty()) return std::nullopt;
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  STRATA_FAIL(option, " ", name, ": the gradients cross the links in bf16 or f16 (or, without the option, in the "
              "parameters' dtype)");
}

GradientBuckets::GradientBuckets(nn::Model& model, GradientReducer& reducer, const DataParallelOptions& o)
    : model_(model), reducer_(reducer), o_(o), params_(model.module().named_parameters()) {
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
  exchange_ = o_.exchange_dtype.value_or(dtype_);
  STRATA_CHECK(exchange_ == dtype_ || exchange_ == DType::bf16 || exchange_ == DType::f16,
               "DataParallel: exchange_dtype ", dtype_name(exchange_), " with ", dtype_name(dtype_),
               " parameters; gradients cross the links in the parameters' dtype, bf16 or f16");
  low_ = exchange_ != dtype_;
  const Device dev = model_.device();
  const auto elem = static_cast<int64_t>(dtype_size(dtype_));
  layout_ = lay_out_buckets(bytes, o_.bucket_bytes, static_cast<size_t>(ops::direct::buffer_alignment(dev.type)));
  views_.resize(params_.size());
  bucket_of_.resize(params_.size());
  for (size_t b = 0; b < layout_.size(); ++b) {
    const BucketLayout& l = layout_[b];
    const auto count = static_cast<int64_t>(l.bytes) / elem;
    Bucket bucket;
    bucket.buffer = Tensor::empty(Shape{count}, dtype_, dev);
    // The alignment gaps are averaged too: zeros, not whatever the allocator left there.
    const Tensor zeros = Tensor::empty(Shape{count}, dtype_);
    std::memset(zeros.data_ptr(), 0, l.bytes);
    copy_into(zeros, bucket.buffer);
    if (low_) {
      bucket.low = Tensor::empty(Shape{count}, exchange_, dev);
      copy_into(zeros, bucket.low);
    }
    for (size_t k = 0; k < l.params.size(); ++k) {
      const size_t i = l.params[k];
      const Tensor& p = params_[i].second;
      // In the parameter's layout: a channels-last weight's gradient lands in its bucket as written.
      views_[i] = Tensor::in_storage(bucket.buffer.impl_ptr()->storage, static_cast<int64_t>(l.offsets[k]), p.sizes(),
                                     dtype_, Tensor::format_like(p, p.sizes()));
      bucket_of_[i] = b;
    }
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < params_.size(); ++i) index_[params_[i].second.data_ptr()] = i;
  ready_.assign(params_.size(), false);
  for (size_t b = 0; b < layout_.size(); ++b) buckets_[b].remaining = layout_[b].params.size();

  if (reducer_.world() == 1) return;  // nothing to average: the model trains as it would alone
  active_ = true;
  if (o_.gradient_as_bucket_view)
    for (size_t i = 0; i < params_.size(); ++i) params_[i].second.set_grad_home(views_[i]);
  model_.set_param_ready_hook([this](const Tensor& p) { param_ready(p); });
  model_.set_gradient_hook([this] { average_gradients(); });
}

GradientBuckets::~GradientBuckets() {
  if (!active_) return;
  model_.set_gradient_hook({});
  model_.set_param_ready_hook({});
  for (auto& [name, p] : params_) p.set_grad_home(Tensor());
}

void GradientBuckets::param_ready(const Tensor& p) {
  const auto it = index_.find(p.data_ptr());
  if (it == index_.end()) return;  // not a parameter of this model (an input that required a gradient)
  const size_t i = it->second;
  STRATA_CHECK(!ready_[i], "DataParallel: the gradient of ", params_[i].first,
               " was completed twice before the optimizer's step (several backward passes per step); the buckets "
               "start as gradients complete, so accumulate over several batches on one process only");
  ready_[i] = true;
  --buckets_[bucket_of_[i]].remaining;
  // In bucket order only: every rank must issue the same all-reduces in the same order.
  while (launched_ < buckets_.size() && buckets_[launched_].remaining == 0) {
    launch(launched_++);
    ++early_;
  }
}

void GradientBuckets::launch(size_t b) {
  const BucketLayout& l = layout_[b];
  const bool views = o_.gradient_as_bucket_view;
  std::vector<Tensor> grads;
  for (size_t i : l.params) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    STRATA_CHECK(g.defined(), "DataParallel: parameter ", params_[i].first,
                 " has no gradient after backward; every parameter must take part in the loss on every rank");
    STRATA_CHECK(g.dtype() == dtype_ && g.sizes() == p.sizes() && (g.is_contiguous() || g.is_channels_last()),
                 "DataParallel: the gradient of ", params_[i].first, " is ", dtype_name(g.dtype()), g.sizes().str(),
                 " with strides ", g.strides().str(), "; expected a dense ", dtype_name(dtype_), p.sizes().str());
    // A gradient in another layout than its view (the parameter's) reaches it by an
    // element-wise copy on the model's own stream, before the bucket's work is ordered after it.
    if (views && g.strides() != views_[i].strides()) {
      copy_into(g, views_[i]);
      ++copies_;
      retired_.push_back(g);
      params_[i].second.set_grad(views_[i]);
      g = views_[i];
    }
    grads.push_back(std::move(g));
  }
  if (low_) return launch_low(b, grads);
  reducer_.begin();
  const Tensor& buf = buckets_[b].buffer;
  if (!views && l.params.size() == 1) {  // staging: one gradient is averaged where it is
    const Tensor& g = grads.front();
    reducer_.all_reduce_mean(g.data_ptr(), static_cast<size_t>(g.numel()), dtype_);
    return;
  }
  for (size_t k = 0; k < l.params.size(); ++k) {
    const Tensor& g = grads[k];
    const Tensor& v = views_[l.params[k]];
    if (g.data_ptr() == v.data_ptr()) continue;  // written in place by a direct-mode plan
    reducer_.copy(v.data_ptr(), g.data_ptr(), g.nbytes());
    ++copies_;
    if (views) {
      // The copy reads g on the reducer's stream: g stays alive until end() orders the
      // model's later work (which could reuse its memory) after it.
      retired_.push_back(g);
      params_[l.params[k]].second.set_grad(v);
    }
  }
  reducer_.all_reduce_mean(buf.data_ptr(), static_cast<size_t>(buf.numel()), dtype_);
  if (views) return;
  for (size_t k = 0; k < l.params.size(); ++k) {
    reducer_.copy(grads[k].data_ptr(), views_[l.params[k]].data_ptr(), grads[k].nbytes());
    ++copies_;
  }
}

// The half-precision exchange: the gradients reach the bucket and its narrow copy on the model's
// stream, and only the narrow copy goes to the reducer; finish_low() widens the mean back.
void GradientBuckets::launch_low(size_t b, const std::vector<Tensor>& grads) {
  const BucketLayout& l = layout_[b];
  for (size_t k = 0; k < l.params.size(); ++k) {
    const Tensor& v = views_[l.params[k]];
    if (grads[k].data_ptr() == v.data_ptr()) continue;
    copy_into(grads[k], v);
    ++copies_;
    if (o_.gradient_as_bucket_view) params_[l.params[k]].second.set_grad(v);
  }
  copy_into(buckets_[b].buffer, buckets_[b].low);
  reducer_.begin();
  reducer_.all_reduce_mean(buckets_[b].low.data_ptr(), static_cast<size_t>(buckets_[b].low.numel()), exchange_);
}

void GradientBuckets::finish_low() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    copy_into(buckets_[b].low, buckets_[b].buffer);
    if (o_.gradient_as_bucket_view) continue;
    for (size_t i : layout_[b].params) {
      copy_into(views_[i], params_[i].second.grad());
      ++copies_;
    }
  }
}

void GradientBuckets::average_gradients() {
  if (!active_) return;
  ++steps_;
  try {
    while (launched_ < buckets_.size()) launch(launched_++);
    const std::string what = "all-reduce of the gradients of step " + std::to_string(steps_);
    reducer_.end(what.c_str());
    if (low_) finish_low();
  } catch (...) {
    finish_step();
    throw;
  }
  finish_step();
}

void GradientBuckets::finish_step() {
  retired_.clear();
  ready_.assign(params_.size(), false);
  for (size_t b = 0; b < layout_.size(); ++b) buckets_[b].remaining = layout_[b].params.size();
  launched_ = 0;
  last_copies_ = copies_;
  copies_ = 0;
  last_early_ = early_;
  early_ = 0;
}

std::string GradientBuckets::describe() const {
  return std::to_string(buckets_.size()) + " gradient buckets of <= " +
         std::to_string(o_.bucket_bytes / (1024 * 1024)) + " MiB (" + std::string(dtype_name(dtype_)) +
         (low_ ? ", exchanged in " + std::string(dtype_name(exchange_)) : std::string()) + "), " +
         (o_.gradient_as_bucket_view ? "gradients as bucket views" : "gradients staged by copies");
}

}  // namespace strata::dist
