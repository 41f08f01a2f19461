#include "strata/dist/data_parallel.h"

#include "strata/core/error.h"
#include "strata/nn/layers/batch_norm.h"

namespace strata::dist {

DataParallel::DataParallel(nn::Model& model, ProcessGroup& pg, const DataParallelOptions& o)
    : model_(model), pg_(pg) {
  STRATA_CHECK(model_.device().is_cuda(), "DataParallel: the model must be on a CUDA device (NCCL), it is on ",
               model_.device().str(), " (backend ", model_.backend_name(), ")");
  // Rank 0's weights everywhere. Host buffers (batch norm's step counter) are the same
  // on every rank by construction: each rank runs the same steps.
  std::vector<Tensor> state;
  for (const auto& [name, t] : model_.state_dict())
    if (t.device().is_cuda()) state.push_back(t);
  pg_.broadcast(state);
  buckets_ = std::make_unique<GradientBuckets>(model_, pg_, o);
  if (o.sync_batch_norm) synced_ = nn::convert_sync_batch_norm(model_.module(), &pg_);
  if (pg_.world() > 1)
    model_.set_graph_launch_hook([this] { pg_.bound_queued_work("captured training step (its all-reduces)"); });
}

DataParallel::~DataParallel() {
  model_.set_graph_launch_hook({});
  if (synced_ > 0) nn::convert_sync_batch_norm(model_.module(), nullptr);
}

std::string DataParallel::describe() const {
  return std::to_string(pg_.world()) + " ranks, " + nn::group_thousands(model_.num_parameters()) + " parameters in " +
         buckets_->describe() + ", NCCL all-reduce (average)" +
         (synced_ > 0 ? ", " + std::to_string(synced_) + " batch norms synchronised" : std::string());
}

}  // namespace strata::dist
