#include "resnet50_support.h"

#include <cuda_runtime.h>

#include <random>
#include <stdexcept>

namespace strata::bench {

using json = nlohmann::json;

void cuda_check(int e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(e)));
}

StepTimer::StepTimer(bool cuda, void* stream, backends::Backend& be) : cuda_(cuda), be_(be), stream_(stream) {
  if (cuda_) {
    cudaEvent_t s = nullptr, e = nullptr;
    cuda_check(cudaEventCreate(&s), "cudaEventCreate");
    cuda_check(cudaEventCreate(&e), "cudaEventCreate");
    start_ = s;
    end_ = e;
  }
}

StepTimer::~StepTimer() {
  if (cuda_) {
    cudaEventDestroy(static_cast<cudaEvent_t>(start_));
    cudaEventDestroy(static_cast<cudaEvent_t>(end_));
  }
}

void StepTimer::begin() {
  t0_ = Clock::now();
  if (cuda_)
    cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_)),
               "cudaEventRecord(start)");
}

void StepTimer::enqueued() {
  t1_ = Clock::now();
  if (cuda_)
    cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(end_), static_cast<cudaStream_t>(stream_)),
               "cudaEventRecord(end)");
}

std::array<double, 3> StepTimer::finish() {
  float device = 0;
  if (cuda_) {
    cuda_check(cudaEventSynchronize(static_cast<cudaEvent_t>(end_)), "cudaEventSynchronize");
    cuda_check(cudaEventElapsedTime(&device, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(end_)),
               "cudaEventElapsedTime");
  } else {
    be_.synchronize();
  }
  const auto t2 = Clock::now();
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const double wall = ms(t2 - t0_);
  return {cuda_ ? static_cast<double>(device) : wall, ms(t1_ - t0_), wall};
}

Tensor random_images(int64_t batch, int64_t resolution, MemoryFormat fmt, uint64_t seed) {
  Tensor host = Tensor::empty(Shape{batch, 3, resolution, resolution}, DType::f32, Device::cpu(), fmt);
  std::mt19937_64 gen(seed);
  float* p = host.data<float>();
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-53 * 3.4 - 1.7);
  return host;
}

Tensor random_labels(int64_t n, uint64_t seed, int64_t classes) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int64_t>(gen() % static_cast<uint64_t>(classes));
  Tensor t = Tensor::empty(Shape{n}, DType::i64);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

json device_info(bool cuda) {
  json d;
  if (!cuda) return {{"name", "cpu"}};
  cudaDeviceProp p{};
  int rt = 0, drv = 0;
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    d["name"] = p.name;
    d["sm_count"] = p.multiProcessorCount;
    d["memory_bytes"] = p.totalGlobalMem;
    d["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  }
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) == cudaSuccess) d["pci_bus_id"] = bus;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  d["cuda_runtime"] = rt;
  d["cuda_driver"] = drv;
  return d;
}

std::unique_ptr<nn::Model> make_resnet50(ops::DispatchMode mode, const std::string& backend,
                                         std::optional<MemoryFormat> fmt,
                                         std::optional<DType> compute, bool fuse, std::optional<bool> fold,
                                         std::optional<bool> s2d_stem, std::optional<bool> winograd) {
  nn::ResNetConfig rc;
  rc.depth = 50;
  rc.num_classes = kImageNetClasses;
  rc.fuse_eval = fuse;
  rc.fuse_train = fuse;
  rc.fold_batch_norm = fold;
  rc.space_to_depth_stem = s2d_stem;
  rc.winograd = winograd;
  nn::ModelOptions mo;
  mo.borrowed_results = true;  // measured: no copy of the planned outputs (read before the next step)
  mo.memory_format = fmt;
  mo.compute_dtype = compute;
  return nn::make_resnet(rc, mode, backend, mo);
}

nn::OptimizerConfig sgd_config(double lr) {
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::sgd;
  oc.lr = lr;
  oc.momentum = 0.9;
  return oc;
}

Step make_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer* opt) {
  return [&model, x, labels, opt](bool read) -> std::function<double()> {
    if (opt != nullptr) {
      nn::StepResult s = model.train_step(x, labels, *opt);
      if (!read) return {};
      return [s] { return s.loss.item(); };
    }
    Tensor y = model.predict(x);
    if (!read) return {};
    return [y] {
      double sum = 0;
      for (float v : y.to_vector<float>()) sum += v;
      return sum;
    };
  };
}

}  // namespace strata::bench
