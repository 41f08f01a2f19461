// The launchers a training step's program adds to kernels.h and kernels.cu (launchers.h): strata's
// loss, fill, dropout, per-channel and column sums, SGD's multi-tensor update, batch norm epilogue and masking, and
// the backward of global average pooling and of space-to-depth (their source is strata's, the
// "cuda_train_kernels" blocks), launched with the geometry strata's cuda backend chose and reported
// where it orders a sum (block sizes, the blocks along a summed dimension).
#include "strata/codegen/cuda/launchers.h"

namespace strata::codegen::cuda {

const std::vector<Launcher>& train_launchers() {
  static const std::vector<Launcher> table = {
      {"flat", {}, {}, "", R"cg(
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
)cg"},
      {"relu_bwd", {"binary"}, {"binary"}, R"cg(
// y = y > 0 ? dy : 0 (ReLU's backward from its output) over n dense elements.
void relu_bwd(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n);
)cg", R"cg(
void relu_bwd(cudaStream_t s, const float* y, const float* dy, float* dx, int64_t n) {
  binary<ReluBwdOp<float>>(s, y, dy, dx, n, "relu_bwd");
}
)cg"},
      {"fill", {"fill"}, {"flat"}, R"cg(
// y[i] = value over n dense elements.
void fill(cudaStream_t s, float* y, int64_t n, double value);
)cg", R"cg(
void fill(cudaStream_t s, float* y, int64_t n, double value) {
  each<1>(s, n, FillFn<float>{y, static_cast<float>(value)}, "fill");
}
)cg"},
      {"advance_offset", {}, {}, "", R"cg(
// The program's own bookkeeping: dropout's counter advances on the device, as strata's layer
// advances it on the host, so that a captured step draws the next mask at every launch.
__global__ void advance_offset_kernel(int64_t* rng, int64_t n) { rng[1] += n; }
)cg"},
      {"dropout", {"dropout"}, {"flat", "advance_offset"}, R"cg(
// Dropout over n dense elements with strata's counter hash, {seed, offset} read from rng (device
// memory, so that a captured step draws the next mask at every launch); then rng's offset += n.
void dropout(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t* rng, double p,
             double inv_keep);
)cg", R"cg(
void dropout(cudaStream_t s, const float* x, float* y, uint8_t* mask, int64_t n, int64_t* rng, double p,
             double inv_keep) {
  each<3>(s, n, DropoutFn<float>{x, y, mask, 0, 0, p, inv_keep, rng}, "dropout");
  advance_offset_kernel<<<1, 1, 0, s>>>(rng, n);
  check_launch("advance_offset_kernel");
}
)cg"},
      {"dropout_bwd", {"dropout"}, {"flat"}, R"cg(
void dropout_bwd(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx, int64_t n, double inv_keep);
)cg", R"cg(
void dropout_bwd(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx, int64_t n, double inv_keep) {
  each<3>(s, n, DropoutBwdFn<float>{dy, mask, dx, inv_keep}, "dropout_bwd");
}
)cg"},
      {"softmax_xent", {"softmax_xent", "chunk8"}, {}, R"cg(
// Softmax cross-entropy's mean over rows (logits [rows, cols], strides xs0, xs1), strata's kernels
// with `threads` a row; row_loss: rows doubles of scratch, bad: one word of scratch.
void softmax_xent(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t xs0, int64_t xs1,
                  const int64_t* labels, int64_t ls, int64_t ignore_index, float* lse, int64_t lse_s, float* loss,
                  int threads, double* row_loss, unsigned long long* bad);
)cg", R"cg(
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
)cg"},
      {"softmax_xent_bwd", {"softmax_xent", "chunk8"}, {}, R"cg(
// Its gradient: dx = (softmax - onehot) * dloss / kept rows; g: one double of scratch.
void softmax_xent_bwd(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t xs0, int64_t xs1,
                      const float* lse, int64_t lse_s, const int64_t* labels, int64_t ls, int64_t ignore_index,
                      const float* dloss, double* g, float* dx, int64_t ds0, int64_t ds1);
)cg", R"cg(
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
)cg"},
      {"column_sums", {"column_sums"}, {}, R"cg(
// out[c * os] = the sum of x's column c (x [rows, cols], rows ld apart), in `splits` blocks of
// `chunk` rows, 16-byte packs if vec; partial: splits * cols doubles of scratch.
void column_sums(cudaStream_t s, const float* x, int64_t rows, int64_t cols, int64_t ld, bool vec, int64_t splits,
                 int64_t chunk, double* partial, float* out, int64_t os);
)cg", R"cg(
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
)cg"},
      {"channel_sums", {"channel_sums"}, {}, R"cg(
// out[c * os] = the sum over every other dimension of x at channel c: the channel's stride cstride,
// the rest of x as nd coalesced dimensions (sizes, strides); `splits` blocks of `chunk` elements per
// channel, `inner` when channels are innermost. partial: splits * channels doubles, sums: channels.
void channel_sums(cudaStream_t s, const float* x, int64_t channels, int64_t cstride, int nd, const int64_t* sizes,
                  const int64_t* strides, bool inner, int64_t splits, int64_t chunk, double* partial, double* sums,
                  float* out, int64_t os);
)cg", R"cg(
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
)cg"},
      {"sgd_list", {"sgd", "sgd_list"}, {}, R"cg(
// One parameter's operands in an SGD list: n dense f32 elements each, buf null without momentum.
struct SgdEntry {
  float* p;
  const float* g;
  float* buf;
  int64_t n;
};
// SGD (momentum, weight decay, Nesterov) over the entries' parameters in strata's multi-tensor launches.
void sgd_list(cudaStream_t s, std::initializer_list<SgdEntry> entries, double lr, double momentum,
              double weight_decay, bool nesterov);
)cg", R"cg(
void sgd_list(cudaStream_t s, std::initializer_list<SgdEntry> entries, double lr, double momentum,
              double weight_decay, bool nesterov) {
  // strata's lists (launch_lists): no loss scaling, no run-time learning rate.
  ops::SgdOptions opt;
  opt.lr = lr;
  opt.momentum = momentum;
  opt.weight_decay = weight_decay;
  opt.nesterov = nesterov;
  const SgdEntry* e = entries.begin();
  launch_lists<SgdTensor>(
      s, entries.size(), opt, nullptr,
      [&](size_t i) -> std::optional<SgdTensor> {
        if (e[i].n == 0) return std::nullopt;
        return SgdTensor{e[i].p, e[i].g, e[i].buf, nullptr, e[i].n, 0};
      },
      [] { check_launch("multi_tensor_kernel (SGD)"); });
}
)cg"},
      {"batch_norm_epilogue", {"batch_norm"}, {}, R"cg(
// y = relu?(y + z) in place over n dense elements (z null: no residual), mask's bit i set where
// y[i] > 0 after it (mask null: none): strata's epilogue after cuDNN's batch norm forward.
void batch_norm_epilogue(cudaStream_t s, float* y, const float* z, uint8_t* mask, int64_t n, bool relu);
)cg", R"cg(
void batch_norm_epilogue(cudaStream_t s, float* y, const float* z, uint8_t* mask, int64_t n, bool relu) {
  if (n <= 0) return;
  // A warp per 32 values, grid-strided: the grid changes which warp writes a mask byte, not its bits.
  bn_epilogue_kernel<float><<<grid(n), kThreads, 0, s>>>(y, z, mask, n, relu);
  check_launch("bn_epilogue_kernel");
}
)cg"},
      {"batch_norm_mask", {"batch_norm"}, {}, R"cg(
// g[i] = mask's bit i ? dy[i] : 0 over n dense elements: strata's masking before cuDNN's batch norm
// backward of a fused forward.
void batch_norm_mask(cudaStream_t s, const float* dy, const uint8_t* mask, float* g, int64_t n);
)cg", R"cg(
void batch_norm_mask(cudaStream_t s, const float* dy, const uint8_t* mask, float* g, int64_t n) {
  if (n <= 0) return;
  bn_mask_grad_kernel<float><<<grid(n), kThreads, 0, s>>>(dy, mask, g, n);
  check_launch("bn_mask_grad_kernel");
}
)cg"},
      {"global_avg_pool_bwd", {"global_avg_pool_bwd"}, {"strided_of"}, R"cg(
// dx [N, C, H, W] (strides sx) = dy[n, c] (strides sy) / (H W): global average pooling's backward.
void global_avg_pool_bwd(cudaStream_t s, const float* dy, const int64_t (&sy)[2], float* dx,
                         const int64_t (&sizes)[4], const int64_t (&sx)[4]);
)cg", R"cg(
void global_avg_pool_bwd(cudaStream_t s, const float* dy, const int64_t (&sy)[2], float* dx,
                         const int64_t (&sizes)[4], const int64_t (&sx)[4]) {
  // dy broadcast over the plane with zero strides, as strata indexes it; 1 / (H W) in float, as strata's.
  const int64_t n = sizes[0] * sizes[1] * sizes[2] * sizes[3];
  if (n == 0) return;
  const int64_t dys[4] = {sy[0], sy[1], 0, 0};
  const Strided<2> st = strided_of<2>(4, n, sizes, {dys, sx});
  const float inv = 1.f / static_cast<float>(sizes[2] * sizes[3]);
  elementwise_kernel<2, GapBwdFn<float>><<<grid(n), kThreads, 0, s>>>(st, GapBwdFn<float>{dy, dx, inv});
  check_launch("elementwise_kernel (global_avg_pool_bwd)");
}
)cg"},
      {"space_to_depth_bwd", {"space_to_depth", "space_to_depth_bwd"}, {"s2d_geom"}, R"cg(
// dx [N, C, H, W] = each element from its block position in dy [N, K, Ho, Wo], zero where none holds
// it: space_to_depth's adjoint (the gradient of the weight of ResNet's stem on the GPU).
void space_to_depth_bwd(cudaStream_t s, const float* dy, const int64_t (&ys)[4], const int64_t (&yst)[4], float* dx,
                        const int64_t (&xs)[4], const int64_t (&xst)[4], int block, int pad_h, int pad_w);
)cg", R"cg(
void space_to_depth_bwd(cudaStream_t s, const float* dy, const int64_t (&ys)[4], const int64_t (&yst)[4], float* dx,
                        const int64_t (&xs)[4], const int64_t (&xst)[4], int block, int pad_h, int pad_w) {
  const int64_t total = xs[0] * xs[1] * xs[2] * xs[3];
  if (total == 0) return;
  const auto g = s2d_geom(xs, xst, ys, yst, block, pad_h, pad_w, xst[1] == 1 && xs[1] > 1);
  depth_to_space_kernel<float, uint64_t><<<grid(total), kThreads, 0, s>>>(dy, dx, g, static_cast<uint64_t>(total));
  check_launch("depth_to_space_kernel");
}
)cg"},
  };
  return table;
}

}  // namespace strata::codegen::cuda
