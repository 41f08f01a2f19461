#include "strata/data/transforms.h"

#include <algorithm>

#include "strata/core/error.h"
#include "strata/data/random.h"
#include "strata/data/resize.h"

namespace strata::data {

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

Shape transformed_shape(const Shape& chw, const std::vector<Transform>& ts) {
  STRATA_CHECK(chw.size() == 3 && chw[0] > 0 && chw[1] > 0 && chw[2] > 0,
               "transforms: expected a positive [C,H,W] image shape, got ", chw.str());
  Shape s = chw;
  for (size_t i = 0; i < ts.size(); ++i) {
    std::visit(Overloaded{
                   [&](const Normalize& n) {
                     const auto c = static_cast<size_t>(s[0]);
                     STRATA_CHECK((n.mean.size() == c || n.mean.size() == 1) && n.std.size() == n.mean.size(),
                                  "Normalize (transform ", i, "): ", n.mean.size(), " means and ", n.std.size(),
                                  " stds for an image of shape ", s.str(), " (need ", c, " or 1 of each)");
                     for (float v : n.std)
                       STRATA_CHECK(v > 0, "Normalize (transform ", i, "): std must be positive, got ", v);
                   },
                   [&](const PadRandomCrop& p) {
                     const int64_t h = p.height ? p.height : s[1], w = p.width ? p.width : s[2];
                     STRATA_CHECK(p.padding >= 0 && h > 0 && w > 0 && h <= s[1] + 2 * p.padding &&
                                      w <= s[2] + 2 * p.padding,
                                  "PadRandomCrop (transform ", i, "): cannot crop ", h, "x", w, " from ", s.str(),
                                  " padded by ", p.padding);
                     s[1] = h;
                     s[2] = w;
                   },
                   [&](const RandomHorizontalFlip& f) {
                     STRATA_CHECK(f.p >= 0 && f.p <= 1, "RandomHorizontalFlip (transform ", i,
                                  "): p must be in [0,1], got ", f.p);
                   },
                   [&](const Resize& r) {
                     STRATA_CHECK(r.height > 0 && r.width > 0, "Resize (transform ", i, "): size ", r.height, "x",
                                  r.width, " must be positive");
                     s[1] = r.height;
                     s[2] = r.width;
                   },
               },
               ts[i]);
  }
  return s;
}

void apply_transforms(const std::vector<Transform>& ts, std::vector<float>& img, Shape& chw, std::mt19937_64& rng,
                      std::vector<float>& scratch) {
  for (const Transform& t : ts) {
    const int64_t C = chw[0], H = chw[1], W = chw[2];
    std::visit(Overloaded{
                   [&](const Normalize& n) {
                     for (int64_t c = 0; c < C; ++c) {
                       const size_t k = n.mean.size() == 1 ? 0 : static_cast<size_t>(c);
                       const float m = n.mean[k], sd = n.std[k];  // divide, as torchvision does
                       float* p = img.data() + c * H * W;
                       for (int64_t j = 0; j < H * W; ++j) p[j] = (p[j] - m) / sd;
                     }
                   },
                   [&](const PadRandomCrop& p) {
                     const int64_t oh = p.height ? p.height : H, ow = p.width ? p.width : W;
                     // Offsets into the padded image; the crop's top-left in source coordinates
                     // is (oy - padding, ox - padding).
                     const int64_t oy = static_cast<int64_t>(uniform_below(rng, H + 2 * p.padding - oh + 1));
                     const int64_t ox = static_cast<int64_t>(uniform_below(rng, W + 2 * p.padding - ow + 1));
                     scratch.assign(static_cast<size_t>(C * oh * ow), 0.0f);
                     for (int64_t c = 0; c < C; ++c)
                       for (int64_t y = 0; y < oh; ++y) {
                         const int64_t sy = y + oy - p.padding;
                         if (sy < 0 || sy >= H) continue;
                         const int64_t x0 = std::max<int64_t>(0, p.padding - ox);
                         const int64_t x1 = std::min<int64_t>(ow, W + p.padding - ox);
                         if (x0 >= x1) continue;
                         std::copy_n(img.data() + (c * H + sy) * W + (x0 + ox - p.padding), x1 - x0,
                                     scratch.data() + (c * oh + y) * ow + x0);
                       }
                     img.swap(scratch);
                     chw = Shape{C, oh, ow};
                   },
                   [&](const RandomHorizontalFlip& f) {
                     if (!(uniform01(rng) < f.p)) return;
                     for (int64_t r = 0; r < C * H; ++r) std::reverse(img.data() + r * W, img.data() + (r + 1) * W);
                   },
                   [&](const Resize& r) {
                     if (r.height == H && r.width == W) return;
                     scratch.resize(static_cast<size_t>(C * r.height * r.width));
                     resize_bilinear(img.data(), C, H, W, PixelLayout::chw, scratch.data(), r.height, r.width);
                     img.swap(scratch);
                     chw = Shape{C, r.height, r.width};
                   },
               },
               t);
  }
}

}  // namespace strata::data
