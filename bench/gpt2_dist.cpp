// gpt2_dist: data-parallel GPT-2 training speed over NCCL (dist/), the peer of
// bench/peers/pytorch_ddp_gpt2.py (PyTorch DistributedDataParallel, eager and torch.compile).
//   gpt2_dist --nproc 2 --batch 16 --seq 1024 --precision bf16 --dispatch graph --steps 10
// starts one process per GPU (or runs as one rank of a world torchrun or mpirun set up); each
// rank trains GPT-2 small (or --layers/--heads/--embd/--vocab) on random tokens of its own with
// AdamW, the gradients averaged over the ranks in buckets during the backward
// (dist::DataParallel), the step captured as a CUDA graph with its all-reduces in graph mode.
// Rank 0 prints one JSON line: tokens/s over all ranks from the mean wall time of the timed
// steps (after --warmup untimed ones, the ranks started together at a barrier), per GPU, ms per
// step and rank 0's peak memory. tools/gpu/gpt2_dist.sh runs it on 1 and 2 GPUs beside PyTorch.
// With --record FILE every step draws a new global batch of world x batch sequences from one seed
// (rank r trains on its rows r*batch..), so N ranks of batch B and one GPU of batch N*B see the
// same tokens; rank 0 writes every step's loss averaged over the ranks, each parameter's sum and
// L1 norm, and whether every rank's parameters are the same bits as rank 0's
// (tests/dist/gpt_two_gpus_match_one.sh compares the runs).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include "strata/backends/api/registry.h"
#include "strata/backends/cuda/cuda_backend.h"
#include "strata/core/allocator.h"
#include "strata/core/exit_status.h"
#include "strata/core/factories.h"
#include "strata/core/random.h"
#include "strata/dist/data_parallel.h"
#include "strata/dist/process_group.h"
#include "strata/nn/model.h"
#include "strata/ops/dispatch.h"
#include "checksums.h"
#include "gpt2_support.h"
#include "rank_launch.h"

using namespace strata;

namespace {

struct Options {
  nn::GptConfig c;
  int64_t batch = 16, seq = 1024;
  int steps = 10, warmup = 3, nproc = 1;
  std::string precision = "bf16", dispatch = "graph", record;
  std::string grad_exchange;  // "" (the parameters' dtype), "bf16" or "f16"
  double lr = 6e-4, wd = 0.1, timeout = 300, bucket_mb = 25;
  bool grad_views = true;
  uint64_t seed = 1;
};

// Rank 0 writes the step losses, each parameter's sum and L1 norm, and whether every rank holds
// the same parameter bits as rank 0 (each rank's checksums gathered through a sum in which the
// other ranks add zeros: exact).
void record(const std::string& path, nn::Model& model, dist::ProcessGroup& pg, const dist::RankInfo& info,
            const std::vector<double>& losses) {
  std::vector<std::pair<std::string, std::array<double, 2>>> sums;
  for (const auto& [name, p] : model.module().named_parameters()) sums.push_back({name, bench::sum_and_l1(p)});
  std::vector<double> slots(2 * sums.size() * static_cast<size_t>(info.world), 0.0);
  for (size_t i = 0; i < sums.size(); ++i)
    for (int k = 0; k < 2; ++k) slots[(static_cast<size_t>(info.rank) * sums.size() + i) * 2 + k] = sums[i].second[k];
  const std::vector<double> all = pg.all_reduce_sum(slots);
  bool same = true;
  for (int r = 1; r < info.world; ++r)
    for (size_t i = 0; i < 2 * sums.size(); ++i) same = same && all[static_cast<size_t>(r) * 2 * sums.size() + i] == all[i];
  if (pg.rank() != 0) return;
  nlohmann::json rec = {{"losses", losses}, {"world", info.world}, {"replicas_identical", same}};
  for (const auto& [name, v] : sums) rec["params"][name] = {v[0], v[1]};
  std::ofstream out(path);
  out << rec.dump() << "\n";
  STRATA_CHECK(out.good(), "gpt2_dist: --record: cannot write ", path);
}

int run(const Options& o, const dist::RankInfo& info) {
  auto& cb = backends::registry().impl<backends::CudaBackend>();
  dist::ProcessGroupOptions po;
  if (const char* f = std::getenv(dist::kIdFileVar)) po.id_file = f;
  po.timeout_seconds = o.timeout;
  dist::ProcessGroup pg(info, po);

  STRATA_CHECK(o.seq <= o.c.block_size, "--seq ", o.seq, " is longer than --block ", o.c.block_size);
  const nn::GptConfig& c = o.c;
  manual_seed(o.seed + static_cast<uint64_t>(info.rank));  // DataParallel's broadcast makes the weights equal
  auto model = bench::make_gpt_model(c, o.precision, ops::parse_dispatch_mode(o.dispatch), "cuda");
  model->train();
  dist::DataParallelOptions dpo;
  dpo.bucket_bytes = static_cast<size_t>(o.bucket_mb * 1024 * 1024);
  dpo.gradient_as_bucket_view = o.grad_views;
  dpo.exchange_dtype = dist::exchange_dtype_from_name(o.grad_exchange);
  dist::DataParallel ddp(*model, pg, dpo);
  auto opt = model->make_optimizer(bench::gpt_adamw(o.lr, o.wd));

  // Each rank its own tokens (the global batch is world x batch sequences); with --record, a new
  // global batch every step, of which this rank takes its rows.
  manual_seed(1000 + o.seed + static_cast<uint64_t>(info.rank));
  Tensor x = randint(0, c.vocab_size, {o.batch, o.seq}, DType::i64);
  Tensor y = randint(0, c.vocab_size, {o.batch, o.seq}, DType::i64);
  const bool recording = !o.record.empty();
  auto load = [&](int step) {
    manual_seed(1000 + o.seed + 1000 * static_cast<uint64_t>(step));
    const int64_t global = o.batch * info.world, first = o.batch * info.rank;
    x = randint(0, c.vocab_size, {global, o.seq}, DType::i64).narrow(0, first, o.batch).contiguous();
    y = randint(0, c.vocab_size, {global, o.seq}, DType::i64).narrow(0, first, o.batch).contiguous();
  };
  std::fprintf(stderr, "gpt2_dist: rank %d pid %d on GPU %s\n", info.rank, static_cast<int>(getpid()),
               std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "0");
  if (pg.rank() == 0)
    std::printf("gpt2_dist: %s | %s | %lld x %lld tokens per GPU\n", model->describe().c_str(),
                ddp.describe().c_str(), static_cast<long long>(o.batch), static_cast<long long>(o.seq));
  std::fflush(stdout);

  Allocator& alloc = allocator_for(Device::cuda(0));
  alloc.reset_peak();
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0 = Clock::now();
  double loss = 0;
  std::vector<double> losses;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) {
      cb.synchronize();
      pg.barrier();
      t0 = Clock::now();
    }
    if (recording) load(s);
    const Tensor l = model->train_step(x, y, *opt).loss;
    if (recording) losses.push_back(pg.all_reduce_sum({l.item()})[0] / info.world);
    if (s + 1 == o.warmup + o.steps) loss = l.item();
  }
  cb.synchronize();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::vector<double> sums = pg.all_reduce_sum({seconds, loss});
  const double mean_seconds = sums[0] / info.world;
  const double tok_s = static_cast<double>(o.batch * o.seq * info.world * o.steps) / mean_seconds;
  // nanoGPT's count: parameters without the position embeddings (N), 6N + 6·L·C·T per token.
  const double C = static_cast<double>(c.n_embd), L = static_cast<double>(c.n_layer);
  const double N = L * 12.0 * C * C + static_cast<double>(c.vocab_size) * C;
  const double flops_per_token = 6.0 * N + 6.0 * L * C * static_cast<double>(o.seq);
  if (pg.rank() == 0) {
    const nlohmann::json j = {{"framework", "strata"},
                              {"mode", o.dispatch},
                              {"world", info.world},
                              {"precision", o.precision},
                              {"batch_per_gpu", o.batch},
                              {"seq", o.seq},
                              {"steps", o.steps},
                              {"warmup", o.warmup},
                              {"ms_per_step", 1000 * mean_seconds / o.steps},
                              {"tokens_per_s", tok_s},
                              {"tokens_per_s_per_gpu", tok_s / info.world},
                              {"tflops_per_gpu", tok_s / info.world * flops_per_token / 1e12},
                              {"peak_mib_rank0", static_cast<double>(alloc.stats().peak_bytes) / 1048576.0},
                              {"last_loss_mean", sums[1] / info.world},
                              {"buckets", ddp.num_buckets()},
                              {"grad_views", o.grad_views}};
    std::printf("%s\n", j.dump().c_str());
  }
  if (recording) record(o.record, *model, pg, info, losses);
  return kExitSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Data-parallel GPT-2 training speed over NCCL (dist/), beside bench/peers/pytorch_ddp_gpt2.py"};
  app.add_option("--layers", o.c.n_layer);
  app.add_option("--heads", o.c.n_head);
  app.add_option("--embd", o.c.n_embd);
  app.add_option("--vocab", o.c.vocab_size);
  app.add_option("--block", o.c.block_size);
  app.add_option("--batch", o.batch, "sequences per GPU per step")->check(CLI::Range(1, 4096));
  app.add_option("--seq", o.seq, "tokens per sequence")->check(CLI::Range(1, 1 << 20));
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed steps first (graph mode captures in them)")->check(CLI::PositiveNumber);
  app.add_option("--precision", o.precision, "fp32, or bf16/fp16 with f32 master weights");
  app.add_option("--dispatch", o.dispatch, "virtual, static, direct or graph");
  app.add_option("--lr", o.lr, "AdamW's learning rate (constant)");
  app.add_option("--weight-decay", o.wd, "AdamW's decoupled weight decay, every parameter");
  app.add_option("--seed", o.seed, "initialisation and token seed");
  app.add_option("--nproc", o.nproc, "processes (GPUs) to start on this machine");
  app.add_option("--timeout", o.timeout, "seconds a rank waits for the others before failing")
      ->check(CLI::PositiveNumber);
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket size in MiB")->check(CLI::NonNegativeNumber);
  bench::add_grad_exchange_option(app, o.grad_exchange);
  app.add_option("--record", o.record,
                 "a new global batch every step; rank 0 writes the step losses, parameter checksums and whether "
                 "the replicas agree here (JSON)");
  app.add_flag("!--no-grad-views", o.grad_views,
               "stage the gradients in the buckets by copies instead of keeping them there (dist/grad_buckets.h)");
  STRATA_CLI11_PARSE(app, argc, argv);
  return bench::run_as_ranks(argc, argv, o.nproc, "gpt2_dist", [&](const dist::RankInfo& me) { return run(o, me); });
}
