// study_resnet50: strata's side of the abstraction-cost study (docs/study.md).
// ResNet-50 exactly as torchvision, f32, strata's default cuDNN policy (TF32 off,
// deterministic algorithms, heuristics), on the cuda backend unless --backend says
// otherwise (reference or null run everything on the CPU for smoke tests).
//
//   study_resnet50 sweep --points 8x64,32x32 --impls virtual,static,direct,cudagraph
//                        --kinds eval,train --json strata_sweep.json
//   study_resnet50 parity-data --out DIR          # the parity task and initial weights
//   study_resnet50 parity --data DIR --json strata_parity.json
//   study_resnet50 op-costs --point 32x64 --json strata_op_costs.json
//
// sweep: per point, kind and dispatch mode a fresh model; the host-to-device copy of
// one batch timed from pageable and from pinned memory (never inside a step); then
// warm-up steps and at least --min-repeats timed steps (more until --min-seconds have
// passed, at most --max-repeats), each with device time (CUDA events), host time to
// enqueue and wall time; median, p10/p90/p99, max; peak memory (caching allocator);
// GPU utilisation, power and energy from NVML over the timed steps. Points run
// cheapest first; nothing new starts after --deadline seconds; a point at least as
// large as one that ran out of memory is not tried. "cudagraph" is strata's graph mode
// (training and inference steps captured and replayed on the cuda backend; reported absent
// on the CPU).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "driver.h"

using namespace strata;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

void check_members(const std::vector<std::string>& v, const std::vector<std::string>& allowed, const char* what) {
  for (const auto& x : v)
    STRATA_CHECK(std::find(allowed.begin(), allowed.end(), x) != allowed.end(), "study_resnet50: unknown ", what,
                 " '", x, "'");
}

void add_common(CLI::App* c, study::Options& o) {
  c->add_option("--backend", o.backend, "cuda (default); reference or null for CPU smoke tests");
  c->add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::Range(0, 1000));
  c->add_option("--seed", o.seed, "seed of the random inputs and labels");
  c->add_option("--deadline", o.deadline_s, "start nothing new after this many seconds");
  c->add_option("--json", o.json_path, "write the results here (rewritten after each measurement)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata's side of the abstraction-cost study (docs/study.md)"};
  app.require_subcommand(1);
  study::Options o;
  std::string points = study::seed_points(), impls = "virtual,static,direct,cudagraph", kinds = "eval,train";

  CLI::App* sweep = app.add_subcommand("sweep", "time every point, kind and dispatch mode");
  add_common(sweep, o);
  sweep->add_option("--points", points, "<batch>x<resolution>,... (default: the seed's table points)");
  sweep->add_option("--impls", impls,
                    "virtual,static,direct,cudagraph; <mode>_unfused: the same mode without fusion (batch norm, "
                    "ReLU and residual add as separate ops, no folding), the study's fused/unfused rows");
  sweep->add_option("--kinds", kinds, "eval,train");
  sweep->add_option("--min-repeats", o.repeats.min_repeats, "timed steps at least")->check(CLI::Range(1, 100000));
  sweep->add_option("--max-repeats", o.repeats.max_repeats, "timed steps at most")->check(CLI::Range(1, 100000));
  sweep->add_option("--min-seconds", o.repeats.min_seconds, "keep timing until this long (after min-repeats)");
  sweep->add_option("--h2d-repeats", o.h2d_repeats, "copies per host-to-device timing")->check(CLI::Range(1, 1000));
  sweep->add_option("--lr", o.lr, "SGD learning rate of the training steps");

  std::string dir;
  int64_t n_train = 2048, n_test = 512, res = 32, batch = 64;
  uint64_t data_seed = 7;
  CLI::App* pdata = app.add_subcommand("parity-data", "write the parity task and the initial weights");
  pdata->add_option("--out", dir, "folder for parity_data.safetensors and parity_init.safetensors")->required();
  pdata->add_option("--train", n_train, "training images");
  pdata->add_option("--test", n_test, "held-out images");
  pdata->add_option("--resolution", res, "image size");
  pdata->add_option("--seed", data_seed, "seed of the patterns and noise");

  std::string parity_impls = "virtual,static,direct,cudagraph";
  int epochs = 2;
  double parity_lr = 0.005;
  CLI::App* parity = app.add_subcommand("parity", "train on the parity task and evaluate");
  add_common(parity, o);
  parity->add_option("--data", dir, "folder written by parity-data")->required();
  parity->add_option("--impls", parity_impls, "virtual,static,direct,cudagraph");
  parity->add_option("--batch", batch, "batch size");
  parity->add_option("--epochs", epochs, "passes over the training images");
  parity->add_option("--lr", parity_lr, "SGD learning rate (momentum 0.9)");

  std::string point = "32x64";
  CLI::App* costs = app.add_subcommand("op-costs", "host and device cost of each op of one step");
  add_common(costs, o);
  costs->add_option("--point", point, "<batch>x<resolution>");
  costs->add_option("--kinds", kinds, "eval,train");

  app.set_version_flag("--version", strata::version_line("study_resnet50"));
  STRATA_CLI11_PARSE(app, argc, argv);
  try {
    if (sweep->parsed()) {
      const auto iv = split(impls), kv = split(kinds);
      check_members(iv,
                    {"virtual", "static", "direct", "cudagraph", "virtual_unfused", "static_unfused",
                     "direct_unfused", "cudagraph_unfused"},
                    "impl");
      check_members(kv, {"eval", "train"}, "kind");
      return study::run_sweep(o, study::parse_points(points), iv, kv);
    }
    if (pdata->parsed()) return study::run_parity_data(dir, n_train, n_test, res, data_seed);
    if (parity->parsed()) {
      const auto iv = split(parity_impls);
      check_members(iv, {"virtual", "static", "direct", "cudagraph"}, "impl");
      o.lr = parity_lr;
      return study::run_parity(o, dir, iv, batch, epochs);
    }
    const auto kv = split(kinds);
    check_members(kv, {"eval", "train"}, "kind");
    return study::run_op_costs(o, study::parse_points(point).at(0), kv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "study_resnet50: %s\n", e.what());
    return 1;
  }
}
