#include "examples/train/data_parallel_start.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "strata/backends/api/registry.h"
#include "strata/core/error.h"
#include "strata/core/exit_status.h"
#if STRATA_HAVE_DIST
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/dist/data_parallel.h"
#include "strata/dist/launcher.h"
#include "strata/dist/rank_env.h"
#else
// Without dist/ the run's members stay null; they need complete types.
namespace strata::dist {
class ProcessGroup {};
class DataParallel {};
}  // namespace strata::dist
#endif

namespace strata::train {

DataParallelStart::DataParallelStart() {
#if STRATA_HAVE_DIST
  const std::optional<dist::RankInfo> rank = dist::rank_from_env();
  if (!rank) return;
  is_rank_ = true;
  place_ = {rank->rank, rank->world, rank->local_rank, rank->local_world};
  source_ = rank->source;
  // Before anything touches CUDA: the cuda backend runs on the first visible GPU.
  if (rank->world > 1) {
    prefix_ = "rank " + std::to_string(rank->rank) + ": ";
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    setenv("CUDA_VISIBLE_DEVICES", dist::device_for_rank(*rank, visible).c_str(), 1);
  }
#endif
}

void DataParallelStart::check(const std::string& backend, int nproc) const {
#if STRATA_HAVE_DIST
  if (is_rank_) {
    STRATA_CHECK(place_.world == 1 || backends::registry().get(backend).device_type() == DeviceType::cuda,
                 "data-parallel training (", source_, ": world size ", place_.world,
                 ") runs one process per GPU on the cuda backend, not on '", backend, "' (add --backend cuda)");
  } else if (nproc > 1) {
    STRATA_CHECK(backends::registry().get(backend).device_type() == DeviceType::cuda, "--nproc ", nproc,
                 ": data-parallel training runs one process per GPU on the cuda backend, not on '", backend,
                 "' (add --backend cuda)");
    dist::check_nproc(nproc, backends::cuda::device_count(), backends::cuda::unavailable_reason());
  }
#else
  (void)backend;
  STRATA_CHECK(nproc == 1, "--nproc ", nproc, ": this build has no data-parallel training (dist/ is built with the "
               "cuda backend and NCCL)");
#endif
}

int DataParallelStart::launch(int argc, char** argv, int nproc, const char* program) const {
#if STRATA_HAVE_DIST
  std::vector<std::string> args{dist::self_executable()};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  const dist::LaunchResult r = dist::launch(dist::strip_nproc(args), nproc);
  if (r.status != 0) std::fprintf(stderr, "%s: error: %s\n", program, r.message.c_str());
  return r.status == 0 ? kExitSuccess : kExitFailure;
#else
  (void)argc, (void)argv, (void)program;
  STRATA_FAIL("--nproc ", nproc, ": this build has no data-parallel training");
#endif
}

void add_grad_exchange_option(CLI::App& app, std::string& value) {
  app.add_option("--grad-exchange", value,
                 "data parallel: the dtype the gradients cross the links in: bf16 or f16 halve the bytes (PyTorch "
                 "DDP's bf16_compress_hook); default the parameters'")
      ->check(CLI::IsMember({"bf16", "f16"}));
}

DataParallelRun::DataParallelRun(nn::Model& model, RankPlace place, double timeout_seconds, bool sync_batch_norm,
                                 const std::string& grad_exchange) {
#if STRATA_HAVE_DIST
  if (place.world == 1) return;
  dist::RankInfo ri{place.rank, place.world, place.local_rank, place.local_world, ""};
  dist::ProcessGroupOptions po;
  if (const char* f = std::getenv(dist::kIdFileVar)) po.id_file = f;
  po.timeout_seconds = timeout_seconds;
  pg_ = std::make_unique<dist::ProcessGroup>(ri, po);
  dist::DataParallelOptions dpo;
  dpo.sync_batch_norm = sync_batch_norm;
  dpo.exchange_dtype = dist::exchange_dtype_from_name(grad_exchange);
  ddp_ = std::make_unique<dist::DataParallel>(model, *pg_, dpo);
#else
  (void)model, (void)timeout_seconds, (void)sync_batch_norm, (void)grad_exchange;
  STRATA_CHECK(place.world == 1, "data parallel: world size ", place.world,
               " but this build has no data-parallel training");
#endif
}

DataParallelRun::~DataParallelRun() = default;

std::vector<double> DataParallelRun::sum(std::vector<double> v) const {
#if STRATA_HAVE_DIST
  if (pg_) return pg_->all_reduce_sum(v);
#endif
  return v;
}

void DataParallelRun::average_gradients() {
#if STRATA_HAVE_DIST
  if (ddp_) ddp_->average_gradients();
#endif
}

std::string DataParallelRun::describe() const {
#if STRATA_HAVE_DIST
  if (ddp_) return ddp_->describe();
#endif
  return {};
}

}  // namespace strata::train
