// Data-parallel ResNet training on synthetic data, one process per GPU over NCCL
// (dist/): the throughput of strata on N GPUs beside one, and the run the 2-GPU
// correctness check compares with one GPU at the doubled batch.
//
//   dist_resnet --model resnet50 --batch 256 --precision bf16 --channels-last --nproc 2
//   dist_resnet --model resnet18 --batch 32 --nproc 2 --steps 5 --fresh-data --record r2.json
//   dist_resnet --model resnet18 --batch 64 --steps 5 --fresh-data --record r1.json
//
// Data: step s's global batch (world x batch rows) is random_images(seed + s) and rank
// r trains on rows [r*batch, (r+1)*batch): two ranks of batch B see exactly the rows
// one process of batch 2B sees. Without --fresh-data one batch serves every step (the
// usual synthetic benchmark; the loader's cost is not measured here).
// Output: rank 0 prints one JSON line (images/s over all ranks, ms per step); with
// --record it also writes every step's loss averaged over the ranks and a checksum of
// every parameter after the last step.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "checksums.h"
#include "rank_launch.h"
#include "resnet50_support.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/core/exit_status.h"
#include "strata/dist/data_parallel.h"
#include "strata/dist/launcher.h"
#include "strata/dist/rank_env.h"

namespace {

using namespace strata;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = "resnet50";
  int64_t batch = 256;  // per GPU
  int64_t resolution = 224;
  int steps = 30, warmup = 5;
  std::string precision = "bf16";
  bool channels_last = false;
  bool no_s2d_stem = false;  // nn::ResNetConfig::space_to_depth_stem off (default: on for a GPU)
  std::string dispatch = "direct";
  double lr = 0.01;
  uint64_t seed = 1;
  bool fresh_data = false;
  std::string record;
  int nproc = 1;
  double timeout = 120;
  double bucket_mb = 25;
  bool deterministic = false;
  int accumulate = 1;
  bool grad_views = true;
  bool sync_bn = false;
  bool comm_priority = false;
  bool timeline = false;
  bool no_exchange = false;
  std::string grad_exchange;  // "" (the parameters' dtype), "bf16" or "f16"
};

// Rows [first, first+count) of a host batch (NCHW or NHWC: both keep an image's values together).
Tensor rows(const Tensor& t, int64_t first, int64_t count) {
  Shape s = t.sizes();
  const size_t row = t.nbytes() / static_cast<size_t>(s[0]);
  s[0] = count;
  Tensor out = t.dim() == 4 && t.is_channels_last() ? Tensor::empty(s, t.dtype(), Device::cpu(), MemoryFormat::channels_last)
                                                      : Tensor::empty(s, t.dtype());
  std::memcpy(out.data_ptr(), static_cast<const char*>(t.data_ptr()) + static_cast<size_t>(first) * row,
              static_cast<size_t>(count) * row);
  return out;
}

int run(const Options& o, const dist::RankInfo& info) {
  auto& cb = backends::registry().impl<backends::CudaBackend>();
  cb.set_deterministic(o.deterministic);
  dist::ProcessGroupOptions po;
  if (const char* f = std::getenv(dist::kIdFileVar)) po.id_file = f;
  po.timeout_seconds = o.timeout;
  po.high_priority_stream = o.comm_priority;
  dist::ProcessGroup pg(info, po);

  nn::ResNetConfig rc;
  STRATA_CHECK(o.model == "resnet18" || o.model == "resnet50", "--model: '", o.model,
               "' is not known (resnet18, resnet50)");
  STRATA_CHECK(!o.timeline || o.dispatch != "graph", "--timeline times the collectives as they are enqueued; a "
               "captured step enqueues them once, at capture: use --dispatch direct or static");
  rc.depth = o.model == "resnet18" ? 18 : 50;
  rc.num_classes = bench::kImageNetClasses;
  rc.small_input = o.resolution <= 64;
  if (o.no_s2d_stem) rc.space_to_depth_stem = false;
  rc.init.seed = o.seed + static_cast<uint64_t>(info.rank);  // the broadcast must make them equal
  nn::ModelOptions mo;
  mo.borrowed_results = true;  // measured: no copy of the planned outputs (read before the next step)
  mo.compute_dtype = nn::parse_precision(o.precision);
  const MemoryFormat fmt = o.channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  mo.memory_format = fmt;
  auto model = nn::make_resnet(rc, ops::parse_dispatch_mode(o.dispatch), "cuda", mo);
  model->train();
  dist::DataParallelOptions dpo;
  dpo.bucket_bytes = static_cast<size_t>(o.bucket_mb * 1024 * 1024);
  dpo.gradient_as_bucket_view = o.grad_views;
  dpo.sync_batch_norm = o.sync_bn;
  dpo.exchange_dtype = dist::exchange_dtype_from_name(o.grad_exchange);
  // --no-exchange (a diagnostic): the ranks join the group but train alone, nothing averaged.
  std::optional<dist::DataParallel> dp;
  if (!o.no_exchange) dp.emplace(*model, pg, dpo);
  auto opt = model->make_optimizer(bench::sgd_config(o.lr));

  const Shape in_sizes{o.batch, 3, o.resolution, o.resolution};
  Tensor x = model->input_buffer(in_sizes);
  Tensor labels = model->targets_buffer(Shape{o.batch});
  STRATA_CHECK(o.accumulate == 1 || info.world == 1, "--accumulate ", o.accumulate,
               " emulates several GPUs on one; run it without --nproc (world size is ", info.world, ")");
  // With --accumulate K this rank trains on K consecutive slices of the global batch.
  const int64_t k = o.accumulate, global = o.batch * k * info.world, first = o.batch * k * info.rank;
  std::vector<Tensor> xs, ys;
  auto load = [&](int step) {
    const uint64_t s = o.seed + 1000 * static_cast<uint64_t>(step);
    const Tensor images = bench::random_images(global, o.resolution, fmt, s);
    const Tensor targets = bench::random_labels(global, s + 1);
    xs.clear(), ys.clear();
    for (int64_t j = 0; j < k; ++j) {
      xs.push_back(rows(images, first + j * o.batch, o.batch));
      ys.push_back(rows(targets, first + j * o.batch, o.batch));
    }
    copy_into(xs[0], x);
    copy_into(ys[0], labels);
  };
  load(0);
  std::fprintf(stderr, "dist_resnet: rank %d pid %d on GPU %s\n", info.rank, static_cast<int>(getpid()),
               std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "0");
  if (pg.rank() == 0)
    std::printf("dist_resnet: %s | %s | batch %lld per GPU%s\n", model->describe().c_str(),
                dp ? dp->describe().c_str() : "nothing exchanged (--no-exchange)",
                static_cast<long long>(o.batch),
                k > 1 ? (", gradients of " + std::to_string(k) + " batches summed per step").c_str() : "");
  // Accumulating K batches sums K mean-gradients; SGD with momentum is linear in the
  // gradient, so lr/K on the sum is the step on their mean.
  if (k > 1) opt->set_lr(o.lr / static_cast<double>(k));
  auto step = [&]() -> Tensor {
    if (k == 1) return model->train_step(x, labels, *opt).loss;
    opt->zero_grad();
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      copy_into(xs[j], x);
      copy_into(ys[j], labels);
      sum += model->forward_loss(x, labels).loss.item();
      model->backward();
    }
    if (dp) dp->average_gradients();  // (what train_step's hook does)
    opt->step();
    return Tensor::from_vector(std::vector<double>{sum / static_cast<double>(k)}, Shape{});
  };

  std::vector<double> losses;
  double seconds = 0;
  const int total = o.warmup + o.steps;
  if (pg.rank() == 0) std::printf("dist_resnet: training %d steps\n", total);
  std::fflush(stdout);
  Clock::time_point t0 = Clock::now();
  for (int s = 0; s < total; ++s) {
    if (s == o.warmup) {
      cb.synchronize();
      pg.barrier();
      t0 = Clock::now();
    }
    if (o.fresh_data && s > 0) load(s);
    const Tensor loss = step();
    if (!o.record.empty()) losses.push_back(pg.all_reduce_sum({loss.item()})[0] / info.world);
  }
  cb.synchronize();
  seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::vector<double> all_secs = pg.all_reduce_sum({seconds});
  const double mean_seconds = all_secs[0] / info.world;
  const double img_s = static_cast<double>(o.batch * info.world * o.steps) / mean_seconds;
  if (o.timeline) {
    // One more step, its collectives timed against its start on this rank's device. Alone, a rank
    // exchanges nothing and installs no gradient hook: this one marks where its backward ends, the
    // point to set the ranks' "backward done" against.
    pg.timeline_start();
    if (info.world == 1) model->set_gradient_hook([&pg] { pg.timeline_mark("backward done"); });
    step();
    if (info.world == 1) model->set_gradient_hook({});
    pg.timeline_mark("step end");
    nlohmann::json lines = nlohmann::json::array();
    for (const dist::TimelineEntry& e : pg.timeline_take())
      lines.push_back({{"what", e.what}, {"ready_ms", e.ready_ms}, {"start_ms", e.start_ms}, {"end_ms", e.end_ms},
                       {"bytes", e.bytes}});
    const nlohmann::json t = {{"timeline", lines}, {"rank", info.rank}, {"world", info.world},
                              {"dispatch", o.dispatch}, {"buckets", dp ? dp->num_buckets() : 0}};
    std::printf("%s\n", t.dump().c_str());
    std::fflush(stdout);
  }
  if (pg.rank() == 0) {
    nlohmann::json j = {{"framework", "strata"}, {"model", o.model}, {"world", info.world},
                        {"batch_per_gpu", o.batch}, {"resolution", o.resolution}, {"precision", o.precision},
                        {"channels_last", o.channels_last}, {"dispatch", o.dispatch}, {"steps", o.steps},
                        {"warmup", o.warmup}, {"ms_per_step", 1000 * mean_seconds / o.steps},
                        {"img_per_s", img_s}, {"img_per_s_per_gpu", img_s / info.world},
                        {"buckets", dp ? dp->num_buckets() : 0}, {"grad_views", o.grad_views},
                        {"no_exchange", o.no_exchange},
                        {"sync_bn", o.sync_bn}, {"comm_high_priority", o.comm_priority},
                        {"grad_exchange", o.grad_exchange.empty() ? "f32" : o.grad_exchange},
                        {"synced_batch_norms", dp ? dp->synced_batch_norms() : 0},
                        {"bucket_copies_per_step", dp ? dp->buckets().copies() : 0}};
    std::printf("%s\n", j.dump().c_str());
    if (!o.record.empty()) {
      nlohmann::json rec = {{"losses", losses}, {"world", info.world}, {"batch_per_gpu", o.batch}};
      for (const auto& [name, p] : model->module().named_parameters()) rec["params"][name] = bench::sum_and_l1(p);
      // Batch norms' running statistics: rank 0's, which --sync-bn makes the global batch's.
      for (const auto& [name, b] : model->module().named_buffers())
        if (b.dtype() == DType::f32) rec["buffers"][name] = bench::sum_and_l1(b);
      std::ofstream(o.record) << rec.dump() << "\n";
    }
  }
  return kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Data-parallel ResNet training on synthetic data over NCCL"};
  app.add_option("--model", o.model, "resnet18 or resnet50");
  app.add_option("--batch", o.batch, "images per GPU per step")->check(CLI::PositiveNumber);
  app.add_option("--resolution", o.resolution, "image size")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--precision", o.precision, "fp32, bf16 or fp16 (mixed: f32 parameters)");
  app.add_flag("--channels-last", o.channels_last, "NHWC activations");
  app.add_flag("--no-s2d-stem", o.no_s2d_stem,
               "the ImageNet stem (resolution above 64) as its 7x7 convolution, not over 2x2 pixel blocks");
  app.add_option("--dispatch", o.dispatch, "virtual, static, direct or graph");
  app.add_option("--lr", o.lr, "SGD learning rate (momentum 0.9)");
  app.add_option("--seed", o.seed, "data and initialisation seed");
  app.add_flag("--fresh-data", o.fresh_data, "a new random batch every step");
  app.add_option("--record", o.record, "rank 0 writes the step losses and parameter checksums here (JSON)");
  app.add_option("--nproc", o.nproc, "processes (GPUs) to start on this machine");
  app.add_option("--timeout", o.timeout, "seconds a rank waits for the others before failing")
      ->check(CLI::PositiveNumber);
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket size in MiB")->check(CLI::NonNegativeNumber);
  app.add_option("--accumulate", o.accumulate,
                 "batches whose gradients each step sums (one GPU emulating several: the 2-GPU check)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--deterministic", o.deterministic, "deterministic cuDNN algorithms only");
  app.add_flag("!--no-grad-views", o.grad_views,
               "stage the gradients in the buckets by copies instead of keeping them there (dist/grad_buckets.h)");
  app.add_flag("--timeline", o.timeline,
               "after the timed steps, one more with its collectives timed by events (each rank prints a JSON "
               "line: when each bucket's gradients were ready, its all-reduce's start and end, the backward's "
               "end); direct or static mode");
  app.add_flag("--comm-high-priority", o.comm_priority,
               "the collectives' stream at the device's highest priority (dist::ProcessGroupOptions)");
  bench::add_grad_exchange_option(app, o.grad_exchange);
  app.add_flag("--no-exchange", o.no_exchange,
               "a diagnostic: the ranks join the NCCL group but train alone (no gradient averaging), to tell the "
               "group's own cost from the exchange's");
  app.add_flag("--sync-bn", o.sync_bn,
               "batch norm statistics over every GPU's rows (PyTorch's SyncBatchNorm); one GPU: plain batch norm");
  STRATA_CLI11_PARSE(app, argc, argv);
  return bench::run_as_ranks(argc, argv, o.nproc, "dist_resnet", [&](const dist::RankInfo& me) { return run(o, me); });
}
