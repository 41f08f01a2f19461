// The tensor API on GPU tensors: operators and methods run on the default dispatcher of the
// tensor's device (the cuda backend), forward and backward, against the same program on CPU
// tensors in f32.
#include <vector>

#include "cuda_test_util.h"
#include "strata/autograd/default_dispatch.h"
#include "strata/autograd/functions.h"

namespace strata::testing {
namespace {

class CudaTensorApi : public CudaTest {};

// One small program of the API's everyday calls, its output and the leaves' gradients.
std::vector<Tensor> program(const Tensor& a_in, const Tensor& b_in, const Tensor& index) {
  Tensor a = a_in.clone(), b = b_in.clone();
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor c = (a * 2.0 + b.unsqueeze(0)).matmul(a.t());                       // broadcast, matmul
  const Tensor s = (c.softmax(-1) * c).sum(1, true) + c.log_softmax(0).amax(0).unsqueeze(1);  // reductions
  const Tensor r = cat({s, a.index_select(0, index).sum(1, true)}, 0).sigmoid();  // indexing, cat
  const Tensor loss = (r * r).mean() + where(a > 0.0, a, -a).sum() * 0.1;
  loss.backward();
  return {loss, a.grad(), b.grad()};
}

TEST_F(CudaTensorApi, TheSameProgramOnTheGpuMatchesTheCpu) {
  EXPECT_EQ(autograd::default_dispatch(Device::cuda(), DType::f32).backend_name(), "cuda");
  const Tensor a = random_tensor({5, 7}, DType::f32, 1), b = random_tensor({7}, DType::f32, 2);
  const Tensor index = Tensor::from_vector<int64_t>({4, 0, 4}, {3});
  const std::vector<Tensor> cpu = program(a, b, index);
  const std::vector<Tensor> gpu = program(to_gpu(a), to_gpu(b), to_gpu(index));
  const char* names[] = {"loss", "grad a", "grad b"};
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(gpu[i].device().type, DeviceType::cuda) << names[i];
    STRATA_EXPECT_CLOSE(to_cpu(gpu[i]), cpu[i], 1e-4, names[i]);
  }
}

}  // namespace
}  // namespace strata::testing
