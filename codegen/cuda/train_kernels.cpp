// The launchers a training step's program adds to kernels.h and kernels.cu: strata's loss, fill,
// dropout, per-channel and column sums and SGD update kernels (their source is strata's, the
// "cuda_train_kernels" blocks), launched with the geometry strata's cuda backend chose and
// reported where it orders a sum (block sizes, the blocks along a summed dimension).
#include "strata/codegen/cuda/snippets.h"
#include "strata/codegen/cuda/support_files.h"

namespace strata::codegen::cuda {

std::string train_kernels_h() {
  return R"cg(
// ---- a training step's kernels ----
// y = y > 0 ? dy : 0 (ReLU's backward from its output) over n dense elements.
void relu_bwd(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n);
// y[i] = value over n dense elements.
void fill(cudaStream_t s, float* y, int64_t n, double value);
// Dropout over n dense elements with strata's counter hash, {seed, offset} read from rng (device
// memory, so that a captured step draws the next mask at every launch); then rng's offset += n.
void dropout(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t* rng, double p,
             double inv_keep);
void dropout_bwd(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx, int64_t n, double inv_keep);
// Softmax cross-entropy's mean over rows (logits [rows, cols], strides xs0, xs1), strata's kernels
// with `threads` a row; row_loss: rows doubles of scratch, bad: one word of scratch.
void softmax_xent(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t xs0, int64_t xs1,
                  const int64_t* labels, int64_t ls, int64_t ignore_index, float* lse, int64_t lse_s, float* loss,
                  int threads, double* row_loss, unsigned long long* bad);
// Its gradient: dx = (softmax - onehot) * dloss / kept rows; g: one double of scratch.
void softmax_xent_bwd(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t xs0, int64_t xs1,
                      const float* lse, int64_t lse_s, const int64_t* labels, int64_t ls, int64_t ignore_index,
                      const float* dloss, double* g, float* dx, int64_t ds0, int64_t ds1);
// out[c * os] = the sum of x's column c (x [rows, cols], rows ld apart), in `splits` blocks of
// `chunk` rows, 16-byte packs if vec; partial: splits * cols doubles of scratch.
void column_sums(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t ld, bool vec, int64_t splits,
                 int64_t chunk, double* partial, float* out, int64_t os);
// out[c * os] = the sum over every other dimension of x at channel c: the channel's stride cstride,
// the rest of x as nd coalesced dimensions (sizes, strides); `splits` blocks of `chunk` elements per
// channel, `inner` when channels are innermost. partial: splits * channels doubles, sums: channels.
void channel_sums(cudaStream_t s, const float* x, int64_t channels, int64_t cstride, int nd, const int64_t* sizes,
                  const int64_t* strides, bool inner, int64_t splits, int64_t chunk, double* partial, double* sums,
                  float* out, int64_t os);
// SGD (momentum, weight decay, Nesterov) over n dense elements; buf null without momentum.
void sgd(cudaStream_t s, float* p, const float* g, float* buf, int64_t n, double lr, double momentum,
         double weight_decay, bool nesterov);
)cg";
}

std::string train_kernels_cu() {
  return std::string(R"cg(
// ---- a training step's kernels: strata's ("cuda_train_kernels" blocks) and their launchers ----
namespace strata_code {
namespace ops {
)cg") + k_cuda_train_ops + k_dropout_rng + "}  // namespace ops\n" + k_cuda_train_kernels + R"cg(
}  // namespace strata_code

namespace {

using namespace strata_code;

// One flat dimension of n elements, each operand of stride 1 (dense operands coalesce to it).
template <int N>
Strided<N> flat(int64_t n) {
  Strided<N> st;
  st.nd = 1;
  st.n = n;
  st.sizes[0] = n;
  for (int i = 0; i < N; ++i) st.strides[i][0] = 1;
  return st;
}

template <int N, class F>
void each(cudaStream_t s, int64_t n, const F& f, const char* what) {
  if (n <= 0) return;
  elementwise_kernel<N, F><<<grid(n), kThreads, 0, s>>>(flat<N>(n), f);
  check_launch(what);
}

// The program's own bookkeeping: dropout's counter advances on the device, as strata's layer
// advances it on the host, so that a captured step draws the next mask at every launch.
__global__ void advance_offset_kernel(int64_t* rng, int64_t n) { rng[1] += n; }

// SGD's element, through strata's update (sgd_update); no loss scaling: a factor of 1.
struct SgdElement {
  float* p;
  const float* g;
  float* buf;
  ops::SgdOptions opt;
  __device__ void operator()(int64_t, const int64_t* o) const {
    sgd_update(p[o[0]], g[o[0]], buf ? &buf[o[0]] : nullptr, opt, opt.lr, 1.0);
  }
};

}  // namespace

void relu_bwd(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n) {
  binary<ReluBwdOp<float>>(s, y, dy, dx, n, "relu_bwd");
}

void fill(cudaStream_t s, float* y, int64_t n, double value) {
  each<1>(s, n, FillFn<float>{y, static_cast<float>(value)}, "fill");
}

void dropout(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t* rng, double p,
             double inv_keep) {
  each<3>(s, n, DropoutFn<float>{x, y, mask, 0, 0, p, inv_keep, rng}, "dropout");
  advance_offset_kernel<<<1, 1, 0, s>>>(rng, n);
  check_launch("advance_offset_kernel");
}

void dropout_bwd(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx, int64_t n, double inv_keep) {
  each<3>(s, n, DropoutBwdFn<float>{dy, mask, dx, inv_keep}, "dropout_bwd");
}

void softmax_xent(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t xs0, int64_t xs1,
                  const int64_t* labels, int64_t ls, int64_t ignore_index, float* lse, int64_t lse_s, float* loss,
                  int threads, double* row_loss, unsigned long long* bad) {
  softmax_xent_fwd_kernel<float><<<static_cast<unsigned>(rows), threads, 0, s>>>(
      x, cols, xs0, xs1, chunk8_vectorizable<float>(x, xs0, xs1), labels, ls, ignore_index, lse, lse_s, row_loss,
      bad);
  check_launch("softmax_xent_fwd_kernel");
  softmax_xent_mean_kernel<<<1, kReduceThreads, 0, s>>>(row_loss, labels, ls, rows, ignore_index, loss);
  check_launch("softmax_xent_mean_kernel");
}

void softmax_xent_bwd(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t xs0, int64_t xs1,
                      const float* lse, int64_t lse_s, const int64_t* labels, int64_t ls, int64_t ignore_index,
                      const float* dloss, double* g, float* dx, int64_t ds0, int64_t ds1) {
  softmax_xent_grad_scale_kernel<<<1, kReduceThreads, 0, s>>>(labels, ls, rows, ignore_index, dloss, g);
  check_launch("softmax_xent_grad_scale_kernel");
  softmax_xent_bwd_kernel<float><<<static_cast<unsigned>(rows), kXentBwdThreads, 0, s>>>(
      x, xs0, xs1, chunk8_vectorizable<float>(x, xs0, xs1), lse, lse_s, labels, ls, cols, ignore_index, g, dx, ds0,
      ds1, chunk8_vectorizable<float>(dx, ds0, ds1));
  check_launch("softmax_xent_bwd_kernel");
}

void column_sums(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t ld, bool vec, int64_t splits,
                 int64_t chunk, double* partial, float* out, int64_t os) {
  constexpr int V = 4;
  const int64_t tiles = (cols + 32 * V - 1) / (32 * V);
  const dim3 blocks(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  if (vec)
    column_partial_kernel<float, true><<<blocks, dim3(32, 8), 0, s>>>(x, rows, cols, ld, chunk, partial);
  else
    column_partial_kernel<float, false><<<blocks, dim3(32, 8), 0, s>>>(x, rows, cols, ld, chunk, partial);
  check_launch("column_partial_kernel");
  column_final_kernel<float><<<static_cast<unsigned>((cols * 32 + 255) / 256), 256, 0, s>>>(
      partial, static_cast<int>(splits), cols, out, os);
  check_launch("column_final_kernel");
}

void channel_sums(cudaStream_t s, const float* x, int64_t channels, int64_t cstride, int nd, const int64_t* sizes,
                  const int64_t* strides, bool inner, int64_t splits, int64_t chunk, double* partial, double* sums,
                  float* out, int64_t os) {
  if (channels == 0) return;
  ChannelIndex<1> idx;
  idx.rest.nd = nd;
  idx.rest.n = 1;
  for (int d = 0; d < nd; ++d) {
    idx.rest.sizes[d] = sizes[d];
    idx.rest.strides[0][d] = strides[d];
    idx.rest.n *= sizes[d];
  }
  idx.cstride[0] = cstride;
  ChannelGeometry g;
  g.channels = channels;
  g.rest = idx.rest.n;
  g.splits = static_cast<int>(splits);
  g.chunk = chunk;
  g.inner = inner;
  const ChannelValue<float> f{x};
  const unsigned splits_u = static_cast<unsigned>(splits);
  if (inner)
    channel_reduce_inner_kernel<1, 1, ChannelValue<float>>
        <<<dim3(static_cast<unsigned>((channels + 31) / 32), splits_u), dim3(32, 8), 0, s>>>(idx, g, f, partial);
  else
    channel_reduce_outer_kernel<1, 1, ChannelValue<float>>
        <<<dim3(static_cast<unsigned>(channels), splits_u), 256, 0, s>>>(idx, g, f, partial);
  check_launch("channel_reduce kernel");
  channel_reduce_final_kernel<1><<<static_cast<unsigned>((channels + 255) / 256), 256, 0, s>>>(partial, g, sums);
  check_launch("channel_reduce_final_kernel");
  store_sums_kernel<float><<<static_cast<unsigned>((channels + 255) / 256), 256, 0, s>>>(sums, channels, 1.0, out,
                                                                                         os);
  check_launch("store_sums_kernel");
}

void sgd(cudaStream_t s, float* p, const float* g, float* buf, int64_t n, double lr, double momentum,
         double weight_decay, bool nesterov) {
  ops::SgdOptions opt;
  opt.lr = lr;
  opt.momentum = momentum;
  opt.weight_decay = weight_decay;
  opt.nesterov = nesterov;
  each<1>(s, n, SgdElement{p, g, buf, opt}, "sgd");
}
)cg";
}

}  // namespace strata::codegen::cuda
