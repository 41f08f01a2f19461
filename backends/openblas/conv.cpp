// conv2d on OpenBLAS: im2col then one GEMM per group (Chellapilla et al., "High
// performance convolutional neural networks for document processing", 2006, as in
// Caffe). Large output planes run one image per GEMM (backward data in blocks of
// output rows whose columns fit in L2); small planes (late ResNet stages, small resolutions) put a chunk
// of images side by side in the column matrix so the GEMM stays wide, then move the
// result to NCHW. A 1x1, stride-1, unpadded
// convolution of one image is already a GEMM over its [C, H*W] matrix and skips
// im2col. Backward data is GEMM then col2im; backward weight accumulates one GEMM
// per chunk in image order. With several threads, large planes split whole images over
// the threads instead (by_image_threads). Chunking depends on shapes and the thread
// count only: results are deterministic for a given OMP_NUM_THREADS.
#include <algorithm>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/openblas/gemm.h"
#include "strata/backends/cpu/reduce.h"
#include "strata/backends/openblas/openblas_backend.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using loops::ContiguousIn;
using loops::ContiguousOut;
using loops::visit_float;
using openblas::gemm;

namespace {

struct ConvGeom {
  int64_t n, c, h, w;   // input (or dx)
  int64_t k, r, s;      // weight [k, c/g, r, s]
  int64_t ho, wo;       // output (or dy)
  int64_t g, cg, kg;    // groups, channels and filters per group
  Conv2dParams p;

  bool direct_1x1() const {
    return r == 1 && s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  }
  int64_t crs() const { return cg * r * s; }
  int64_t hw() const { return h * w; }
  int64_t howo() const { return ho * wo; }
};

ConvGeom geometry(const TensorView& x, const TensorView& w, const TensorView& y, const Conv2dParams& p) {
  ConvGeom g{};
  g.n = x.sizes[0];
  g.c = x.sizes[1];
  g.h = x.sizes[2];
  g.w = x.sizes[3];
  g.k = w.sizes[0];
  g.r = w.sizes[2];
  g.s = w.sizes[3];
  g.ho = y.sizes[2];
  g.wo = y.sizes[3];
  g.g = p.groups;
  g.cg = g.c / g.g;
  g.kg = g.k / g.g;
  g.p = p;
  return g;
}

// The output columns [ow0, ow1) whose input column ow*stride + off lies inside [0, w).
void valid_cols(int64_t off, int64_t stride, int64_t w, int64_t wo, int64_t& ow0, int64_t& ow1) {
  ow0 = off >= 0 ? 0 : (-off + stride - 1) / stride;
  ow1 = (w - 1 - off) < 0 ? 0 : (w - 1 - off) / stride + 1;
  ow0 = std::min(ow0, wo);
  ow1 = std::clamp(ow1, ow0, wo);
}

// Images per GEMM: one when an output plane alone makes a wide enough GEMM, else
// enough to reach kMinGemmCols columns (all of them for 1x1 planes).
constexpr int64_t kMinGemmCols = 1024;
int64_t images_per_gemm(const ConvGeom& g) {
  if (g.howo() >= kMinGemmCols) return 1;
  return std::clamp<int64_t>((kMinGemmCols + g.howo() - 1) / std::max<int64_t>(g.howo(), 1), 1, std::max<int64_t>(g.n, 1));
}

// Output rows per block of backward data when one image is one GEMM: about
// kColBlockBytes of columns, so col2im reads them from L2 right after the GEMM wrote
// them (at least kMinBlockCols columns, to keep the GEMM wide). Only backward data gains
// from it; forward and backward weight run whole planes (docs/tuning.md).
constexpr int64_t kColBlockBytes = int64_t{1} << 20;
constexpr int64_t kMinBlockCols = 256;
template <class T>
int64_t rows_per_block(const ConvGeom& g) {
  const int64_t cols = std::max(kMinBlockCols, kColBlockBytes / std::max<int64_t>(g.crs() * sizeof(T), 1));
  return std::clamp<int64_t>(cols / std::max<int64_t>(g.wo, 1), 1, std::max<int64_t>(g.ho, 1));
}

// im2col splits over OpenMP threads by input channel (each channel owns its rows of
// the columns, so the result does not depend on the split) once a call writes this
// many elements. Serial, at two threads, the im2col of ResNet-50's 3x3 conv2_x layer
// (N=8, 64 channels, 56x56) held the forward at 67-78% of the same GEMM's GFLOP/s on
// the loaded 2-core VM; split, 90-100% (bench/libtorch). col2im is not split: backward
// data runs it per block of rows between many short GEMMs, and splitting it too made
// the two-thread backward slower (OpenBLAS's threads spin between GEMMs and compete
// with OpenMP's). Large planes with several threads avoid both: see by_image_threads.
constexpr int64_t kParallelCols = 32768;

// x: one image's group [cg, h, w] -> col rows [cg*r*s] holding output rows
// [oh0, oh1) (wo values each), row stride ld.
template <class T>
void im2col(const T* x, const ConvGeom& g, int64_t oh0, int64_t oh1, T* col, int64_t ld) {
  const Conv2dParams& p = g.p;
#pragma omp parallel for schedule(static) if (g.crs() * (oh1 - oh0) * g.wo >= kParallelCols)
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        T* row = col + ((c * g.r + r) * g.s + s) * ld;
        const int64_t off = s * p.dilation_w - p.pad_w;
        int64_t ow0, ow1;
        valid_cols(off, p.stride_w, g.w, g.wo, ow0, ow1);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* out = row + (oh - oh0) * g.wo;
          const int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
          if (ih < 0 || ih >= g.h) {
            std::fill(out, out + g.wo, T(0));
            continue;
          }
          const T* in = x + (c * g.h + ih) * g.w + off;
          std::fill(out, out + ow0, T(0));
          if (p.stride_w == 1) {
            std::memcpy(out + ow0, in + ow0, static_cast<size_t>(ow1 - ow0) * sizeof(T));
          } else {
            for (int64_t ow = ow0; ow < ow1; ++ow) out[ow] = in[ow * p.stride_w];
          }
          std::fill(out + ow1, out + g.wo, T(0));
        }
      }
}

// The adjoint of im2col: dx [cg, h, w] += col rows for output rows [oh0, oh1).
template <class T>
void col2im(const T* col, const ConvGeom& g, int64_t oh0, int64_t oh1, T* dx, int64_t ld) {
  const Conv2dParams& p = g.p;
  for (int64_t c = 0; c < g.cg; ++c)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) {
        const T* row = col + ((c * g.r + r) * g.s + s) * ld;
        const int64_t off = s * p.dilation_w - p.pad_w;
        int64_t ow0, ow1;
        valid_cols(off, p.stride_w, g.w, g.wo, ow0, ow1);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + r * p.dilation_h;
          if (ih < 0 || ih >= g.h) continue;
          const T* in = row + (oh - oh0) * g.wo;
          T* out = dx + (c * g.h + ih) * g.w + off;
          for (int64_t ow = ow0; ow < ow1; ++ow) out[ow * p.stride_w] += in[ow];
        }
      }
}

// Moves the [k, howo] planes of `nb` images (channels c0.., image stride `img`)
// between NCHW and a [k, nb*howo] matrix.
template <class T>
void planes_to_matrix(const T* src, int64_t img, int64_t k, int64_t nb, int64_t howo, T* m) {
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t i = 0; i < nb; ++i)
      std::memcpy(m + (kk * nb + i) * howo, src + i * img + kk * howo, static_cast<size_t>(howo) * sizeof(T));
}
template <class T>
void matrix_to_planes(const T* m, int64_t img, int64_t k, int64_t nb, int64_t howo, T* dst) {
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t i = 0; i < nb; ++i)
      std::memcpy(dst + i * img + kk * howo, m + (kk * nb + i) * howo, static_cast<size_t>(howo) * sizeof(T));
}

// The backend's scratch for one call: im2col columns and, for a chunk of images,
// the GEMM's side-by-side output (or gathered dy).
template <class T>
struct Work {
  int64_t nb;    // images per GEMM
  int64_t rows;  // output rows per im2col block (one image per GEMM)
  bool direct;   // one image per GEMM, 1x1 stride 1 unpadded: no im2col
  T* cols;
  T* mat;
};
template <class T>
Work<T> work(const ConvGeom& g, bool row_blocks, loops::Scratch& cols, loops::Scratch& mat) {
  Work<T> w{images_per_gemm(g), row_blocks ? rows_per_block<T>(g) : g.ho, false, nullptr, nullptr};
  w.direct = w.nb == 1 && g.direct_1x1();
  if (w.nb > 1) w.rows = g.ho;
  if (!w.direct) w.cols = cols.get<T>(g.crs() * w.nb * w.rows * g.wo);
  if (w.nb > 1) w.mat = mat.get<T>(g.kg * w.nb * g.howo());
  return w;
}

// With several threads and large planes, images split over OpenMP threads, each with
// its own columns and a single-threaded GEMM, instead of im2col and a GEMM that each
// use every thread in turn. On two idle cores (3x3, C=K=64, 56x56, N=8) the in-turn way
// reached 65-74% of one large sgemm's GFLOP/s: im2col is memory-bound and no faster
// split, and OpenBLAS's threads spin against OpenMP's between the two. Per-image work
// is what the one-thread path already does at 92-98%. Each image's output is computed
// the same way whatever the thread count.
int by_image_threads(const ConvGeom& g) {
#ifdef _OPENMP
  const int t = omp_get_max_threads();
  if (t > 1 && images_per_gemm(g) == 1 && !g.direct_1x1() && g.n >= 2 && g.crs() * g.howo() >= kParallelCols)
    return static_cast<int>(std::min<int64_t>(t, g.n));
#else
  (void)g;
#endif
  return 1;
}

// OpenBLAS at one thread for the scope (its pool is shared by the whole process).
class OneBlasThread {
 public:
  OneBlasThread() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~OneBlasThread() { openblas_set_num_threads(saved_); }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_;
};

// f(image, thread, columns) for every image, images split over nt OpenMP threads in
// contiguous ranges (schedule(static)), each thread with its own one-image im2col
// columns from cs, OpenBLAS held at one thread meanwhile.
template <class T, class F>
void for_each_image(const ConvGeom& g, int nt, loops::Scratch& cs, F f) {
  const int64_t per = g.crs() * g.howo();
  T* cols = cs.get<T>(nt * per);
  OneBlasThread one;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
  for (int64_t i = 0; i < g.n; ++i) f(i, omp_get_thread_num(), cols + omp_get_thread_num() * per);
#else
  (void)nt;
  for (int64_t i = 0; i < g.n; ++i) f(i, 0, cols);
#endif
}

// Image chunks in turn, each im2col and GEMM using every thread (one thread, small
// planes, or the 1x1 direct path).
template <class T>
void conv_fwd_in_turn(const ConvGeom& g, const Work<T>& wk, const T* x, const T* w, T* y) {
  for (int64_t n0 = 0; n0 < g.n; n0 += wk.nb) {
    const int64_t cnt = std::min(wk.nb, g.n - n0);
    for (int64_t gi = 0; gi < g.g; ++gi) {
      const T* xg = x + (n0 * g.c + gi * g.cg) * g.hw();
      const T* wg = w + gi * g.kg * g.crs();
      T* yg = y + (n0 * g.k + gi * g.kg) * g.howo();
      if (wk.direct) {
        gemm(false, false, g.kg, g.howo(), g.crs(), T(1), wg, g.crs(), xg, g.howo(), T(0), yg, g.howo());
      } else if (cnt == 1) {
        for (int64_t oh0 = 0; oh0 < g.ho; oh0 += wk.rows) {
          const int64_t oh1 = std::min(g.ho, oh0 + wk.rows), n = (oh1 - oh0) * g.wo;
          im2col(xg, g, oh0, oh1, wk.cols, n);
          gemm(false, false, g.kg, n, g.crs(), T(1), wg, g.crs(), wk.cols, n, T(0), yg + oh0 * g.wo, g.howo());
        }
      } else {
        const int64_t ld = cnt * g.howo();
        for (int64_t i = 0; i < cnt; ++i) im2col(xg + i * g.c * g.hw(), g, 0, g.ho, wk.cols + i * g.howo(), ld);
        gemm(false, false, g.kg, ld, g.crs(), T(1), wg, g.crs(), wk.cols, ld, T(0), wk.mat, ld);
        matrix_to_planes(wk.mat, g.k * g.howo(), g.kg, cnt, g.howo(), yg);
      }
    }
  }
}

template <class T>
void conv_fwd(const Conv2dFwdArgs& a, loops::Scratch& cs, loops::Scratch& ms) {
  const ConvGeom g = geometry(a.x, a.w, a.y, a.p);
  ContiguousIn<T> x(a.x), w(a.w);
  ContiguousOut<T> y(a.y);
  if (const int nt = by_image_threads(g); nt > 1) {
    for_each_image<T>(g, nt, cs, [&](int64_t n, int, T* c) {
      for (int64_t gi = 0; gi < g.g; ++gi) {
        const T* xg = x.get() + (n * g.c + gi * g.cg) * g.hw();
        im2col(xg, g, 0, g.ho, c, g.howo());
        gemm(false, false, g.kg, g.howo(), g.crs(), T(1), w.get() + gi * g.kg * g.crs(), g.crs(), c, g.howo(), T(0),
             y.get() + (n * g.k + gi * g.kg) * g.howo(), g.howo());
      }
    });
  } else {
    conv_fwd_in_turn<T>(g, work<T>(g, /*row_blocks=*/false, cs, ms), x.get(), w.get(), y.get());
  }
  if (a.b.defined) {
    const T* b = a.b.ptr<const T>();
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t k = 0; k < g.k; ++k) {
        T* plane = y.get() + (n * g.k + k) * g.howo();
        const T bk = b[k * a.b.strides[0]];
        for (int64_t i = 0; i < g.howo(); ++i) plane[i] += bk;
      }
  }
  y.finish();
}

template <class T>
void conv_bwd_data(const Conv2dBwdDataArgs& a, loops::Scratch& cs, loops::Scratch& ms) {
  const ConvGeom g = geometry(a.dx, a.w, a.dy, a.p);
  ContiguousIn<T> dy(a.dy), w(a.w);
  ContiguousOut<T> dx(a.dx);
  if (const int nt = by_image_threads(g); nt > 1) {
    for_each_image<T>(g, nt, cs, [&](int64_t n, int, T* c) {
      for (int64_t gi = 0; gi < g.g; ++gi) {
        T* dxg = dx.get() + (n * g.c + gi * g.cg) * g.hw();
        std::fill(dxg, dxg + g.cg * g.hw(), T(0));
        gemm(true, false, g.crs(), g.howo(), g.kg, T(1), w.get() + gi * g.kg * g.crs(), g.crs(),
             dy.get() + (n * g.k + gi * g.kg) * g.howo(), g.howo(), T(0), c, g.howo());
        col2im(c, g, 0, g.ho, dxg, g.howo());
      }
    });
    dx.finish();
    return;
  }
  const Work<T> wk = work<T>(g, /*row_blocks=*/true, cs, ms);
  for (int64_t n0 = 0; n0 < g.n; n0 += wk.nb) {
    const int64_t cnt = std::min(wk.nb, g.n - n0);
    for (int64_t gi = 0; gi < g.g; ++gi) {
      const T* dyg = dy.get() + (n0 * g.k + gi * g.kg) * g.howo();
      const T* wg = w.get() + gi * g.kg * g.crs();
      T* dxg = dx.get() + (n0 * g.c + gi * g.cg) * g.hw();
      if (wk.direct) {
        gemm(true, false, g.cg, g.howo(), g.kg, T(1), wg, g.crs(), dyg, g.howo(), T(0), dxg, g.hw());
        continue;
      }
      for (int64_t i = 0; i < cnt; ++i) std::fill(dxg + i * g.c * g.hw(), dxg + i * g.c * g.hw() + g.cg * g.hw(), T(0));
      if (cnt == 1) {
        for (int64_t oh0 = 0; oh0 < g.ho; oh0 += wk.rows) {
          const int64_t oh1 = std::min(g.ho, oh0 + wk.rows), n = (oh1 - oh0) * g.wo;
          gemm(true, false, g.crs(), n, g.kg, T(1), wg, g.crs(), dyg + oh0 * g.wo, g.howo(), T(0), wk.cols, n);
          col2im(wk.cols, g, oh0, oh1, dxg, n);
        }
      } else {
        const int64_t ld = cnt * g.howo();
        planes_to_matrix(dyg, g.k * g.howo(), g.kg, cnt, g.howo(), wk.mat);
        gemm(true, false, g.crs(), ld, g.kg, T(1), wg, g.crs(), wk.mat, ld, T(0), wk.cols, ld);
        for (int64_t i = 0; i < cnt; ++i) col2im(wk.cols + i * g.howo(), g, 0, g.ho, dxg + i * g.c * g.hw(), ld);
      }
    }
  }
  dx.finish();
}

template <class T>
void conv_bwd_weight(const Conv2dBwdWeightArgs& a, loops::Scratch& cs, loops::Scratch& ms) {
  const ConvGeom g = geometry(a.x, a.dw, a.dy, a.p);
  ContiguousIn<T> x(a.x), dy(a.dy);
  ContiguousOut<T> dw(a.dw);
  if (g.n == 0) std::fill(dw.get(), dw.get() + a.dw.numel(), T(0));
  if (const int nt = by_image_threads(g); nt > 1) {
    // Each thread sums its images' weight gradients (a contiguous range of images,
    // schedule(static)), then the partial sums are added in thread order.
    const int64_t wsize = g.k * g.crs();
    T* part = ms.get<T>(nt * wsize);
    std::fill(part, part + nt * wsize, T(0));
    for_each_image<T>(g, nt, cs, [&](int64_t n, int t, T* c) {
      for (int64_t gi = 0; gi < g.g; ++gi) {
        im2col(x.get() + (n * g.c + gi * g.cg) * g.hw(), g, 0, g.ho, c, g.howo());
        gemm(false, true, g.kg, g.crs(), g.howo(), T(1), dy.get() + (n * g.k + gi * g.kg) * g.howo(), g.howo(), c,
             g.howo(), T(1), part + t * wsize + gi * g.kg * g.crs(), g.crs());
      }
    });
    T* out = dw.get();
    std::copy(part, part + wsize, out);
    for (int t = 1; t < nt; ++t)
      for (int64_t i = 0; i < wsize; ++i) out[i] += part[t * wsize + i];
    dw.finish();
    return;
  }
  const Work<T> wk = work<T>(g, /*row_blocks=*/false, cs, ms);
  for (int64_t n0 = 0; n0 < g.n; n0 += wk.nb) {
    const int64_t cnt = std::min(wk.nb, g.n - n0);
    for (int64_t gi = 0; gi < g.g; ++gi) {
      const T* xg = x.get() + (n0 * g.c + gi * g.cg) * g.hw();
      const T* dyg = dy.get() + (n0 * g.k + gi * g.kg) * g.howo();
      T* dwg = dw.get() + gi * g.kg * g.crs();
      if (wk.direct) {
        gemm(false, true, g.kg, g.crs(), g.howo(), T(1), dyg, g.howo(), xg, g.howo(), n0 == 0 ? T(0) : T(1), dwg,
             g.crs());
      } else if (cnt == 1) {
        for (int64_t oh0 = 0; oh0 < g.ho; oh0 += wk.rows) {
          const int64_t oh1 = std::min(g.ho, oh0 + wk.rows), n = (oh1 - oh0) * g.wo;
          im2col(xg, g, oh0, oh1, wk.cols, n);
          gemm(false, true, g.kg, g.crs(), n, T(1), dyg + oh0 * g.wo, g.howo(), wk.cols, n,
               n0 == 0 && oh0 == 0 ? T(0) : T(1), dwg, g.crs());
        }
      } else {
        const int64_t ld = cnt * g.howo();
        for (int64_t i = 0; i < cnt; ++i) im2col(xg + i * g.c * g.hw(), g, 0, g.ho, wk.cols + i * g.howo(), ld);
        planes_to_matrix(dyg, g.k * g.howo(), g.kg, cnt, g.howo(), wk.mat);
        gemm(false, true, g.kg, g.crs(), ld, T(1), wk.mat, ld, wk.cols, ld, n0 == 0 ? T(0) : T(1), dwg, g.crs());
      }
    }
  }
  dw.finish();
}

}  // namespace

// The inference epilogue as a second pass over y: the GEMM writes its tiles through
// cblas, which takes no per-element hook.
void OpenBlasBackend::conv2d_fwd(const Conv2dFwdArgs& a) {
  visit_float(kName, "conv2d_fwd", a.x.dtype, [&](auto t) {
    conv_fwd<decltype(t)>(loops::without_epilogue(a), col_, mat_);
    if (loops::has_epilogue(a)) loops::epilogue<decltype(t)>(a);
  });
}
void OpenBlasBackend::conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  visit_float(kName, "conv2d_bwd_data", a.dy.dtype, [&](auto t) { conv_bwd_data<decltype(t)>(a, col_, mat_); });
}
void OpenBlasBackend::conv2d_bwd_weight(const Conv2dBwdWeightArgs& a) {
  visit_float(kName, "conv2d_bwd_weight", a.x.dtype, [&](auto t) { conv_bwd_weight<decltype(t)>(a, col_, mat_); });
}
void OpenBlasBackend::conv2d_bwd_bias(const Conv2dBwdBiasArgs& a) {
  visit_float(kName, "conv2d_bwd_bias", a.dy.dtype, [&](auto t) { loops::conv_bias_grad<decltype(t)>(a.dy, a.db); });
}

}  // namespace strata::backends
