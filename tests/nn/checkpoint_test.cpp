// safetensors files and checkpoints: the byte format, round trips (bitwise, with
// optimizer state and resume), corrupt and truncated files, and atomic writes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "strata/nn/checkpoint.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
namespace st = nn::safetensors;
using ops::DispatchMode;

std::string u64le(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}
std::string f32le(std::initializer_list<float> v) {
  std::string s;
  for (float f : v) s.append(reinterpret_cast<const char*>(&f), 4);
  return s;
}
// A file as PyTorch's safetensors.torch.save_file writes it: metadata {"format": "pt"},
// header padded with spaces to a multiple of 8.
std::string file_with_header(std::string json, const std::string& data) {
  json.append((8 - json.size() % 8) % 8, ' ');
  return u64le(json.size()) + json + data;
}

TEST(NnSafetensors, ReadsAFileInPyTorchsLayout) {
  const std::string bytes = file_with_header(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})",
      u64le(7) + f32le({1.f, -2.f, 3.5f, 0.25f}));
  const st::Contents c = st::parse(bytes);
  EXPECT_EQ(c.metadata.at("format"), "pt");
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].first, "b");
  EXPECT_EQ(c.tensors[0].second.item(), 7.0);
  EXPECT_EQ(c.tensors[1].second.sizes(), (Shape{2, 2}));
  EXPECT_EQ(c.tensors[1].second.to_vector<float>(), (std::vector<float>{1.f, -2.f, 3.5f, 0.25f}));
}

TEST(NnSafetensors, WritesTheExactFormat) {
  nn::StateDict sd{{"w", Tensor::from_vector(std::vector<float>{1.f, 2.f}, Shape{2})},
                   {"n", Tensor::from_vector(std::vector<int64_t>{3}, Shape{})}};
  const std::string bytes = st::serialize(sd, {{"format", "pt"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  // 8-byte elements first (alignment), then the rest in order.
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"format":"pt"},"n":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
            R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})");
  EXPECT_EQ(bytes.size(), 8 + n + 16);
  EXPECT_EQ(bytes.substr(8 + n), u64le(3) + f32le({1.f, 2.f}));
  // Every dtype of the format round-trips bitwise, strided and channels-last inputs too.
  nn::StateDict all{{"f32", random_tensor({2, 3, 4, 5}, DType::f32, 1, -1, 1, MemoryFormat::channels_last)},
                    {"f64", random_tensor({3}, DType::f64, 2)},
                    {"f16", random_tensor({5}, DType::f16, 3)},
                    {"bf16", random_tensor({5}, DType::bf16, 4)},
                    {"i32", Tensor::from_vector(std::vector<int32_t>{-1, 2}, Shape{2})},
                    {"u8", Tensor::from_vector(std::vector<uint8_t>{0, 255, 7}, Shape{3})},
                    {"view", random_tensor({4, 6}, DType::f32, 5).narrow(1, 1, 3)}};
  const st::Contents back = st::parse(st::serialize(all));
  for (auto& [name, t] : all) {
    const Tensor* b = nn::find_entry(back.tensors, name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->dtype(), t.dtype()) << name;
    EXPECT_TRUE(bitwise_equal(*b, t)) << name;
  }
}

TEST(NnSafetensors, CorruptFilesAreClearErrors) {
  const std::string good = file_with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                            f32le({1.f, 2.f}));
  ASSERT_NO_THROW(st::parse(good));
  auto with = [](const std::string& json, const std::string& data) { return file_with_header(json, data); };
  EXPECT_STRATA_ERROR(st::parse(good.substr(0, 5)), "too short", "truncated");
  EXPECT_STRATA_ERROR(st::parse(good.substr(0, good.size() - 3)), "'w'", "reach past the data area", "truncated");
  EXPECT_STRATA_ERROR(st::parse(good.substr(0, 20)), "header length", "runs past the end");
  EXPECT_STRATA_ERROR(st::parse(u64le(1ull << 60) + good.substr(8)), "header length", "100 MB");
  EXPECT_STRATA_ERROR(st::parse(u64le(900) + good.substr(8)), "header length 900", "runs past the end");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", f32le({1.f, 2.f}))),
                      "'w'", "[0, 16]", "reach past");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32le({1.f, 2.f}))),
                      "'w'", "hold 8 bytes", "needs 12");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", f32le({1.f, 2.f}))),
                      "'w'", "unknown or unsupported dtype \"Q7\"");
  EXPECT_STRATA_ERROR(
      st::parse(with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     f32le({1.f, 2.f}))),
      "'a'", "'b'", "overlap");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", f32le({1.f, 2.f}))),
                      "reversed");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32le({1.f, 2.f}))),
                      "non-negative");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w":{"dtype":"F32","shape":[2]}})", f32le({1.f, 2.f}))), "data_offsets");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"w": [1, 2)", f32le({1.f, 2.f}))), "not valid JSON");
  EXPECT_STRATA_ERROR(st::parse(with(R"([1, 2])", "")), "not a JSON object");
  EXPECT_STRATA_ERROR(st::parse(with(R"({"__metadata__":{"k":1}})", "")), "__metadata__", "not a string");
  // Random garbage of every length never crashes.
  std::string noise = good;
  for (size_t i = 0; i < noise.size(); ++i) {
    std::string b = noise;
    b[i] = static_cast<char>(b[i] ^ 0x5a);
    try {
      st::parse(b);
    } catch (const Error&) {
    }
  }
}

nn::ResNetConfig tiny() {
  nn::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.small_input = true;
  c.base_channels = 8;
  c.init.seed = 11;
  return c;
}

TEST(NnCheckpoint, RoundTripAndResumeAreBitwise) {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const Tensor x = random_tensor({4, 3, 8, 8}, DType::f32, 1);
  const Tensor y = random_labels(4, 10, 2);
  nn::OptimizerConfig oc;
  oc.kind = nn::OptimizerKind::adam;
  oc.lr = 1e-3;

  auto a = nn::make_resnet(tiny(), DispatchMode::direct, "reference");
  auto opt_a = a->make_optimizer(oc);
  for (int s = 0; s < 2; ++s) a->train_step(x, y, *opt_a);
  nn::save_checkpoint(path, a->module(), opt_a.get(), 2, {{"note", "test"}});
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename(), "ckpt.safetensors") << "no temporary file is left behind";

  // Weights only, as PyTorch would read them: the names of the model.
  const st::Contents c = st::load(path);
  EXPECT_EQ(c.metadata.at("format"), "pt");
  EXPECT_EQ(c.metadata.at("note"), "test");
  EXPECT_NE(nn::find_entry(c.tensors, "layer1.0.bn1.num_batches_tracked"), nullptr);
  EXPECT_NE(nn::find_entry(c.tensors, "optimizer.fc.weight.exp_avg"), nullptr);

  auto b = nn::make_resnet(tiny(), DispatchMode::virtual_call, "reference");  // another mode, fresh weights
  auto opt_b = b->make_optimizer(oc);
  const nn::CheckpointInfo info = nn::load_checkpoint(path, b->module(), opt_b.get());
  EXPECT_EQ(info.step, 2);
  EXPECT_EQ(opt_b->step_count(), 2);
  const auto sa = a->state_dict(), sb = b->state_dict();
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(bitwise_equal(sa[i].second, sb[i].second)) << sa[i].first;
  EXPECT_EQ(nn::find_entry(sb, "bn1.num_batches_tracked")->item(), 2.0);

  // Resuming continues exactly where the first run would have gone.
  for (int s = 0; s < 2; ++s) {
    a->train_step(x, y, *opt_a);
    b->train_step(x, y, *opt_b);
  }
  const auto ra = a->state_dict(), rb = b->state_dict();
  for (size_t i = 0; i < ra.size(); ++i) EXPECT_TRUE(bitwise_equal(ra[i].second, rb[i].second)) << ra[i].first;
}

TEST(NnCheckpoint, MismatchedModelsAndCorruptFilesAreReported) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  auto a = nn::make_resnet(tiny(), DispatchMode::virtual_call, "null");
  nn::save_checkpoint(path, a->module(), nullptr, 5);

  nn::ResNetConfig other = tiny();
  other.num_classes = 100;
  auto b = nn::make_resnet(other, DispatchMode::virtual_call, "null");
  EXPECT_STRATA_ERROR(nn::load_checkpoint(path, b->module()), path.c_str(), "size mismatch for fc.weight", "[10,64]",
                      "[100,64]");
  other = tiny();
  other.depth = 34;
  auto c = nn::make_resnet(other, DispatchMode::virtual_call, "null");
  EXPECT_STRATA_ERROR(nn::load_checkpoint(path, c->module()), "missing key(s)", "layer1.2.conv1.weight");
  auto opt = a->make_optimizer({});
  EXPECT_STRATA_ERROR(nn::load_checkpoint(path, a->module(), opt.get()), "no optimizer state");
  EXPECT_EQ(nn::load_checkpoint(path, a->module()).step, 5);

  // A truncated copy fails cleanly and leaves the model untouched.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string cut = dir.file("cut.safetensors");
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  EXPECT_STRATA_ERROR(nn::load_checkpoint(cut, b->module()), "cut.safetensors", "truncated");
  EXPECT_STRATA_ERROR(nn::load_checkpoint(dir.file("absent.safetensors"), b->module()), "cannot open");
}

TEST(NnCheckpoint, FailedWritesLeaveThePreviousFileIntact) {
  TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  auto a = nn::make_resnet(tiny(), DispatchMode::virtual_call, "null");
  nn::save_checkpoint(path, a->module(), nullptr, 1);
  const auto before = fs::file_size(path);
  // A crash mid-write leaves only a stale temporary; the checkpoint still loads.
  std::ofstream(path + ".tmp.12345", std::ios::binary) << "partial";
  EXPECT_EQ(nn::load_checkpoint(path, a->module()).step, 1);
  // Writing where the rename cannot happen (a directory is in the way) fails clearly
  // and removes its temporary.
  const std::string blocked = dir.file("blocked");
  fs::create_directories(fs::path(blocked) / "inside");
  EXPECT_STRATA_ERROR(nn::save_checkpoint(blocked, a->module(), nullptr, 2), "renaming");
  EXPECT_FALSE(fs::exists(blocked + ".tmp." + std::to_string(::getpid())));
  EXPECT_STRATA_ERROR(nn::save_checkpoint(dir.file("no/such/dir/x.safetensors"), a->module(), nullptr, 2),
                      "cannot create");
  EXPECT_EQ(fs::file_size(path), before);
}

// A killed save's temporary is removed by the next successful save of the same path
// once its writer is gone and the file is a minute old; a live writer's is kept, and
// so is a fresh one (its writer may live in another PID namespace).
TEST(NnCheckpoint, NextSaveRemovesStaleTemporaries) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  pid_t dead = 4194000;  // a pid no process has: search down from near the default pid_max
  while (dead > 1 && (::kill(dead, 0) == 0 || errno != ESRCH)) --dead;
  ASSERT_GT(dead, 1);
  const std::string stale = path + ".tmp." + std::to_string(dead);
  const std::string fresh = path + ".tmp." + std::to_string(dead - 1);
  const std::string live = path + ".tmp." + std::to_string(::getppid());
  const std::string other = dir.file("other.safetensors.tmp." + std::to_string(dead));
  for (const std::string& f : {stale, fresh, live, other}) std::ofstream(f, std::ios::binary) << "partial";
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const std::string& f : {stale, live, other}) fs::last_write_time(f, old);
  auto a = nn::make_resnet(tiny(), DispatchMode::virtual_call, "null");
  nn::save_checkpoint(path, a->module(), nullptr, 1);
  EXPECT_FALSE(fs::exists(stale)) << "a dead writer's old temporary stays";
  EXPECT_TRUE(fs::exists(fresh)) << "a recent temporary was removed";
  EXPECT_TRUE(fs::exists(live)) << "a live process's temporary was removed";
  EXPECT_TRUE(fs::exists(other)) << "another checkpoint's temporary was removed";
  EXPECT_EQ(nn::load_checkpoint(path, a->module()).step, 1);
}

}  // namespace
}  // namespace strata::testing
