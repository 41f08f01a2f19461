#pragma once
// strata_train's command line: the options, their CLI11 definitions, and the
// resolution of defaults that depend on the dataset, the model and the build
// (best CPU backend, learning rate, epochs...). Kept apart from main() so tests can
// parse command lines and check the error messages.
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "strata/core/error.h"
#include "strata/ops/dispatch.h"

namespace CLI {
class App;
}

namespace strata::train {

// An error in what the command line asks for (strata_train exits 2, core/exit_status.h),
// found after parsing: a backend that is not built, a precision it cannot run...
class UsageError : public Error {
 public:
  using Error::Error;
};

struct TrainOptions {
  std::string dataset = "fashion-mnist";
  std::string model = "lenet";
  std::string lenet_variant = "tensorflow";
  int64_t base_channels = 64;  // resnet width (64 = torchvision)
  std::string backend;         // "" -> best CPU backend built
  std::string dispatch = "direct";
  std::string precision = "fp32";
  bool tf32 = false;  // cuda: TF32 tensor-core math for f32 conv/linear (PyTorch's conv default)
  bool channels_last = false;  // NHWC activations and conv weights (nn::ModelOptions::memory_format)
  bool nchw = false;           // NCHW whatever the backend prefers (neither: the backend's choice)
  int epochs = 0;          // 0 -> the dataset's default
  int64_t batch_size = 0;  // 0 -> the model's default
  int64_t eval_batch_size = 256;
  double lr = 0;           // 0 -> the model's default
  std::string optimizer;   // "" -> the model's default
  double momentum = -1;    // < 0 -> sgd 0.9, rmsprop 0 (torch.optim.RMSprop's)
  bool nesterov = false;
  double weight_decay = -1;  // < 0 -> the model's default
  std::string schedule = "cosine";
  double warmup_epochs = 0;
  std::string init;  // "" -> the model's default
  bool zero_last_bn_gamma = false;
  uint64_t seed = 1;
  std::string data_dir;  // "" -> the dataset's default
  int64_t resolution = 0;
  std::string voc_train_set = "trainval", voc_test_set = "test";
  int64_t train_limit = 0, test_limit = 0;
  int augment = -1;  // -1 -> the dataset's default
  std::string checkpoint;        // written after every epoch
  int64_t checkpoint_every = 0;  // and every N steps
  std::string resume;
  bool allow_non_finite = false;  // load a --resume checkpoint holding NaN/Inf (refused otherwise)
  std::string metrics;  // JSON lines, appended
  int64_t stop_after_steps = 0;
  int threads = 0;
  int workers = 0;
  bool progress = true;
  int nproc = 1;              // data parallel: processes (GPUs) to start on this machine
  double dist_timeout = 300;  // data parallel: seconds a rank waits for the others
  std::string grad_exchange;  // data parallel: "" (the parameters' dtype), "bf16" or "f16"
  bool sync_bn = false;       // data parallel: batch norm statistics over every GPU's rows
};

// Everything the trainer needs, with every default resolved and checked.
struct RunConfig {
  TrainOptions o;
  ops::DispatchMode mode = ops::DispatchMode::direct;
  std::string backend_note;  // why this backend ("best CPU backend built")
  std::string optimizer;
  double lr = 0, weight_decay = 0;
  // Data parallel (examples/train/main.cpp reads the launcher's environment): this
  // process's rank, the world size and its rank on this machine.
  int rank = 0, world = 1, local_rank = 0, local_world = 1;
};

// The CLI11 definition of every option, writing into `o`.
std::unique_ptr<CLI::App> make_cli(TrainOptions& o);

// Fills the defaults and validates: unknown dataset / model / dispatch mode /
// backend / precision / optimizer / schedule / init policy are strata::Error with a
// message naming what is supported.
RunConfig resolve(const TrainOptions& o);

// The best CPU backend of this build (the library's order: onednn, else openblas, else eigen, else reference).
std::string best_cpu_backend();

// --precision: "fp32" everywhere; "bf16"/"fp16" (mixed precision: half activations
// and conv/linear, f32 master weights, BN and loss; fp16 with dynamic loss scaling)
// on a backend with half convolutions, in every dispatch mode.
// `kinds`: the op kinds whose layers run in the half dtype (a GPT has no convolution: linear
// alone), checked by their layers' ops (a convolution's or a linear layer's forward and two
// gradients: a kind's other ops, such as bmm among the matrix products, do not count); `ops`: other
// ops the model runs in it (a GPT's attention and layer norm).
void check_precision(const std::string& precision, const std::string& backend,
                     std::initializer_list<ops::OpKind> kinds = {ops::OpKind::conv, ops::OpKind::linear},
                     std::initializer_list<ops::OpId> ops = {});

// --threads: the OpenMP / OpenBLAS pools size themselves from the environment when
// the libraries load, i.e. before main(). If the environment does not already ask
// for `threads`, this sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (and
// OMP_WAIT_POLICY=passive unless it is set) and re-executes the program (once) so the
// libraries see them. Returns only when nothing needs to
// change (or the re-exec failed, with a warning on stderr).
// Warns on stderr when `threads` exceeds available_cpus().
void apply_thread_count(int threads, char** argv);

// The CPUs this process may run on (its affinity mask).
int available_cpus();

}  // namespace strata::train
