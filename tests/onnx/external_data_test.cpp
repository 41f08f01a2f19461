// Initializers kept in external files (onnx/external_data.h), as PyTorch's dynamo exporter
// writes them: the same model with some initializers inline and others in files beside it
// computes bitwise what the self-contained model computes; every way a location, offset,
// length or checksum can be wrong is refused, naming the model file, the initializer and
// what is wrong, and nothing is ever read outside the model's folder.
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "strata/autograd/grad_mode.h"
#include "onnx_builder.h"
#include "onnx_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using ops::DispatchMode;

Tensor run(const onnx::Imported& imp, const Tensor& x) {
  autograd::NoGradGuard no_grad;
  return imp.module->forward(x).clone();
}

::onnx::TensorProto& initializer(OnnxBuilder& b, const std::string& name) {
  for (auto& t : *b.graph().mutable_initializer())
    if (t.name() == name) return t;
  throw std::runtime_error("no initializer " + name);
}

// sha1sum's digest of a file (coreutils: a SHA-1 independent of the one strata links).
std::string sha1sum(const fs::path& file) {
  const std::string cmd = "sha1sum '" + file.string() + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  std::array<char, 41> hex{};
  if (!p || std::fread(hex.data(), 1, 40, p.get()) != 40) return "";
  return std::string(hex.data(), 40);
}

// The model lies in root_/model, so that root_ is a place outside its folder.
class OnnxExternalData : public OnnxFilesTest {
 protected:
  void SetUp() override {
    OnnxFilesTest::SetUp();
    dir_ = root_ / "model";
    fs::create_directories(dir_);
  }

  // tiny_model with conv.weight (432 bytes) in "tiny.onnx.data" at offset 0, everything
  // else inline, saved as model/tiny.onnx; `edit` changes conv.weight's entries first.
  std::string save_with(const std::function<void(::onnx::TensorProto&)>& edit) {
    OnnxBuilder b = tiny_model();
    move_to_external_file(b.model(), dir_, "tiny.onnx.data", {"conv.weight"});
    if (edit) edit(initializer(b, "conv.weight"));
    save(b.model(), dir_ / "tiny.onnx");
    return (dir_ / "tiny.onnx").string();
  }
  static void set(::onnx::TensorProto& t, const std::string& key, const std::string& value) {
    for (auto& e : *t.mutable_external_data())
      if (e.key() == key) {
        e.set_value(value);
        return;
      }
    set_entry(t, key, value);
  }
  onnx::Imported load(const std::string& path, DispatchMode mode = DispatchMode::virtual_call) {
    return onnx::load_model(path, mode, "reference");
  }

  fs::path dir_;
};

TEST_F(OnnxExternalData, MixedInlineAndExternalGiveTheSelfContainedOutputs) {
  const OnnxBuilder inline_model = tiny_model();
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 21);
  const onnx::Imported want = onnx::import_model(inline_model.bytes(), DispatchMode::virtual_call, "reference");
  const Tensor y = run(want, x);

  // Out of initializer order, at aligned offsets with gaps, in two files (one in a
  // subfolder); fc.bias alone in a file without offset or length (its whole file).
  OnnxBuilder b = tiny_model();
  move_to_external_file(b.model(), dir_, "tiny.onnx.data", {"fc.weight", "bn.running_var", "conv.weight"}, 4096);
  move_to_external_file(b.model(), dir_, "weights/conv_bias.bin", {"conv.bias"}, 1);
  move_to_external_file(b.model(), dir_, "fc.bias", {"fc.bias"});
  auto& fc_bias = initializer(b, "fc.bias");
  fc_bias.mutable_external_data()->DeleteSubrange(1, 2);
  ASSERT_EQ(fc_bias.external_data_size(), 1);
  save(b.model(), dir_ / "tiny.onnx");
  EXPECT_EQ(fs::file_size(dir_ / "tiny.onnx.data"), 2 * 4096 + 432u);

  for (DispatchMode mode : kAllModes) {
    const onnx::Imported got = load((dir_ / "tiny.onnx").string(), mode);
    EXPECT_TRUE(bitwise_equal(run(got, x), y)) << ops::dispatch_mode_name(mode);
    const nn::StateDict mine = got.module->state_dict(), theirs = want.module->state_dict();
    ASSERT_EQ(mine.size(), theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_EQ(mine[i].first, theirs[i].first);
      EXPECT_TRUE(bitwise_equal(mine[i].second, theirs[i].second)) << mine[i].first;
    }
  }
}

TEST_F(OnnxExternalData, SymbolicLinksInsideTheFolderAreFollowed) {
  const std::string path = save_with([](::onnx::TensorProto& t) { set(t, "location", "link.data"); });
  fs::create_directories(dir_ / "blobs");
  fs::rename(dir_ / "tiny.onnx.data", dir_ / "blobs" / "real.data");
  fs::create_symlink("blobs/real.data", dir_ / "link.data");
  EXPECT_NO_THROW(load(path));
}

TEST_F(OnnxExternalData, ChecksumIsTheFilesSha1) {
  const std::string path = save_with(nullptr);
  const std::string sha1 = sha1sum(dir_ / "tiny.onnx.data");
  ASSERT_EQ(sha1.size(), 40u) << "sha1sum did not run";
  std::string upper = sha1;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  save_with([&](::onnx::TensorProto& t) { set(t, "checksum", upper); });
#if STRATA_ONNX_SHA1
  EXPECT_NO_THROW(load(path));
  std::string wrong = sha1;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  save_with([&](::onnx::TensorProto& t) { set(t, "checksum", wrong); });
  EXPECT_STRATA_ERROR(load(path), "initializer 'conv.weight'", "has SHA-1", "but its checksum says");
#else
  EXPECT_STRATA_ERROR(load(path), "initializer 'conv.weight'", "cannot verify");
#endif
  save_with([&](::onnx::TensorProto& t) { set(t, "checksum", "abc"); });
  EXPECT_STRATA_ERROR(load(path), "initializer 'conv.weight'", "checksum 'abc' of 'tiny.onnx.data' is not a SHA-1");
}

// Each case: what it does to conv.weight's entries (and the folder), and what the error says
// besides the model file and the initializer.
struct BadCase {
  const char* name;
  std::function<void(::onnx::TensorProto&, const fs::path& dir)> edit;
  std::vector<std::string> says;
};

TEST_F(OnnxExternalData, EveryBadLocationOrRangeIsRefused) {
  const std::vector<BadCase> cases = {
      {"up-directory", [](auto& t, const fs::path& d) {
         fs::copy_file(d / "tiny.onnx.data", d.parent_path() / "outside.data");
         set(t, "location", "../outside.data");
       }, {"location '../outside.data' leaves the model's folder", "'..' is not allowed"}},
      {"up-directory inside", [](auto& t, const fs::path&) { set(t, "location", "sub/../tiny.onnx.data"); },
       {"'..' is not allowed"}},
      {"absolute", [](auto& t, const fs::path& d) { set(t, "location", (d / "tiny.onnx.data").string()); },
       {"is an absolute path (it must be relative to the model's folder"}},
      {"symbolic link out", [](auto& t, const fs::path& d) {
         fs::copy_file(d / "tiny.onnx.data", d.parent_path() / "outside.data");
         fs::create_symlink(d.parent_path() / "outside.data", d / "escape.data");
         set(t, "location", "escape.data");
       }, {"location 'escape.data' resolves to", "outside.data', outside the model's folder"}},
      {"folder linked out", [](auto& t, const fs::path& d) {
         fs::create_directories(d.parent_path() / "elsewhere");
         fs::copy_file(d / "tiny.onnx.data", d.parent_path() / "elsewhere" / "w.data");
         fs::create_directory_symlink("../elsewhere", d / "sub");
         set(t, "location", "sub/w.data");
       }, {"location 'sub/w.data' resolves to", "outside the model's folder"}},
      {"missing", [](auto& t, const fs::path&) { set(t, "location", "missing.data"); },
       {"'missing.data' (in the model's folder", "no such file"}},
      {"a folder", [](auto& t, const fs::path& d) {
         fs::create_directories(d / "folder");
         set(t, "location", "folder");
       }, {"'folder' (in the model's folder", "a directory, not a regular file"}},
      {"empty location", [](auto& t, const fs::path&) { set(t, "location", ""); }, {"empty location"}},
      {"no location", [](auto& t, const fs::path&) { t.mutable_external_data()->DeleteSubrange(0, 1); },
       {"external_data has no location"}},
      {"offset past the end", [](auto& t, const fs::path&) { set(t, "offset", "5000"); },
       {"offset 5000 is past the end of 'tiny.onnx.data' (432 bytes)"}},
      {"range past the end", [](auto& t, const fs::path&) { set(t, "offset", "8"); },
       {"432 bytes from offset 8 lie past the end of 'tiny.onnx.data' (432 bytes)"}},
      {"length too small", [](auto& t, const fs::path&) { set(t, "length", "428"); },
       {"length 428 of 'tiny.onnx.data' is not the tensor's 432 bytes"}},
      {"length too large", [](auto& t, const fs::path&) { set(t, "length", "18446744073709551615"); },
       {"length 18446744073709551615 of 'tiny.onnx.data' is not the tensor's 432 bytes"}},
      {"rest of the file too short", [](auto& t, const fs::path&) {
         t.mutable_external_data()->DeleteSubrange(2, 1);
         set(t, "offset", "4");
       }, {"the tensor takes 432 bytes but 'tiny.onnx.data' holds 428 from offset 4 to its end"}},
      {"negative offset", [](auto& t, const fs::path&) { set(t, "offset", "-4"); },
       {"offset '-4' of 'tiny.onnx.data' is not a byte count"}},
      {"offset in hex", [](auto& t, const fs::path&) { set(t, "offset", "0x10"); }, {"offset '0x10'"}},
      {"offset too large", [](auto& t, const fs::path&) { set(t, "offset", "99999999999999999999"); },
       {"offset '99999999999999999999' of 'tiny.onnx.data' is not a byte count"}},
      {"length with a space", [](auto& t, const fs::path&) { set(t, "length", "432 "); }, {"length '432 '"}},
      {"unknown key", [](auto& t, const fs::path&) { set(t, "compression", "zstd"); },
       {"external_data key 'compression' is not supported"}},
      {"key twice", [](auto& t, const fs::path&) { set_entry(t, "offset", "0"); },
       {"external_data gives 'offset' twice"}},
      {"inline too", [](auto& t, const fs::path&) { t.set_raw_data(std::string(432, '\0')); },
       {"keeps its data in an external file and in the model too"}},
      {"entries but not external", [](auto& t, const fs::path&) {
         t.set_data_location(::onnx::TensorProto::DEFAULT);
       }, {"has external_data entries but data_location DEFAULT"}},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    fs::remove_all(root_);
    fs::create_directories(dir_);
    const std::string path = save_with([&](::onnx::TensorProto& t) { c.edit(t, dir_); });
    bool thrown = false;
    try {
      load(path);
    } catch (const Error& e) {
      thrown = true;
      EXPECT_TRUE(message_contains(e.what(), {path.c_str(), "initializer 'conv.weight'"}));
      for (const std::string& s : c.says) EXPECT_TRUE(message_contains(e.what(), {s.c_str()}));
    }
    EXPECT_TRUE(thrown) << "not refused";
  }
}

TEST_F(OnnxExternalData, EveryBadInitializerIsNamedInOneError) {
  OnnxBuilder b = tiny_model();
  move_to_external_file(b.model(), dir_, "a.data", {"conv.weight", "fc.weight"});
  set(initializer(b, "conv.weight"), "location", "../a.data");
  set(initializer(b, "fc.weight"), "length", "4");
  save(b.model(), dir_ / "tiny.onnx");
  EXPECT_STRATA_ERROR(load((dir_ / "tiny.onnx").string()), "2 problems", "initializer 'conv.weight' [4,3,3,3] FLOAT",
                      "'..' is not allowed", "initializer 'fc.weight' [2,4] FLOAT",
                      "length 4 of 'a.data' is not the tensor's 32 bytes");
}

TEST_F(OnnxExternalData, ModelsFromMemoryMustBeSelfContained) {
  const std::string path = save_with(nullptr);
  OnnxBuilder b = tiny_model();
  move_to_external_file(b.model(), dir_, "tiny.onnx.data", {"conv.weight"});
  EXPECT_STRATA_ERROR(onnx::import_model(b.bytes(), DispatchMode::virtual_call, "reference", "bytes.onnx"),
                      "bytes.onnx", "initializer 'conv.weight'", "the model was read from memory",
                      "load it from its file", "'tiny.onnx.data' beside it");
  // With the folder given, the same bytes import.
  EXPECT_NO_THROW(onnx::import_model(b.bytes(), DispatchMode::virtual_call, "reference", "bytes.onnx", dir_));
  EXPECT_NO_THROW(load(path));
}

}  // namespace
}  // namespace strata::testing
