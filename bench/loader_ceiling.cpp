// loader_ceiling: how many images per second strata's data pipeline delivers on this machine, with
// nothing consuming them: the ceiling the loader puts on training throughput.
//   - An ImageNet-shaped image folder (data/image_folder.h) through the real Loader with ImageNet's
//     training pipeline (RandomResizedCrop 224 while reading, flip, normalise), batch 256, pinned memory
//     when the cuda backend is usable, at 1, 2, 4, ... worker threads up to the hardware threads;
//   - a Fashion-MNIST-sized in-memory set (60,000 random 1x28x28, batch 128, normalise), the same sweep;
//   - one thread's cost per image of each stage (file read, JPEG decode, crop + resize).
// The folder is written first with --write-folder DIR (bench/synthetic_image_folder.h) or given with
// --folder DIR (an image folder root: DIR/<class>/<image>, e.g. ImageNet's train/). Files are read from
// the page cache once written or read: this measures decoding and transforms, not a disk.
//   loader_ceiling --write-folder /tmp/inet --images 20000 --json loader.json
//   loader_ceiling --folder /data/imagenet/train --workers 8,16 --batches 40
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "strata/backends/api/registry.h"
#include "strata/core/exit_status.h"
#include "strata/core/file.h"
#include "strata/data/image_folder.h"
#include "strata/data/jpeg.h"
#include "strata/data/loader.h"
#include "synthetic_image_folder.h"

namespace {

using namespace strata;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds (user + system) of the whole process so far: per image, the cost that does not depend on
// whether other programs share the cores, as wall-clock img/s does on a shared machine.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

struct Sweep {
  std::vector<int> workers;
  int64_t batch = 256;
  int64_t batches = 20;  // timed batches per worker count (at least 2 per worker), after the untimed ones
  bool pin = false;
};

// The loader over `ds` at each worker count: img/s over the timed batches, and where the workers' time
// went (reading: file, decode, crop; transforming: u8 -> f32, flip, normalise, copy).
json sweep(const std::shared_ptr<const data::Dataset>& ds, std::vector<data::Transform> transforms,
           const Sweep& s, const char* label) {
  json rows = json::array();
  for (int w : s.workers) {
    data::Loader loader(ds, {.batch_size = s.batch, .seed = 1, .drop_last = true, .num_workers = w,
                             .pin_memory = s.pin, .transforms = transforms});
    // The workers fill up to 2w batches while the first is awaited, so the first 2w + 1 batches come
    // out faster than the loader makes them: timing them counted a 16-worker sweep's prefetched
    // batches as throughput (4x the rate a training loop then saw). They go untimed, and at least 2w
    // batches are timed, so the figure is the rate of batches made while the clock runs.
    const int64_t untimed = 2 * int64_t{w} + 1;
    const int64_t timed = std::min<int64_t>(std::max<int64_t>(s.batches, 2 * int64_t{w}),
                                            loader.batches_per_epoch() - untimed);
    STRATA_CHECK(timed >= 2 * int64_t{w}, label, ": ", ds->size(), " images are too few for batch ", s.batch,
                 " at ", w, " workers (", untimed, " untimed batches to drain what the workers made ahead, then ",
                 2 * w, " timed)");
    loader.start_epoch(0);
    for (int64_t b = 0; b < untimed; ++b) loader.next();  // threads start, then the batches made ahead drain
    loader.reset_stats();
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_seconds();
    int64_t images = 0;
    for (int64_t b = 0; b < timed; ++b) images += loader.next()->images.size(0);
    const double secs = seconds_since(t0);
    const double cpu_us = 1e6 * (process_cpu_seconds() - cpu0) / static_cast<double>(images);
    const data::LoaderStats st = loader.stats();
    const double busy = st.read_seconds + st.transform_seconds;
    json r = {{"workers", w},
              {"batches", timed},
              {"images", images},
              {"seconds", secs},
              {"images_per_second", images / secs},
              {"images_per_second_per_worker", images / secs / w},
              {"cpu_microseconds_per_image", cpu_us},
              {"read_share", busy > 0 ? st.read_seconds / busy : 0.0},
              {"transform_share", busy > 0 ? st.transform_seconds / busy : 0.0},
              {"consumer_wait_seconds", st.wait_seconds}};
    std::printf("%-12s workers %3d: %9.0f img/s (%7.0f per worker, %7.1f CPU us each)  read %4.1f %%  "
                "transform %4.1f %%\n",
                label, w, images / secs, images / secs / w, cpu_us, 100 * r["read_share"].get<double>(),
                100 * r["transform_share"].get<double>());
    std::fflush(stdout);
    rows.push_back(r);
  }
  return rows;
}

// One thread, the first `n` JPEG samples: milliseconds per image of each stage the folder's read() runs
// (the file, the decode of the RandomResizedCrop box's part, the resize), and of a full decode beside it.
json stage_costs(const data::ImageFolderDataset& ds, int64_t n) {
  n = std::min(n, ds.size());
  double read = 0, decode = 0, decode_box = 0, crop = 0;
  uint64_t bytes = 0;
  std::vector<uint8_t> out(3 * 224 * 224), scratch;
  std::mt19937_64 rng(1);
  int64_t jpegs = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    const std::vector<uint8_t> b = read_regular_file(ds.path(i));
    read += seconds_since(t0);
    if (b.size() < 2 || b[0] != 0xFF || b[1] != 0xD8) continue;  // PNG, PGM/PPM: not what ImageNet holds
    ++jpegs;
    bytes += b.size();
    t0 = Clock::now();
    const data::DecodedImage d = data::decode_jpeg(b.data(), b.size(), ds.path(i).string());
    decode += seconds_since(t0);
    const data::CropBox box = data::random_resized_crop_box(data::RandomResizedCrop{}, d.height, d.width, rng);
    data::DecodedImage part;
    t0 = Clock::now();
    const data::CropBox at =
        data::decode_jpeg_region(b.data(), b.size(), ds.path(i).string(), d.height, d.width, box, part);
    decode_box += seconds_since(t0);
    t0 = Clock::now();
    data::resize_bilinear_crop(part.pixels.data(), 3, part.height, part.width, data::PixelLayout::hwc,
                               {box.top - at.top, box.left - at.left, box.height, box.width}, out.data(), 224, 224);
    crop += seconds_since(t0);
  }
  STRATA_CHECK(jpegs > 0, ds.name(), ": none of the first ", n, " images is a JPEG");
  n = jpegs;
  json r = {{"images", n},
            {"mean_file_bytes", static_cast<double>(bytes) / n},
            {"read_ms", 1e3 * read / n},
            {"decode_full_ms", 1e3 * decode / n},
            {"decode_box_ms", 1e3 * decode_box / n},
            {"resize_to_224_ms", 1e3 * crop / n}};
  std::printf("one thread, %lld images of %.0f KB: read %.3f ms, decode %.3f ms (full image: %.3f ms), "
              "resize %.3f ms\n",
              static_cast<long long>(n), bytes / 1024.0 / n, 1e3 * read / n, 1e3 * decode_box / n, 1e3 * decode / n,
              1e3 * crop / n);
  return r;
}

std::vector<int> default_workers() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> v;
  for (int w = 1; w < cores; w *= 2) v.push_back(w);
  v.push_back(cores);
  return v;
}

std::shared_ptr<const data::Dataset> fashion_mnist_sized() {
  Tensor images = Tensor::empty(Shape{60000, 1, 28, 28}, DType::u8);
  Tensor labels = Tensor::empty(Shape{60000}, DType::i64);
  std::mt19937_64 rng(1);
  uint8_t* p = images.data<uint8_t>();
  for (int64_t k = 0; k < images.numel(); ++k) p[k] = static_cast<uint8_t>(rng());
  int64_t* l = labels.data<int64_t>();
  for (int64_t k = 0; k < 60000; ++k) l[k] = k % 10;
  return std::make_shared<data::InMemoryDataset>("fashion-mnist-sized (random)", images, labels, 10);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loader_ceiling: images per second of strata's data loader, ImageNet-shaped and Fashion-MNIST-sized"};
  std::string folder, write_folder, json_path, pin = "auto";
  bench::SyntheticFolderSpec spec;
  Sweep s;
  Sweep small;
  small.batch = 128;
  small.batches = 200;
  bool skip_fmnist = false;
  app.add_option("--folder", folder, "an image folder root to read (DIR/<class>/<image>)");
  app.add_option("--write-folder", write_folder,
                 "write a synthetic ImageNet-shaped folder here first (a new or empty folder) and read DIR/train");
  app.add_option("--images", spec.train_images, "--write-folder: training images")->check(CLI::PositiveNumber);
  app.add_option("--val-images", spec.val_images, "--write-folder: validation images")->check(CLI::PositiveNumber);
  app.add_option("--classes", spec.classes, "--write-folder: class folders")->check(CLI::PositiveNumber);
  app.add_option("--grain", spec.grain, "--write-folder: per-pixel noise amplitude (sets the JPEG size)")
      ->check(CLI::Range(0.0, 128.0));
  app.add_option("--workers", s.workers, "worker counts (default 1, 2, 4, ... and the hardware threads)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  app.add_option("--batch", s.batch, "image folder batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--batches", s.batches, "timed image folder batches per worker count")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--fmnist-batches", small.batches, "timed Fashion-MNIST-sized batches per worker count")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_flag("--no-fmnist", skip_fmnist, "skip the Fashion-MNIST-sized case");
  app.add_option("--pin", pin, "pinned batches: auto (when the cuda backend is usable), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--json", json_path, "write the results here");
  STRATA_CLI11_PARSE(app, argc, argv);
  try {
    STRATA_CHECK(folder.empty() != write_folder.empty(), "loader_ceiling: give exactly one of --folder and "
                                                         "--write-folder");
    if (json_path.size()) check_output_file(json_path, 1 << 20, "--json");
    if (s.workers.empty()) s.workers = default_workers();
    // The cuda backend installs the page-locked allocator the loader's pinned batches come from.
    s.pin = pin == "on" || (pin == "auto" && backends::registry().find("cuda") != nullptr);
    small.workers = s.workers;
    small.pin = s.pin;
    json out = {{"hardware_threads", std::thread::hardware_concurrency()}, {"pinned", s.pin}};
    if (!write_folder.empty()) {
      const bench::SyntheticFolderStats w = bench::write_synthetic_image_folder(write_folder, spec);
      std::printf("wrote %lld JPEGs (%.1f KB on average) in %.1f s to %s\n", static_cast<long long>(w.files),
                  w.bytes / 1024.0 / w.files, w.seconds, write_folder.c_str());
      out["synthetic_folder"] = {{"root", write_folder}, {"files", w.files},
                                 {"mean_file_bytes", 1.0 * w.bytes / w.files},
                                 {"train_images", spec.train_images}, {"val_images", spec.val_images},
                                 {"classes", spec.classes}, {"quality", spec.quality}, {"chroma", "4:2:0"},
                                 {"write_seconds", w.seconds}};
      folder = (std::filesystem::path(write_folder) / "train").string();
    }
    auto ds = std::make_shared<const data::ImageFolderDataset>(folder);
    std::printf("%s: %lld images, %lld classes; batch %lld, pinned %s\n", ds->name().c_str(),
                static_cast<long long>(ds->size()), static_cast<long long>(ds->num_classes()),
                static_cast<long long>(s.batch), s.pin ? "yes" : "no");
    out["image_folder"] = {{"root", folder}, {"images", ds->size()}, {"classes", ds->num_classes()},
                           {"batch", s.batch}, {"pipeline", "RandomResizedCrop(224) in read, flip 0.5, normalise"},
                           {"stages_one_thread", stage_costs(*ds, 64)},
                           {"sweep", sweep(ds, {data::RandomHorizontalFlip{0.5}, data::norm::imagenet()}, s,
                                           "imagefolder")}};
    if (!skip_fmnist)
      out["fashion_mnist_sized"] = {{"images", 60000}, {"batch", small.batch}, {"pipeline", "normalise"},
                                    {"sweep", sweep(fashion_mnist_sized(), {data::norm::fashion_mnist()}, small,
                                                    "fmnist-size")}};
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << out.dump(2) << "\n";
      STRATA_CHECK(f.good(), "loader_ceiling: cannot write ", quoted(json_path));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loader_ceiling: %s\n", e.what());
    return kExitFailure;
  }
  return kExitSuccess;
}
