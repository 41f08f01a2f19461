#include "examples/train/options.h"

#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "strata/backends/api/registry.h"
#include "strata/core/version.h"
#include "examples/train/cli_validators.h"
#include "examples/train/data_parallel_start.h"
#include "examples/train/presets.h"
#include "examples/train/resources.h"
#include "strata/nn/init.h"
#include "strata/nn/lenet.h"
#include "strata/nn/optim.h"
#include "strata/nn/schedule.h"

namespace strata::train {

std::unique_ptr<CLI::App> make_cli(TrainOptions& o) {
  auto app = std::make_unique<CLI::App>(
      "strata_train: train LeNet or ResNet on Fashion-MNIST (default), MNIST, CIFAR-10, STL-10 or PASCAL VOC, "
      "on any backend, in any dispatch mode.");
  app->option_defaults()->always_capture_default();
  app->get_formatter()->column_width(34);
  app->set_version_flag("--version", strata::version_line("strata_train"));
  app->footer(describe_presets());

  app->add_option("--dataset", o.dataset, "dataset preset")->check(CLI::IsMember(dataset_names()));
  app->add_option("--data-dir", o.data_dir,
                  "dataset directory (default: fashion-mnist " + std::string(dataset_preset("fashion-mnist").default_dir) +
                      "; others: required)");
  app->add_option("--model", o.model, "lenet | resnet18 | resnet50")
      ->check(CLI::IsMember({"lenet", "resnet18", "resnet50"}));
  app->add_option("--lenet-variant", o.lenet_variant, "tensorflow (conv 32/64, fc 1024) | keras (conv 5/12, fc 128)")
      ->check(CLI::IsMember({"tensorflow", "keras"}));
  app->add_option("--width", o.base_channels, "ResNet stem/layer1 channels (64 = torchvision)")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app->add_option("--backend", o.backend, "backend name (default: best CPU backend built: onednn, openblas, eigen, reference)");
  app->add_option("--dispatch", o.dispatch,
                  "virtual | static | direct | graph (cuda: each training step captured into a CUDA graph and "
                  "replayed; ResNets, one process)")
      ->check(CLI::IsMember({"virtual", "static", "direct", "graph"}));
  app->add_option("--precision", o.precision,
                  "fp32 | bf16 | fp16 (mixed precision: half activations, f32 master weights; fp16 with dynamic loss "
                  "scaling, decided on the device in direct/graph; the backend must support the dtype)");
  app->add_flag("--tf32", o.tf32, "cuda: f32 conv/linear on TF32 tensor cores (PyTorch's conv default; off: exact FMA)");
  auto* nhwc = app->add_flag("--channels-last", o.channels_last,
                             "activations and conv weights in NHWC (PyTorch's channels_last; by default the backend "
                             "chooses: NHWC on cuda for bf16/fp16 and for fp32 with --tf32, NCHW otherwise)");
  app->add_flag("--nchw", o.nchw, "activations and conv weights in NCHW whatever the backend prefers")->excludes(nhwc);
  std::string epochs;
  for (const DatasetPreset& p : dataset_presets())
    epochs += (epochs.empty() ? "" : ", ") + p.name + " " + std::to_string(p.default_epochs);
  // Options whose default depends on the dataset or the model show that, not the
  // placeholder the variable holds until resolve() (0 or -1, outside their ranges).
  app->add_option("--epochs", o.epochs, "epochs (default: the dataset's: " + epochs + ")")
      ->check(CLI::Range(1, 100000))
      ->default_str("dataset's");
  app->add_option("--batch-size", o.batch_size, "training batch size (default: lenet 64, resnet 128)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->default_str("model's");
  app->add_option("--eval-batch-size", o.eval_batch_size, "evaluation batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app->add_option("--lr", o.lr,
                  "peak learning rate (default: lenet sgd 0.05, resnet sgd 0.1, the other optimizers torch.optim's)")
      ->check(finite_in(0.0, 1e6, true))
      ->default_str("model's");
  app->add_option("--optimizer", o.optimizer,
                  "sgd | adam | adamw | rmsprop | adagrad | adadelta (torch.optim's defaults)")
      ->default_str("sgd");
  app->add_option("--momentum", o.momentum, "momentum of sgd (default 0.9) and rmsprop (default 0)")
      ->check(finite_in(0.0, 1.0))
      ->default_str("optimizer's");
  app->add_flag("--nesterov", o.nesterov, "Nesterov momentum");
  app->add_option("--weight-decay", o.weight_decay,
                  "weight decay (default: lenet 0, resnet 5e-4 without decay on BN and biases)")
      ->check(finite_in(0.0, 1.0))
      ->default_str("model's");
  app->add_option("--schedule", o.schedule, "learning-rate schedule over the whole run: constant | cosine | step");
  app->add_option("--warmup-epochs", o.warmup_epochs, "linear warm-up, in epochs (fractions allowed)")
      ->check(finite_in(0.0, 1000.0));
  app->add_option("--init", o.init,
                  "pytorch_default | kaiming_normal_fan_out | xavier_uniform | fixup (default: lenet pytorch_default, "
                  "resnet kaiming_normal_fan_out)")
      ->default_str("model's");
  app->add_flag("--zero-last-bn-gamma", o.zero_last_bn_gamma, "zero gamma of the last BN of each residual block");
  app->add_option("--seed", o.seed, "seed of the init, the data order, augmentation and dropout")
      ->check(unsigned_integer());
  app->add_option("--resolution", o.resolution, "resize images to this side (VOC, imagefolder default 224; 0: native)")
      ->check(CLI::Range(int64_t{0}, int64_t{4096}));
  app->add_option("--voc-train-set", o.voc_train_set, "VOC image set to train on");
  app->add_option("--voc-test-set", o.voc_test_set, "VOC image set to evaluate on");
  app->add_option("--train-limit", o.train_limit, "use only the first N training images (0: all)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--test-limit", o.test_limit, "use only the first N test images (0: all)")
      ->check(CLI::NonNegativeNumber);
  app->add_flag_callback("--augment", [&o] { o.augment = 1; },
                         "random crop + flip (default for cifar10, stl10, voc, imagefolder: RandomResizedCrop)");
  app->add_flag_callback("--no-augment", [&o] { o.augment = 0; }, "no augmentation (default for (fashion-)mnist)");
  app->add_option("--checkpoint", o.checkpoint, "safetensors file written (atomically) after every epoch");
  app->add_option("--checkpoint-every", o.checkpoint_every, "also write it every N optimizer steps (0: off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--resume", o.resume, "continue exactly from this checkpoint (same options otherwise)");
  app->add_flag("--allow-non-finite", o.allow_non_finite,
                "load a --resume checkpoint whose tensors hold NaN or infinity (refused otherwise)");
  app->add_option("--metrics", o.metrics, "append one JSON line per epoch to this file");
  app->add_option("--stop-after-steps", o.stop_after_steps,
                  "stop after N optimizer steps of this run (after --resume: N more), as if interrupted; a stop on "
                  "an epoch's last step finishes that epoch (evaluation, checkpoint) first. With --checkpoint and no "
                  "--checkpoint-every the checkpoint is written at the stop (for resume tests; 0: off)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--threads", o.threads,
                  "threads of the backend libraries (sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and, unless set, "
                  "OMP_WAIT_POLICY=passive; 0: leave the environment alone)")
      ->check(CLI::Range(0, 1024));
  app->add_option("--workers", o.workers, "data loader threads (0: load on the training thread)")
      ->check(CLI::Range(0, 256));
  app->add_flag_callback("--no-progress", [&o] { o.progress = false; }, "no progress bar");
  app->add_option("--nproc", o.nproc,
                  "data-parallel training on N GPUs of this machine: starts one process per GPU (NCCL); "
                  "--batch-size is per GPU. Under torchrun or mpirun leave it out: their RANK/WORLD_SIZE are read")
      ->check(CLI::Range(1, 1024));
  app->add_option("--dist-timeout", o.dist_timeout,
                  "data parallel: seconds a rank waits for the others (joining, each all-reduce) before it stops "
                  "with an error")
      ->check(CLI::PositiveNumber);
  add_grad_exchange_option(*app, o.grad_exchange);
  app->add_flag("--sync-bn", o.sync_bn,
                "data parallel: batch norm statistics over the rows of every GPU (PyTorch's SyncBatchNorm; two "
                "all-reduces per batch norm and step) instead of each GPU's own. In one process it changes nothing, "
                "as SyncBatchNorm on one process");
  return app;
}

std::string best_cpu_backend() { return std::string(backends::registry().best(DeviceType::cpu)); }

void check_precision(const std::string& precision, const std::string& backend,
                     std::initializer_list<ops::OpKind> kinds, std::initializer_list<ops::OpId> ops) {
  if (precision == "fp32") return;
  STRATA_CHECK(precision == "bf16" || precision == "fp16", "unknown precision '", precision,
               "' (known and supported by strata_train: fp32, bf16, fp16)");
  const DType dt = precision == "bf16" ? DType::bf16 : DType::f16;
  // From the backend's capability table: the dtypes its convolutions and matrix products
  // run in. The trial step before training (precision_check.h) then checks the model's
  // other ops one by one.
  const backends::Capabilities& caps = backends::registry().get(backend).capabilities();
  auto plural = [](ops::OpKind k) {
    return k == ops::OpKind::conv ? std::string("convolutions")
                                  : k == ops::OpKind::linear ? std::string("matrix products")
                                                             : std::string(ops::kOpKindNames[static_cast<int>(k)]) + " ops";
  };
  // A kind by its layers' ops: bmm is a matrix product too, but no CNN runs it.
  const auto layer_dtypes = [&](ops::OpKind k) {
    using ops::OpId;
    if (k == ops::OpKind::conv)
      return caps.dtypes(OpId::conv2d_fwd) & caps.dtypes(OpId::conv2d_bwd_data) & caps.dtypes(OpId::conv2d_bwd_weight);
    if (k == ops::OpKind::linear)
      return caps.dtypes(OpId::linear_fwd) & caps.dtypes(OpId::linear_bwd_data) & caps.dtypes(OpId::linear_bwd_weight);
    return caps.dtypes(k);
  };
  backends::DTypeSet compute = layer_dtypes(*kinds.begin());
  std::string what = plural(*kinds.begin());
  for (auto k = kinds.begin() + 1; k != kinds.end(); ++k) {
    compute = compute & layer_dtypes(*k);
    what += (k + 1 == kinds.end() ? " and " : ", ") + plural(*k);
  }
  std::string supported = "fp32";
  if (compute.contains(DType::bf16)) supported += ", bf16";
  if (compute.contains(DType::f16)) supported += ", fp16";
  STRATA_CHECK(compute.contains(dt), "precision '", precision, "' is not supported on backend '", backend,
               "' (its ", what, " run in ", compute.str(), "); supported: ", supported);
  for (const ops::OpId op : ops)
    STRATA_CHECK(caps.dtypes(op).contains(dt), "precision '", precision, "' is not supported on backend '", backend,
                 "' for this model: its ", ops::op_name(op), " runs in ", caps.dtypes(op).str());
}

RunConfig resolve(const TrainOptions& in) {
  RunConfig r;
  r.o = in;
  TrainOptions& o = r.o;
  const DatasetPreset& p = dataset_preset(o.dataset);
  STRATA_CHECK(o.model == "lenet" || o.model == "resnet18" || o.model == "resnet50", "unknown model '", o.model,
               "' (known: lenet, resnet18, resnet50)");
  nn::parse_lenet_variant(o.lenet_variant);
  r.mode = ops::parse_dispatch_mode(o.dispatch);
  if (o.backend.empty()) {
    o.backend = best_cpu_backend();
    r.backend_note = "best CPU backend built";
  } else {
    backends::registry().get(o.backend);  // the registry's error lists the built backends
    r.backend_note = "chosen with --backend";
  }
  check_precision(o.precision, o.backend);
  STRATA_CHECK(o.nproc == 1 || backends::registry().get(o.backend).device_type() == DeviceType::cuda, "--nproc ",
               o.nproc, ": data-parallel training runs one process per GPU on the cuda backend, not on '", o.backend,
               "' (add --backend cuda)");
  if (r.mode == ops::DispatchMode::graph) {
    STRATA_CHECK(backends::registry().get(o.backend).device_type() == DeviceType::cuda,
                 "--dispatch graph captures CUDA graphs: it needs --backend cuda, not '", o.backend, "'");
  }
  STRATA_CHECK(!o.tf32 || backends::registry().get(o.backend).device_type() == DeviceType::cuda,
               "--tf32 applies to the cuda backend only, not to '", o.backend, "'");
  if (!o.init.empty()) nn::parse_init_policy(o.init);
  if (o.data_dir.empty()) o.data_dir = p.default_dir;
  require_data_dir(p, o.data_dir);
  if (o.epochs == 0) o.epochs = p.default_epochs;
  const bool lenet = o.model == "lenet";
  if (o.batch_size == 0) o.batch_size = lenet ? 64 : 128;
  r.optimizer = o.optimizer.empty() ? "sgd" : o.optimizer;
  const nn::OptimizerKind kind = nn::parse_optimizer_kind(r.optimizer);
  const bool sgd = kind == nn::OptimizerKind::sgd;
  r.lr = o.lr > 0 ? o.lr : (sgd ? (lenet ? 0.05 : 0.1) : nn::default_lr(kind));
  STRATA_CHECK(o.momentum < 0 || sgd || kind == nn::OptimizerKind::rmsprop,
               "--momentum applies to the sgd and rmsprop optimizers, not to '", r.optimizer, "'");
  if (o.momentum < 0) o.momentum = sgd ? 0.9 : 0.0;
  r.weight_decay = o.weight_decay >= 0 ? o.weight_decay : (lenet ? 0.0 : 5e-4);
  STRATA_CHECK(o.schedule == "constant" || o.schedule == "cosine" || o.schedule == "step", "unknown schedule '",
               o.schedule, "' (known: constant, cosine, step)");
  if (o.augment < 0) o.augment = p.augment_by_default ? 1 : 0;
  // Its "weights" are whatever memory held (NaN among them): nothing worth saving.
  STRATA_CHECK(o.checkpoint.empty() || o.backend != "null", "--checkpoint: backend 'null' computes nothing, so its "
               "weights are not results and are not saved; drop --checkpoint, or choose a backend that computes");
  STRATA_CHECK(o.warmup_epochs == 0 || o.warmup_epochs < o.epochs, "--warmup-epochs ", o.warmup_epochs,
               " is not shorter than the run (--epochs ", o.epochs, ")");
  return r;
}

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void apply_thread_count(int threads, char** argv) {
  if (threads <= 0) return;
  // Warned, not capped: the count is the user's (an oversubscription can be what is
  // measured). Once: a re-executed process has already said it.
  if (const int cpus = available_cpus(); threads > cpus && std::getenv("STRATA_TRAIN_REEXECUTED") == nullptr)
    std::fprintf(stderr,
                 "warning: --threads %d is more than the %d CPUs this process may run on: the threads will take "
                 "turns on them and every parallel op waits for the last (%s); kept as asked\n",
                 threads, cpus, resource_path("docs/threads.md").c_str());
  const std::string n = std::to_string(threads);
  auto equals = [&](const char* var) {
    const char* v = std::getenv(var);
    return v != nullptr && n == v;
  };
  const bool wait_policy_set = std::getenv("OMP_WAIT_POLICY") != nullptr;
  if (equals("OMP_NUM_THREADS") && equals("OPENBLAS_NUM_THREADS") && wait_policy_set) return;
  ::setenv("OMP_NUM_THREADS", n.c_str(), 1);
  ::setenv("OPENBLAS_NUM_THREADS", n.c_str(), 1);
  // Idle OpenMP threads sleep instead of spinning: on a shared or busy 2-core machine
  // spinning threads steal the cores the work needs (measured: a short LeNet run took
  // 2.6x longer with the default policy beside other jobs). An explicit setting is kept.
  if (!wait_policy_set) ::setenv("OMP_WAIT_POLICY", "passive", 1);
  if (std::getenv("STRATA_TRAIN_REEXECUTED") != nullptr) return;  // never loop
  ::setenv("STRATA_TRAIN_REEXECUTED", "1", 1);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "warning: --threads %d: could not re-execute (%s); using the libraries' own thread counts\n",
               threads, "execv failed");
}

}  // namespace strata::train
