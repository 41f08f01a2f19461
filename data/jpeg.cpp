#include "strata/data/jpeg.h"

#include <turbojpeg.h>

#include <cstring>

namespace strata::data {

namespace {

struct TjHandle {
  bool compress;
  tjhandle h = nullptr;
  explicit TjHandle(bool c) : compress(c) { reset(); }
  ~TjHandle() {
    if (h) tjDestroy(h);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  // A handle that failed mid-stream can misread the next header (TurboJPEG 2.1 then
  // reports a 0x0 image), so a failed handle is replaced before it is used again.
  void reset() {
    if (h) tjDestroy(h);
    h = compress ? tjInitCompress() : tjInitDecompress();
    STRATA_CHECK(h != nullptr, compress ? "encode_jpeg: tjInitCompress" : "decode_jpeg: tjInitDecompress",
                 " failed: ", tjGetErrorStr2(nullptr));
  }
};

TjHandle& decompressor() {
  thread_local TjHandle t(false);
  return t;
}

TjHandle& compressor() {
  thread_local TjHandle t(true);
  return t;
}

// CMYK and YCCK JPEGs (print files, a few in ImageNet) have no single right conversion to RGB: refused.
void refuse_cmyk(int colorspace, const std::string& what) {
  STRATA_CHECK(colorspace != TJCS_CMYK && colorspace != TJCS_YCCK, "JPEG ", what,
               " is in CMYK: strata decodes RGB and greyscale JPEGs; convert it to RGB first");
}

// The handle's message, after which the handle is replaced.
std::string fail_message(TjHandle& t) {
  std::string msg = tjGetErrorStr2(t.h);
  t.reset();
  return msg;
}

}  // namespace

DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& what) {
  DecodedImage img;
  decode_jpeg_into(data, size, what, img);
  return img;
}

void decode_jpeg_into(const uint8_t* data, size_t size, const std::string& what, DecodedImage& img) {
  STRATA_CHECK(size > 0, "corrupt JPEG ", what, ": file is empty");
  STRATA_CHECK(size <= static_cast<size_t>(0x7fffffff), "JPEG ", what, ": ", size, " bytes is too large");
  TjHandle& t = decompressor();
  tjhandle h = t.h;
  int w = 0, ht = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, data, static_cast<unsigned long>(size), &w, &ht, &subsamp, &colorspace) != 0)
    STRATA_FAIL("corrupt JPEG ", what, ": ", fail_message(t));
  refuse_cmyk(colorspace, what);
  STRATA_CHECK(w > 0 && ht > 0, "corrupt JPEG ", what, ": header says ", w, "x", ht, " pixels");
  img.height = ht;
  img.width = w;
  img.pixels.resize(static_cast<size_t>(w) * static_cast<size_t>(ht) * 3);  // zeroes only what it adds
  // TJFLAG_STOPONWARNING: libjpeg treats truncation and bad Huffman data as warnings
  // and fills the rest with grey; we want an error, never silent garbage.
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), img.pixels.data(), w, 0, ht, TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0)
    STRATA_FAIL("corrupt JPEG ", what, ": ", fail_message(t));
}

std::pair<int64_t, int64_t> jpeg_dimensions(const uint8_t* data, size_t size, const std::string& what) {
  STRATA_CHECK(size > 0, "corrupt JPEG ", what, ": file is empty");
  STRATA_CHECK(size <= static_cast<size_t>(0x7fffffff), "JPEG ", what, ": ", size, " bytes is too large");
  TjHandle& t = decompressor();
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(t.h, data, static_cast<unsigned long>(size), &w, &h, &subsamp, &colorspace) != 0)
    STRATA_FAIL("corrupt JPEG ", what, ": ", fail_message(t));
  refuse_cmyk(colorspace, what);
  STRATA_CHECK(w > 0 && h > 0, "corrupt JPEG ", what, ": header says ", w, "x", h, " pixels");
  return {h, w};
}

Tensor decode_jpeg_chw(const uint8_t* data, size_t size, const std::string& what) {
  DecodedImage img = decode_jpeg(data, size, what);
  Tensor t = Tensor::empty(Shape{3, img.height, img.width}, DType::u8);
  uint8_t* out = t.data<uint8_t>();
  const int64_t hw = img.height * img.width;
  for (int64_t p = 0; p < hw; ++p)
    for (int64_t c = 0; c < 3; ++c) out[c * hw + p] = img.pixels[p * 3 + c];
  return t;
}

std::vector<uint8_t> encode_jpeg(const Tensor& chw, int quality, JpegChroma chroma) {
  STRATA_CHECK(chw.dtype() == DType::u8 && chw.dim() == 3 &&
                   (chw.size(0) == 3 || chw.size(0) == 1 || chw.size(0) == 4) && chw.device().is_cpu(),
               "encode_jpeg: expected a cpu u8 [3,H,W], [1,H,W] or [4,H,W] tensor, got ", chw.str());
  STRATA_CHECK(quality >= 1 && quality <= 100, "encode_jpeg: quality must be in 1..100, got ", quality);
  const Tensor src = chw.contiguous();
  const int64_t C = src.size(0), H = src.size(1), W = src.size(2);
  STRATA_CHECK(H > 0 && W > 0 && H <= 65535 && W <= 65535, "encode_jpeg: unsupported size ", src.str());
  std::vector<uint8_t> hwc(static_cast<size_t>(C * H * W));
  const uint8_t* in = src.data<uint8_t>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t p = 0; p < H * W; ++p) hwc[p * C + c] = in[c * H * W + p];
  TjHandle& t = compressor();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  const int pf = C == 3 ? TJPF_RGB : C == 4 ? TJPF_CMYK : TJPF_GRAY;
  const int ss = C == 1 ? TJSAMP_GRAY : chroma == JpegChroma::half ? TJSAMP_420 : TJSAMP_444;
  if (tjCompress2(t.h, hwc.data(), static_cast<int>(W), 0, static_cast<int>(H), pf, &buf, &len, ss, quality,
                  TJFLAG_ACCURATEDCT) != 0) {
    tjFree(buf);
    const std::string msg = fail_message(t);
    STRATA_FAIL("encode_jpeg: tjCompress2 failed for ", src.str(), ": ", msg);
  }
  std::vector<uint8_t> out(buf, buf + len);
  tjFree(buf);
  return out;
}

}  // namespace strata::data
