#include "strata/data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "strata/core/file.h"
#include "strata/data/image.h"
#include "strata/data/jpeg.h"
#include "strata/data/random.h"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kReadExtensions = ".jpg, .jpeg, .png, .pgm, .ppm";

std::string lower_extension(const std::string& name) {
  std::string e = fs::path(name).extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e;
}

bool is_read_image(const std::string& ext) {
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".pgm" || ext == ".ppm";
}

// Extensions torchvision's ImageFolder reads (through PIL) that strata's decoders do not.
bool is_unread_image(const std::string& ext) {
  return ext == ".bmp" || ext == ".gif" || ext == ".tif" || ext == ".tiff" || ext == ".webp";
}

// The entries of `dir` split into sub-folders and other names (symbolic links followed), each sorted.
std::pair<std::vector<std::string>, std::vector<std::string>> list_folder(const fs::path& dir) {
  std::vector<std::string> folders, files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code kind_ec;
    (it->is_directory(kind_ec) ? folders : files).push_back(it->path().filename().string());
  }
  STRATA_CHECK(!ec, "image folder: cannot list ", quoted(dir), ": ", ec.message());
  std::sort(folders.begin(), folders.end());
  std::sort(files.begin(), files.end());
  return {std::move(folders), std::move(files)};
}

// The image files under root/cls (paths relative to root) in os.walk's order: folders sorted by their
// whole path (so "a-b" comes before "a/b"), files by name within each.
std::vector<std::string> class_images(const fs::path& root, const std::string& cls,
                                      std::set<std::pair<uint64_t, uint64_t>>& visited) {
  std::vector<std::pair<std::string, std::vector<std::string>>> folders;  // (relative path, its files)
  std::vector<std::string> pending = {cls};
  while (!pending.empty()) {
    const std::string rel = std::move(pending.back());
    pending.pop_back();
    const fs::path dir = root / rel;
    const std::optional<FileId> id = file_id(dir);
    STRATA_CHECK(id.has_value(), "image folder: ", quoted(dir), " disappeared while it was listed");
    STRATA_CHECK(visited.emplace(id->device, id->inode).second, "image folder: ", quoted(dir),
                 " is reached a second time through symbolic links (a loop, or two links to one folder)");
    auto [subfolders, files] = list_folder(dir);
    for (const std::string& s : subfolders) pending.push_back(rel + "/" + s);
    folders.emplace_back(rel, std::move(files));
  }
  std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> images;
  for (const auto& [rel, files] : folders)
    for (const std::string& f : files) {
      const std::string ext = lower_extension(f);
      STRATA_CHECK(!is_unread_image(ext), "image folder: ", quoted(root / rel / f), " is a ", ext.substr(1),
                   " image, a format strata does not decode (it reads ", kReadExtensions,
                   "); convert it or move it out of the folder");
      if (is_read_image(ext)) images.push_back(rel + "/" + f);
    }
  return images;
}

bool starts_as_jpeg(const std::vector<uint8_t>& b) { return b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8; }

}  // namespace

ImageFolderDataset::ImageFolderDataset(const fs::path& root, ImageFolderOptions opts)
    : root_(root), name_("image folder " + quoted(root)), opts_(std::move(opts)) {
  check_crop_geometry(opts_.geometry);
  side_ = crop_output_side(opts_.geometry);
  std::error_code ec;
  const fs::file_status st = fs::status(root_, ec);
  STRATA_CHECK(st.type() != fs::file_type::not_found, name_, ": no such folder");
  STRATA_CHECK(fs::is_directory(st), name_, ": is ", file_kind(root_).value_or("unreadable"),
               ", not a folder of class folders");
  classes_ = list_folder(root_).first;
  STRATA_CHECK(!classes_.empty(), name_, ": no class folders in it (expected root/<class>/<image>, e.g. ",
               "train/n01440764/n01440764_10026.JPEG)");
  STRATA_CHECK(classes_.size() <= static_cast<size_t>(INT32_MAX), name_, ": too many classes");
  std::set<std::pair<uint64_t, uint64_t>> visited;
  std::vector<std::string> empty;
  for (size_t c = 0; c < classes_.size(); ++c) {
    const std::vector<std::string> images = class_images(root_, classes_[c], visited);
    if (images.empty()) empty.push_back(classes_[c]);
    for (const std::string& rel : images) {
      relative_paths_ += rel;
      ends_.push_back(relative_paths_.size());
      labels_.push_back(static_cast<int32_t>(c));
    }
  }
  if (!empty.empty()) {
    std::string list;
    for (size_t k = 0; k < std::min<size_t>(empty.size(), 5); ++k) list += (k ? ", " : "") + quoted(root_ / empty[k]);
    if (empty.size() > 5) list += " and " + std::to_string(empty.size() - 5) + " more";
    STRATA_FAIL(name_, ": ", empty.size(), " class folder", empty.size() == 1 ? "" : "s", " without images (",
                kReadExtensions, " in any case): ", list);
  }
}

fs::path ImageFolderDataset::path(int64_t i) const {
  check_index(i);
  const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
  return root_ / relative_paths_.substr(begin, ends_[i] - begin);
}

int64_t ImageFolderDataset::label(int64_t i) const {
  check_index(i);
  return labels_[i];
}

std::vector<fs::path> ImageFolderDataset::source_files() const {
  std::vector<fs::path> v;
  v.reserve(labels_.size());
  for (int64_t i = 0; i < size(); ++i) v.push_back(path(i));
  return v;
}

void ImageFolderDataset::read(int64_t i, uint8_t* image, void* target) const {
  std::mt19937_64 rng(mix_seed(static_cast<uint64_t>(i), 0));
  read_random(i, image, target, rng);
}

void ImageFolderDataset::read_random(int64_t i, uint8_t* image, void* target, std::mt19937_64& rng) const {
  const fs::path file = path(i);
  const std::vector<uint8_t> bytes = read_regular_file(file);
  thread_local std::vector<uint8_t> scratch;
  thread_local DecodedImage d;
  const auto* rrc = std::get_if<RandomResizedCrop>(&opts_.geometry);
  if (rrc && starts_as_jpeg(bytes)) {
    // Training's common case: the box drawn from the header's size, then only the box decoded (the same
    // pixels as a full decode, jpeg.h) and resized.
    const std::string what = quoted(file);
    const auto [h, w] = jpeg_dimensions(bytes.data(), bytes.size(), what);
    const CropBox box = random_resized_crop_box(*rrc, h, w, rng);
    const CropBox part = decode_jpeg_region(bytes.data(), bytes.size(), what, h, w, box, d);
    resize_bilinear_crop(d.pixels.data(), 3, d.height, d.width, PixelLayout::hwc,
                         CropBox{box.top - part.top, box.left - part.left, box.height, box.width}, image, rrc->size,
                         rrc->size);
  } else if (starts_as_jpeg(bytes)) {  // decoded straight to interleaved RGB
    decode_jpeg_into(bytes.data(), bytes.size(), quoted(file), d);
    apply_crop_geometry(opts_.geometry, d.pixels.data(), 3, d.height, d.width, PixelLayout::hwc, image, rng,
                        scratch);
  } else {
    const Tensor t = decode_image(bytes.data(), bytes.size(), quoted(file));
    const int64_t c = t.size(0);
    apply_crop_geometry(opts_.geometry, t.data<uint8_t>(), c, t.size(1), t.size(2), PixelLayout::chw, image, rng,
                        scratch);
    // Greyscale to RGB after the crop: the resize works per channel, so this equals cropping three copies.
    const size_t plane = static_cast<size_t>(side_ * side_);
    for (int64_t k = c; k < 3; ++k) std::memcpy(image + k * plane, image, plane);
  }
  *static_cast<int64_t*>(target) = labels_[i];
}

}  // namespace strata::data
