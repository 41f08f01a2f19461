// conv2d as a contraction of the image-patch matrix with the filters (TensorFlow's
// classic CPU convolution; Chellapilla, Puri & Simard, 2006), in the input's layout:
//   NHWC: patches [positions, R*S*Cg] x filters [Kg, R*S*Cg]^T -> y [positions, Kg]
//   NCHW: filters [Kg, Cg*R*S] x patches [Cg*R*S, positions]   -> y [Kg, positions]
// The patch matrix of a block of output rows (about kBlockBytes, so it is still in L2
// when the contraction reads it) is copied from the input row by row, zeros where a
// patch reads the padding. Eigen's extract_image_patches builds the same matrix, but
// computes each element's source index (several divisions per packet), and slices of a
// padded input test the padding's bounds per value. A 1x1 stride-1 unpadded convolution
// contracts the input itself. Backward data contracts dy with the filters into columns
// and adds them back (col2im) with the same loops; backward weight contracts dy with
// the patches.
//
// With several threads and at least as many blocks, blocks are split over the pool's
// threads in contiguous ranges, each evaluated single-threaded (Eigen::DefaultDevice);
// otherwise one block at a time, its products on every thread (Eigen::ThreadPoolDevice). Weight
// gradients are summed per range, then over ranges in order: results depend on the
// thread count only.
#include <algorithm>

#include "strata/backends/cpu/elementwise.h"
#include "strata/backends/eigen/context.h"

namespace strata::backends {

using namespace strata::ops;  // the op table's argument types

using eigen::Dims;
using eigen::Index;
using eigen::Layout;
using eigen::Map;
using eigen::Output4;
using eigen::Packed4;
using eigen::visit_float;

namespace {

using Pair1 = Eigen::array<Eigen::IndexPair<Index>, 1>;
Pair1 pair(Index a, Index b) { return {Eigen::IndexPair<Index>(a, b)}; }

struct Geom {
  Index n, c, h, w, k, r, s, ho, wo, g, cg, kg;
  Index sh, sw, ph, pw, dh, dw;
  Layout l;
  bool pointwise() const { return r == 1 && s == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  Index rs() const { return r * s; }
  Index crs() const { return cg * r * s; }
  Index howo() const { return ho * wo; }
  Index hw() const { return h * w; }
};

Geom geometry(const TensorView& x, const TensorView& w, const TensorView& y, const Conv2dParams& p, Layout l) {
  Geom g{x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3], w.sizes[0], w.sizes[2], w.sizes[3], y.sizes[2], y.sizes[3],
         p.groups, 0, 0, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, l};
  g.cg = g.c / g.g;
  g.kg = g.k / g.g;
  return g;
}

// Images [n0, n0 + cnt), output rows [oh0, oh0 + nr) of each.
struct Block {
  Index n0, cnt, oh0, nr;
  Index positions(const Geom& g) const { return cnt * nr * g.wo; }
};

// Patch blocks of about kBlockBytes: several whole images when one image's patches are
// smaller (at most n / threads of them, so every thread gets one), else row blocks of
// one image. Measured on the 2-core VM (3x3, C=K=64, 56x56): 8-row blocks (1 MiB of
// patches) ran the convolution at 100-105 % of the whole-batch GEMM's rate, whole
// images (7 MiB) at 60 %.
constexpr Index kBlockBytes = Index{1} << 20;
struct Blocks {
  Index images, rows, tasks, per_task;
  Block at(const Geom& g, Index task, Index j) const {
    const Index n0 = task * images, oh0 = j * rows;
    return {n0, std::min(images, g.n - n0), oh0, std::min(rows, g.ho - oh0)};
  }
  Index count() const { return tasks * per_task; }
  Index patch_elems(const Geom& g) const { return images * rows * g.wo * g.crs(); }
};
Blocks blocks(const Geom& g, size_t elem, int threads) {
  const Index row_bytes = std::max<Index>(g.wo * g.crs() * static_cast<Index>(elem), 1);
  const Index image_bytes = row_bytes * g.ho;
  Blocks b{1, g.ho, 0, 1};
  if (image_bytes <= kBlockBytes) {
    const Index per_thread = (g.n + threads - 1) / threads;
    b.images = std::clamp<Index>(kBlockBytes / image_bytes, 1, std::max<Index>(per_thread, 1));
  } else if (!(g.pointwise() && g.l == Layout::nchw)) {  // NCHW 1x1: whole planes, read in place
    b.rows = std::clamp<Index>(kBlockBytes / row_bytes, 1, g.ho);
  }
  b.tasks = (g.n + b.images - 1) / b.images;
  b.per_task = std::max<Index>((g.ho + b.rows - 1) / b.rows, 1);
  return b;
}

// f(device, slot, first, last) over units [0, units): split over the pool's threads in
// contiguous ranges, each run on its own thread, when there are enough units; else
// all on the calling thread with the multi-threaded device.
template <class F>
void run_units(eigen::Context& ctx, Index units, F&& f) {
  const int slots = ctx.threads > 1 && units >= ctx.threads ? ctx.threads : 1;
  if (slots == 1) {
    f(ctx.device, 0, Index{0}, units);
    return;
  }
  eigen::for_slots(ctx, slots, [&](int i) {
    const eigen::Serial serial;
    f(serial, i, units * i / slots, units * (i + 1) / slots);
  });
}

// Whether block b's patch matrix is the input itself (no copy).
bool in_place(const Geom& g, const Block& b) {
  if (!g.pointwise()) return false;
  return g.l == Layout::nhwc ? g.g == 1 : (b.cnt == 1 && b.nr == g.ho);
}

// Of n outputs reading input index i*stride + off (i in [0, n)), those inside [0, size):
// [first, last). Before first and from last on they read the zero padding.
std::pair<Index, Index> inside(Index n, Index stride, Index off, Index size) {
  const Index first = std::min(n, off >= 0 ? Index{0} : (-off + stride - 1) / stride);
  const Index last = size - off <= 0 ? Index{0} : std::min(n, (size - off - 1) / stride + 1);
  return {first, std::max(first, last)};
}

// The patch matrix of block b, group gi, into buf: NHWC [cnt, nr, wo, R*S, Cg];
// NCHW [Cg, R*S, cnt, nr, wo]. Every patch row is a row of the input read at the
// stride (NCHW) or a run of Cg consecutive channels (NHWC): plain copies, zeros where it
// reads the padding, each value written once. Eigen's slice and stride evaluators
// computed a 4-d index per packet (per value at a stride) and took several times the
// contraction's time (docs/results/cpu_eigen.md). Runs on the calling thread.
template <class T>
void build_patches(const Geom& g, const T* x, const Block& b, Index gi, T* buf) {
  for (Index r = 0; r < g.r; ++r)
    for (Index s = 0; s < g.s; ++s) {
      const Index rs = r * g.s + s, row_off = b.oh0 * g.sh + r * g.dh - g.ph, col_off = s * g.dw - g.pw;
      const auto [ra, rb] = inside(b.nr, g.sh, row_off, g.h);
      const auto [ca, cb] = inside(g.wo, g.sw, col_off, g.w);
      for (Index i = 0; i < b.cnt; ++i) {
        const Index n = b.n0 + i;
        if (g.l == Layout::nchw) {
          for (Index c = 0; c < g.cg; ++c) {
            T* d = buf + ((c * g.rs() + rs) * b.cnt + i) * b.nr * g.wo;
            const T* src = x + ((n * g.c + gi * g.cg + c) * g.h) * g.w + col_off;
            for (Index oh = 0; oh < b.nr; ++oh, d += g.wo) {
              if (oh < ra || oh >= rb) {
                std::fill(d, d + g.wo, T(0));
                continue;
              }
              const T* row = src + (oh * g.sh + row_off) * g.w;
              std::fill(d, d + ca, T(0));
              if (g.sw == 1)
                std::copy(row + ca, row + cb, d + ca);
              else
                for (Index ow = ca; ow < cb; ++ow) d[ow] = row[ow * g.sw];
              std::fill(d + cb, d + g.wo, T(0));
            }
          }
        } else {
          for (Index oh = 0; oh < b.nr; ++oh)
            for (Index ow = 0; ow < g.wo; ++ow) {
              T* d = buf + (((i * b.nr + oh) * g.wo + ow) * g.rs() + rs) * g.cg;
              if (oh < ra || oh >= rb || ow < ca || ow >= cb) {
                std::fill(d, d + g.cg, T(0));
                continue;
              }
              const T* src = x + ((n * g.h + oh * g.sh + row_off) * g.w + ow * g.sw + col_off) * g.c + gi * g.cg;
              std::copy(src, src + g.cg, d);
            }
        }
      }
    }
}

// The adjoint of build_patches: acc (a zero-padded [images, Hp, Wp, C] or
// [images, C, Hp, Wp] buffer for the images from task_n0 on) += the columns in buf, as
// plain loops for the same reason.
template <class T>
void scatter_columns(const Geom& g, const T* buf, const Block& b, Index gi, Index task_n0, T* acc) {
  const Index hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw, i0 = b.n0 - task_n0;
  for (Index r = 0; r < g.r; ++r)
    for (Index s = 0; s < g.s; ++s) {
      const Index rs = r * g.s + s, row0 = b.oh0 * g.sh + r * g.dh, col0 = s * g.dw;
      for (Index i = 0; i < b.cnt; ++i) {
        if (g.l == Layout::nchw) {
          for (Index c = 0; c < g.cg; ++c) {
            const T* src = buf + ((c * g.rs() + rs) * b.cnt + i) * b.nr * g.wo;
            T* plane = acc + ((i0 + i) * g.c + gi * g.cg + c) * hp * wp;
            for (Index oh = 0; oh < b.nr; ++oh, src += g.wo) {
              T* d = plane + (row0 + oh * g.sh) * wp + col0;
              if (g.sw == 1)
                for (Index ow = 0; ow < g.wo; ++ow) d[ow] += src[ow];
              else
                for (Index ow = 0; ow < g.wo; ++ow) d[ow * g.sw] += src[ow];
            }
          }
        } else {
          for (Index oh = 0; oh < b.nr; ++oh)
            for (Index ow = 0; ow < g.wo; ++ow) {
              const T* src = buf + (((i * b.nr + oh) * g.wo + ow) * g.rs() + rs) * g.cg;
              T* d = acc + (((i0 + i) * hp + row0 + oh * g.sh) * wp + col0 + ow * g.sw) * g.c + gi * g.cg;
              for (Index c = 0; c < g.cg; ++c) d[c] += src[c];
            }
        }
      }
    }
}

// The patch matrix of block b, group gi: the input itself or buf filled.
template <class T>
Map<const T, 2> patch_matrix(const Geom& g, const T* x, const Block& b, Index gi, T* buf) {
  const Index pos = b.positions(g);
  if (in_place(g, b)) {
    if (g.l == Layout::nhwc) return Map<const T, 2>(x + (b.n0 * g.h + b.oh0) * g.w * g.c, pos, g.c);
    return Map<const T, 2>(x + (b.n0 * g.c + gi * g.cg) * g.hw(), g.cg, g.hw());
  }
  build_patches(g, x, b, gi, buf);
  return g.l == Layout::nhwc ? Map<const T, 2>(buf, pos, g.crs()) : Map<const T, 2>(buf, g.crs(), pos);
}

template <class T>
void conv_fwd(eigen::Context& ctx, const Conv2dFwdArgs& a) {
  const Layout l = eigen::layout_of(a.x);
  const Geom g = geometry(a.x, a.w, a.y, a.p, l);
  if (a.y.numel() == 0) return;
  const Packed4<T> x(ctx, a.x, l, "conv2d_fwd", "x"), w(ctx, a.w, l, "conv2d_fwd", "w");
  Output4<T> y(a.y, l, "conv2d_fwd", "y");
  const Blocks bl = blocks(g, sizeof(T), ctx.threads);
  run_units(ctx, bl.count(), [&](const auto& dev, int slot, Index u0, Index u1) {
    T* buf = ctx.slots[slot][0].get<T>(bl.patch_elems(g));
    for (Index u = u0; u < u1; ++u) {
      const Block b = bl.at(g, u / bl.per_task, u % bl.per_task);
      const Index pos = b.positions(g);
      for (Index gi = 0; gi < g.g; ++gi) {
        const Map<const T, 2> pm = patch_matrix(g, x.data(), b, gi, buf);
        const Map<const T, 2> wg(w.data() + gi * g.kg * g.crs(), g.kg, g.crs());
        if (l == Layout::nhwc) {
          Map<T, 2> yb(y.data() + (b.n0 * g.ho + b.oh0) * g.wo * g.k, pos, g.k);
          if (g.g == 1)
            yb.device(dev) = pm.contract(wg, pair(1, 1));
          else
            yb.slice(Dims<2>{0, gi * g.kg}, Dims<2>{pos, g.kg}).device(dev) = pm.contract(wg, pair(1, 1));
        } else if (b.cnt == 1) {
          Map<T, 2> yb(y.data() + (b.n0 * g.k + gi * g.kg) * g.howo(), g.kg, g.howo());
          if (b.nr == g.ho)
            yb.device(dev) = wg.contract(pm, pair(1, 0));
          else
            yb.slice(Dims<2>{0, b.oh0 * g.wo}, Dims<2>{g.kg, pos}).device(dev) = wg.contract(pm, pair(1, 0));
        } else {
          Map<T, 3>(y.data() + b.n0 * g.k * g.howo(), b.cnt, g.k, g.howo())
              .slice(Dims<3>{0, gi * g.kg, 0}, Dims<3>{b.cnt, g.kg, g.howo()})
              .device(dev) = wg.contract(pm, pair(1, 0))
                                 .reshape(Dims<3>{g.kg, b.cnt, g.howo()})
                                 .shuffle(Eigen::array<Index, 3>{1, 0, 2});
        }
      }
    }
  });
  if (a.b.defined) {
    const eigen::PackedIn<T, 1> bias(ctx, a.b, "conv2d_fwd", "b");
    const auto bm = bias.map();
    if (l == Layout::nhwc) {
      const Index m = g.n * g.howo();
      Map<T, 2>(y.data(), m, g.k).device(ctx.device) += bm.reshape(Dims<2>{1, g.k}).broadcast(Dims<2>{m, 1});
    } else {
      Map<T, 3>(y.data(), g.n, g.k, g.howo()).device(ctx.device) +=
          bm.reshape(Dims<3>{1, g.k, 1}).broadcast(Dims<3>{g.n, 1, g.howo()});
    }
  }
  y.finish(ctx);
}

// dy's rows of block b, group gi: NHWC [positions, Kg]; NCHW [Kg, positions] (one
// image), passed to f as an expression.
template <class T, class F>
void with_dy_block(const Geom& g, const T* dy, const Block& b, Index gi, F&& f) {
  const Index pos = b.positions(g);
  if (g.l == Layout::nhwc) {
    const Map<const T, 2> m(dy + (b.n0 * g.ho + b.oh0) * g.wo * g.k, pos, g.k);
    if (g.g == 1)
      f(m);
    else
      f(m.slice(Dims<2>{0, gi * g.kg}, Dims<2>{pos, g.kg}));
    return;
  }
  const Map<const T, 2> m(dy + (b.n0 * g.k + gi * g.kg) * g.howo(), g.kg, g.howo());
  if (b.nr == g.ho)
    f(m);
  else
    f(m.slice(Dims<2>{0, b.oh0 * g.wo}, Dims<2>{g.kg, pos}));
}

template <class T>
void conv_bwd_data(eigen::Context& ctx, const Conv2dBwdDataArgs& a) {
  const Layout l = eigen::layout_of(a.dy);
  const Geom g = geometry(a.dx, a.w, a.dy, a.p, l);
  Output4<T> dx(a.dx, l, "conv2d_bwd_data", "dx");
  if (a.dx.numel() == 0) return;
  const Packed4<T> dy(ctx, a.dy, l, "conv2d_bwd_data", "dy"), w(ctx, a.w, l, "conv2d_bwd_data", "w");
  const Blocks bl = blocks(g, sizeof(T), ctx.threads);
  const Index hp = g.h + 2 * g.ph, wp = g.w + 2 * g.pw;
  // Whole tasks per unit: the row blocks of an image add into the same rows of dx.
  run_units(ctx, bl.tasks, [&](const auto& dev, int slot, Index t0, Index t1) {
    T* cols = ctx.slots[slot][0].get<T>(bl.patch_elems(g));
    T* acc = ctx.slots[slot][1].get<T>(bl.images * g.c * hp * wp);
    for (Index task = t0; task < t1; ++task) {
      const Block whole = bl.at(g, task, 0);
      const Index tn0 = whole.n0, timages = whole.cnt;
      const bool direct = in_place(g, Block{tn0, timages, 0, g.ho});
      Map<T, 1> accm(acc, timages * g.c * hp * wp);
      if (!direct) accm.device(dev) = accm.constant(T(0));
      for (Index j = 0; j < bl.per_task; ++j) {
        const Block b = bl.at(g, task, j);
        const Index pos = b.positions(g);
        for (Index gi = 0; gi < g.g; ++gi) {
          const Map<const T, 2> wg(w.data() + gi * g.kg * g.crs(), g.kg, g.crs());
          if (l == Layout::nchw && b.cnt > 1) {  // dy of several images: [cnt, Kg, HoWo]
            auto dyc = Map<const T, 3>(dy.data() + b.n0 * g.k * g.howo(), b.cnt, g.k, g.howo())
                           .slice(Dims<3>{0, gi * g.kg, 0}, Dims<3>{b.cnt, g.kg, g.howo()});
            Map<T, 3>(cols, g.crs(), b.cnt, g.howo()).device(dev) = wg.contract(dyc, pair(0, 1));
          } else {
            with_dy_block(g, dy.data(), b, gi, [&](const auto& dyb) {
            if (direct && l == Layout::nhwc)
              Map<T, 2>(dx.data() + (b.n0 * g.h + b.oh0) * g.w * g.c, pos, g.c).device(dev) =
                  dyb.contract(wg, pair(1, 0));
            else if (direct)
              Map<T, 2>(dx.data() + (b.n0 * g.c + gi * g.cg) * g.hw(), g.cg, g.hw()).device(dev) =
                  wg.contract(dyb, pair(0, 0));
            else if (l == Layout::nhwc)
              Map<T, 2>(cols, pos, g.crs()).device(dev) = dyb.contract(wg, pair(1, 0));
            else
              Map<T, 2>(cols, g.crs(), pos).device(dev) = wg.contract(dyb, pair(0, 0));
            });
          }
          if (!direct) scatter_columns(g, cols, b, gi, tn0, acc);
        }
      }
      if (direct) continue;
      if (l == Layout::nhwc)
        Map<T, 4>(dx.data() + tn0 * g.hw() * g.c, timages, g.h, g.w, g.c).device(dev) =
            Map<const T, 4>(acc, timages, hp, wp, g.c)
                .slice(Dims<4>{0, g.ph, g.pw, 0}, Dims<4>{timages, g.h, g.w, g.c});
      else
        Map<T, 4>(dx.data() + tn0 * g.c * g.hw(), timages, g.c, g.h, g.w).device(dev) =
            Map<const T, 4>(acc, timages, g.c, hp, wp)
                .slice(Dims<4>{0, 0, g.ph, g.pw}, Dims<4>{timages, g.c, g.h, g.w});
    }
  });
  dx.finish(ctx);
}

// NCHW backward weight: both the patches [Cg*R*S, positions] and dy's rows [Kg, positions]
// hold the contracted dimension innermost, and Eigen's contraction packs such an operand
// one scalar at a time when it is its left operand (as packets when right). dy's rows,
// the smaller operand, are transposed per block instead, and dw^T = patches x dy^T keeps
// the patches on the right. Not for 1x1 convolutions, whose whole planes are contracted in
// place and whose transposed dy would not stay in L2 (docs/results/cpu_eigen.md).
bool transposes_dy(const Geom& g) { return g.l == Layout::nchw && !g.pointwise() && g.kg < g.crs(); }

// dy's rows of block b, group gi (NCHW), as dst [cnt * nr * wo, Kg]: read along rows,
// written down columns.
template <class T>
void transpose_dy(const Geom& g, const T* dy, const Block& b, Index gi, T* dst) {
  const Index pos = b.nr * g.wo;
  for (Index i = 0; i < b.cnt; ++i)
    for (Index k = 0; k < g.kg; ++k) {
      const T* src = dy + ((b.n0 + i) * g.k + gi * g.kg + k) * g.howo() + b.oh0 * g.wo;
      T* d = dst + i * pos * g.kg + k;
      for (Index p = 0; p < pos; ++p) d[p * g.kg] = src[p];
    }
}

template <class T>
void conv_bwd_weight(eigen::Context& ctx, const Conv2dBwdWeightArgs& a) {
  const Layout l = eigen::layout_of(a.x);
  const Geom g = geometry(a.x, a.dw, a.dy, a.p, l);
  Output4<T> dw(a.dw, l, "conv2d_bwd_weight", "dw");
  const Index wsize = g.k * g.crs();
  if (wsize == 0) return;
  const Packed4<T> x(ctx, a.x, l, "conv2d_bwd_weight", "x"), dy(ctx, a.dy, l, "conv2d_bwd_weight", "dy");
  const Blocks bl = blocks(g, sizeof(T), ctx.threads);
  const Index units = g.n == 0 ? 0 : bl.count();
  const int slots = ctx.threads > 1 && units >= ctx.threads ? ctx.threads : 1;
  // Partial sums per slot: dw's layout, or per group [Cg*R*S, Kg] when dy is transposed.
  const bool transposed = transposes_dy(g);
  const Index patch_elems = (bl.patch_elems(g) + 15) / 16 * 16;  // dy^T after the patches, 64-byte aligned
  const Index dyt_elems = transposed ? bl.images * bl.rows * g.wo * g.kg : 0;
  run_units(ctx, units, [&](const auto& dev, int slot, Index u0, Index u1) {
    T* buf = ctx.slots[slot][0].get<T>(patch_elems + dyt_elems);
    T* part = slots == 1 && !transposed ? dw.data() : ctx.slots[slot][1].get<T>(wsize);
    Map<T, 1>(part, wsize).device(dev) = Map<T, 1>(part, wsize).constant(T(0));
    for (Index u = u0; u < u1; ++u) {
      const Block b = bl.at(g, u / bl.per_task, u % bl.per_task);
      for (Index gi = 0; gi < g.g; ++gi) {
        const Map<const T, 2> pm = patch_matrix(g, x.data(), b, gi, buf);
        if (transposed) {
          transpose_dy(g, dy.data(), b, gi, buf + patch_elems);
          Map<T, 2>(part + gi * g.kg * g.crs(), g.crs(), g.kg).device(dev) +=
              pm.contract(Map<const T, 2>(buf + patch_elems, b.positions(g), g.kg), pair(1, 0));
          continue;
        }
        Map<T, 2> dwg(part + gi * g.kg * g.crs(), g.kg, g.crs());
        if (l == Layout::nchw && b.cnt > 1) {
          auto dyc = Map<const T, 3>(dy.data() + b.n0 * g.k * g.howo(), b.cnt, g.k, g.howo())
                         .slice(Dims<3>{0, gi * g.kg, 0}, Dims<3>{b.cnt, g.kg, g.howo()});
          const Eigen::array<Eigen::IndexPair<Index>, 2> both{Eigen::IndexPair<Index>(0, 1),
                                                              Eigen::IndexPair<Index>(2, 2)};
          dwg.device(dev) += dyc.contract(pm.reshape(Dims<3>{g.crs(), b.cnt, g.howo()}), both);
          continue;
        }
        with_dy_block(g, dy.data(), b, gi, [&](const auto& dyb) {
          if (l == Layout::nhwc)
            dwg.device(dev) += dyb.contract(pm, pair(0, 0));
          else
            dwg.device(dev) += dyb.contract(pm, pair(1, 1));
        });
      }
    }
  });
  // Slot 0's partial sums, plus the others in slot order.
  T* sum = transposed ? ctx.slots[0][1].get<T>(wsize) : dw.data();
  if (slots > 1) {
    Map<T, 1> out(sum, wsize);
    if (!transposed) out.device(ctx.device) = Map<const T, 1>(ctx.slots[0][1].get<T>(wsize), wsize);
    for (int i = 1; i < slots; ++i) out.device(ctx.device) += Map<const T, 1>(ctx.slots[i][1].get<T>(wsize), wsize);
  }
  if (transposed)
    for (Index gi = 0; gi < g.g; ++gi)
      Map<T, 2>(dw.data() + gi * g.kg * g.crs(), g.kg, g.crs()).device(ctx.device) =
          Map<const T, 2>(sum + gi * g.kg * g.crs(), g.crs(), g.kg).shuffle(Eigen::array<Index, 2>{1, 0});
  dw.finish(ctx);
}

}  // namespace

// The inference epilogue as a second pass over y, the CPU backends' one loop for it.
void EigenBackend::conv2d_fwd(const Conv2dFwdArgs& a) {
  visit_float("conv2d_fwd", a.x.dtype, [&](auto t) {
    conv_fwd<decltype(t)>(*ctx_, loops::without_epilogue(a));
    if (loops::has_epilogue(a)) loops::epilogue<decltype(t)>(a);
  });
}
void EigenBackend::conv2d_bwd_data(const Conv2dBwdDataArgs& a) {
  visit_float("conv2d_bwd_data", a.dy.dtype, [&](auto t) { conv_bwd_data<decltype(t)>(*ctx_, a); });
}
void EigenBackend::conv2d_bwd_weight(const Conv2dBwdWeightArgs& a) {
  visit_float("conv2d_bwd_weight", a.x.dtype, [&](auto t) { conv_bwd_weight<decltype(t)>(*ctx_, a); });
}

// db[k] = sum of dy over images and positions.
void EigenBackend::conv2d_bwd_bias(const Conv2dBwdBiasArgs& a) {
  visit_float("conv2d_bwd_bias", a.dy.dtype, [&](auto t) {
    using T = decltype(t);
    const Layout l = eigen::layout_of(a.dy);
    const Index n = a.dy.sizes[0], k = a.dy.sizes[1], hw = a.dy.sizes[2] * a.dy.sizes[3];
    const Packed4<T> dy(*ctx_, a.dy, l, "conv2d_bwd_bias", "dy");
    eigen::PackedOut<T, 1> db(a.db, "conv2d_bwd_bias", "db");
    if (l == Layout::nhwc)
      db.map().device(ctx_->device) = dy.map().reshape(Dims<2>{n * hw, k}).sum(Eigen::array<Index, 1>{0});
    else
      db.map().device(ctx_->device) = dy.map().reshape(Dims<3>{n, k, hw}).sum(Eigen::array<Index, 2>{0, 2});
    db.finish(*ctx_);
  });
}

}  // namespace strata::backends
