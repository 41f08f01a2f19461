#include "strata/data/voc.h"

#include <pugixml.hpp>

#include <cstring>
#include <sstream>

#include "strata/data/file_io.h"
#include "strata/data/jpeg.h"
#include "strata/data/resize.h"

namespace strata::data {

namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::vector<std::string> read_image_set(const fs::path& file) {
  const std::vector<uint8_t> bytes = read_regular_file(file);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::vector<std::string> ids;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream ls(line);
    std::string id;
    if (!(ls >> id)) continue;  // blank line
    STRATA_CHECK(id.find('/') == std::string::npos && id != "." && id != "..", "VOC image set '", file.string(),
                 "': line ", line_no, " has an invalid image id '", id, "'");
    ids.push_back(id);
  }
  STRATA_CHECK(!ids.empty(), "VOC image set '", file.string(), "': no image ids");
  return ids;
}

}  // namespace

int voc_class_index(std::string_view name) {
  for (int k = 0; k < kVocNumClasses; ++k)
    if (kVocClasses[k] == name) return k;
  return -1;
}

std::array<float, kVocNumClasses> parse_voc_annotation(const fs::path& xml_file, bool include_difficult) {
  const std::string file = quoted(xml_file);
  const std::vector<uint8_t> bytes = read_regular_file(xml_file);
  pugi::xml_document doc;
  const pugi::xml_parse_result r = doc.load_buffer(bytes.data(), bytes.size());
  STRATA_CHECK(r, "malformed XML in VOC annotation ", file, ": ", r.description(), " at byte ", r.offset);
  const pugi::xml_node ann = doc.child("annotation");
  STRATA_CHECK(ann, "VOC annotation ", file, ": no <annotation> root element");
  std::array<float, kVocNumClasses> target{};
  int objects = 0;
  for (pugi::xml_node obj : ann.children("object")) {
    ++objects;
    const pugi::xml_node name_node = obj.child("name");
    STRATA_CHECK(name_node, "VOC annotation ", file, ": <object> #", objects, " has no <name>");
    const std::string_view name = trim(name_node.child_value());
    STRATA_CHECK(!name.empty(), "VOC annotation ", file, ": <object> #", objects, " has an empty <name>");
    const int k = voc_class_index(name);
    STRATA_CHECK(k >= 0, "VOC annotation ", file, ": unknown class name '", name, "' in <object> #", objects,
                 " (not one of the 20 VOC classes)");
    const std::string_view difficult = trim(obj.child("difficult").child_value());
    if (!include_difficult && difficult == "1") continue;
    target[k] = 1.0f;
  }
  // Every VOC image has at least one object; none means a broken or foreign file.
  // (With include_difficult = false an image of only difficult objects has an all-zero target.)
  STRATA_CHECK(objects > 0, "VOC annotation ", file, ": no <object> element");
  return target;
}

VocDataset::VocDataset(const fs::path& root, const std::string& image_set, VocOptions opts)
    : root_(root), name_("voc " + image_set), opts_(opts) {
  STRATA_CHECK(opts_.resolution > 0 && opts_.resolution <= 8192, "VocDataset: resolution must be in 1..8192, got ",
               opts_.resolution);
  std::error_code ec;
  STRATA_CHECK(fs::is_directory(root_, ec), "VocDataset: root '", root_.string(), "' is not a directory");
  image_set_file_ = root_ / "ImageSets" / "Main" / (image_set + ".txt");
  ids_ = read_image_set(image_set_file_);
  const int64_t n = static_cast<int64_t>(ids_.size());
  targets_ = Tensor::empty(Shape{n, kVocNumClasses}, DType::f32);
  float* t = targets_.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const auto target = parse_voc_annotation(annotation_path(i), opts_.include_difficult);
    std::memcpy(t + i * kVocNumClasses, target.data(), sizeof(float) * kVocNumClasses);
    const fs::path img = image_path(i);
    STRATA_CHECK(fs::is_regular_file(img, ec), "VOC image '", img.string(), "' (id '", ids_[i], "' of ",
                 image_set, ".txt): no such file");
  }
}

fs::path VocDataset::annotation_path(int64_t i) const {
  check_index(i);
  return root_ / "Annotations" / (ids_[i] + ".xml");
}

std::vector<fs::path> VocDataset::source_files() const {
  std::vector<fs::path> v = {image_set_file_};
  for (int64_t i = 0; i < size(); ++i) {
    v.push_back(annotation_path(i));
    v.push_back(image_path(i));
  }
  return v;
}

fs::path VocDataset::image_path(int64_t i) const {
  check_index(i);
  return root_ / "JPEGImages" / (ids_[i] + ".jpg");
}

void VocDataset::read(int64_t i, uint8_t* image, void* target) const {
  check_index(i);
  const fs::path path = image_path(i);
  const std::vector<uint8_t> bytes = read_regular_file(path);
  const DecodedImage img = decode_jpeg(bytes.data(), bytes.size(), quoted(path));
  resize_bilinear(img.pixels.data(), 3, img.height, img.width, PixelLayout::hwc, image, opts_.resolution,
                  opts_.resolution);
  std::memcpy(target, targets_.data<float>() + i * kVocNumClasses, sizeof(float) * kVocNumClasses);
}

}  // namespace strata::data
