// The cuda backend at and past its libraries' limits: activations whose elements span more
// than cuDNN's 32-bit descriptors hold run as several calls along the batch; a sample too
// large for any call, and a request larger than the card, are clear errors that leave the
// process able to go on.
#include <cmath>
#include <span>
#include <string>

#include "cuda_test_util.h"
#include "strata/core/allocator.h"
#include "strata/core/factories.h"
#include "strata/nn/nn.h"

namespace strata::testing {
namespace {

class CudaLimits : public CudaTest {};

// 65 identical samples of 8 x 2048 x 2048: 2^25 elements each, 2.18e9 together (past 2^31 - 1),
// so cuDNN sees them in two calls (64 + 1). Identical samples make every sample's result the
// one-sample result, and the weight gradient 65 times it.
constexpr int64_t kSamples = 65, kChannels = 8, kSide = 2048;

Tensor gpu_empty(const Shape& s) { return Tensor::empty(s, DType::f32, Device::cuda()); }

// Sample n of a device tensor, on the CPU.
Tensor sample(const Tensor& t, int64_t n) { return to_cpu(t.narrow(0, n, 1)); }

TEST_F(CudaLimits, ConvPoolAndBatchNormPastCudnnsLimitsRunAlongTheBatch) {
  const Shape one_shape{1, kChannels, kSide, kSide}, big{kSamples, kChannels, kSide, kSide};
  const Pair one = rand_pair(one_shape, 91);
  const Pair w = rand_pair({kChannels, kChannels, 3, 3}, 92);
  Tensor x;
  try {
    x = gpu_empty(big);
  } catch (const Error& e) {
    GTEST_SKIP() << "needs about 40 GB of GPU memory: " << e.what();
  }
  for (int64_t n = 0; n < kSamples; ++n) copy_into(one.gpu, x.narrow(0, n, 1));
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const int64_t checked[] = {0, 63, 64};  // first, last of the first call, the second call's

  // conv2d forward, backward-data, backward-weight.
  Tensor y = gpu_empty(big), y1 = gpu_empty(one_shape);
  be().conv2d_fwd({x, w.gpu, {}, y, p});
  be().conv2d_fwd({one.gpu, w.gpu, {}, y1, p});
  const Tensor y1c = to_cpu(y1);
  for (int64_t n : checked) STRATA_EXPECT_CLOSE(sample(y, n), y1c, kTolGemm, "conv2d_fwd sample " + std::to_string(n));
  {
    Tensor dx = gpu_empty(big), dx1 = gpu_empty(one_shape);
    be().conv2d_bwd_data({y, w.gpu, dx, p});
    be().conv2d_bwd_data({y1, w.gpu, dx1, p});
    const Tensor dx1c = to_cpu(dx1);
    for (int64_t n : checked)
      STRATA_EXPECT_CLOSE(sample(dx, n), dx1c, kTolGemm, "conv2d_bwd_data sample " + std::to_string(n));
  }
  Tensor dw = gpu_empty({kChannels, kChannels, 3, 3}), dw1 = gpu_empty({kChannels, kChannels, 3, 3});
  be().conv2d_bwd_weight({x, y, dw, p});
  be().conv2d_bwd_weight({one.gpu, y1, dw1, p});
  Tensor want = to_cpu(dw1);
  for (float& v : std::span(want.data<float>(), static_cast<size_t>(want.numel()))) v *= kSamples;
  STRATA_EXPECT_CLOSE(to_cpu(dw), want, kTolGemm, "conv2d_bwd_weight: the pieces' gradients summed");
  y = Tensor();

  // max pooling, forward and backward.
  {
    Pool2dParams pp;
    const Shape pooled{kSamples, kChannels, kSide / 2, kSide / 2}, pooled1{1, kChannels, kSide / 2, kSide / 2};
    Tensor py = gpu_empty(pooled), py1 = gpu_empty(pooled1);
    be().max_pool2d_fwd({x, py, pp});
    be().max_pool2d_fwd({one.gpu, py1, pp});
    const Tensor py1c = to_cpu(py1);
    for (int64_t n : checked) STRATA_EXPECT_CLOSE(sample(py, n), py1c, 0.0, "max_pool2d_fwd sample " + std::to_string(n));
    Tensor dx = gpu_empty(big), dx1 = gpu_empty(one_shape);
    be().max_pool2d_bwd({x, py, py, dx, pp});
    be().max_pool2d_bwd({one.gpu, py1, py1, dx1, pp});
    const Tensor dx1c = to_cpu(dx1);
    for (int64_t n : checked)
      STRATA_EXPECT_CLOSE(sample(dx, n), dx1c, 0.0, "max_pool2d_bwd sample " + std::to_string(n));
  }

  // Batch norm in training mode cannot be split (its statistics span the batch): past cuDNN's
  // limits strata's own kernels run it. Identical samples have one sample's statistics.
  {
    auto param = [&](double v) {
      Tensor t = gpu_empty({kChannels});
      be().fill({t, v});
      return t;
    };
    Tensor by = gpu_empty(big), by1 = gpu_empty(one_shape);
    be().batch_norm_fwd({x, param(1.0), param(0.0), param(0.0), param(1.0), by, param(0.0), param(0.0)});
    be().batch_norm_fwd({one.gpu, param(1.0), param(0.0), param(0.0), param(1.0), by1, param(0.0), param(0.0)});
    const Tensor by1c = to_cpu(by1);
    for (int64_t n : checked)
      STRATA_EXPECT_CLOSE(sample(by, n), by1c, kTolReduction, "batch_norm_fwd sample " + std::to_string(n));
  }
}

TEST_F(CudaLimits, ASamplePastCudnnsLimitIsAClearError) {
  // One sample of 1 x 48000 x 48000 spans 2.3e9 elements: no split along the batch helps. The
  // check reads only sizes and strides, so the views need no memory of that size.
  const Tensor small = gpu_empty({16});
  ops::TensorView x = small, y = small, w = small;
  x.sizes = y.sizes = Shape{1, 1, 48000, 48000};
  x.strides = y.strides = Shape{int64_t{48000} * 48000, int64_t{48000} * 48000, 48000, 1};
  w.sizes = Shape{1, 1, 1, 1};
  w.strides = Shape{1, 1, 1, 1};
  try {
    be().conv2d_fwd({x, w, {}, y, Conv2dParams{}});
    FAIL() << "a 2.3e9-element sample was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("conv2d_fwd"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[1,1,48000,48000]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2147483647"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(".cpp"), std::string::npos) << "no source location is the user's business: " << msg;
  }
}

TEST_F(CudaLimits, LibraryErrorsNameTheCallNotTheBuildPath) {
  // A pooling window of 0 x 0: the backend passes it on (the front end would have refused it),
  // cudnnSetPooling2dDescriptor refuses it.
  Pool2dParams pp;
  pp.kernel_h = pp.kernel_w = 0;
  const Tensor x = gpu_empty({1, 1, 4, 4}), y = gpu_empty({1, 1, 4, 4});
  try {
    be().max_pool2d_fwd({x, y, pp});
    FAIL() << "cuDNN accepted a 0 x 0 pooling window";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cudnn: cudnn"), std::string::npos) << "names the library function: " << msg;
    EXPECT_EQ(msg.find('/'), std::string::npos) << "no build path: " << msg;
    EXPECT_EQ(msg.find("ctx."), std::string::npos) << "not the call's argument list: " << msg;
  }
}

TEST_F(CudaLimits, OutOfMemoryInATrainingStepLeavesTheProcessUsable) {
  // ResNet-50 training at batch 128 and 1024 x 1024 needs about 230 GB: more than any H100 or H200.
  nn::ResNetConfig c;
  c.num_classes = 10;
  auto model = nn::make_resnet(c, ops::DispatchMode::static_call, "cuda");
  Allocator& a = allocator_for(Device::cuda());
  const size_t before = a.stats().current_bytes;
  {
    const Tensor x = zeros({128, 3, 1024, 1024});
    const Tensor labels = zeros({128}, DType::i64);
    try {
      model->forward_loss(x, labels);
      model->backward();
      FAIL() << "a 230 GB training step ran";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
      EXPECT_NE(msg.find("in use"), std::string::npos) << "says what is held: " << msg;
    }
  }
  // What the failed step held is released...
  EXPECT_LE(a.stats().current_bytes, before + (size_t{1} << 30)) << "activations of the failed step stay alive";
  // ...and a smaller batch trains in the same process.
  const Tensor x = random_tensor({2, 3, 64, 64}, DType::f32, 31);
  const Tensor labels = random_labels(2, 10, 32);
  const nn::StepResult r = model->forward_loss(x, labels);
  model->backward();
  EXPECT_TRUE(std::isfinite(r.loss.item())) << r.loss.item();
}

}  // namespace
}  // namespace strata::testing
