// strata_train's command line: defaults, and clear errors for unknown models,
// backends, dispatch modes, precisions and datasets.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "strata/backends/api/registry.h"
#include "examples/train/options.h"
#include "examples/train/presets.h"
#include "support/expect_error.h"

namespace strata::testing {
namespace {

// Parses a command line (without the program name); returns CLI11's error message, or
// "" when it parsed.
std::string parse(train::TrainOptions& o, const std::string& args) {
  auto app = train::make_cli(o);
  try {
    app->parse(args, false);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainCli, DefaultsResolveToFashionMnistLeNetOnTheBestCpuBackend) {
  train::TrainOptions o;
  ASSERT_EQ(parse(o, ""), "");
  const train::RunConfig r = train::resolve(o);
  EXPECT_EQ(r.o.dataset, "fashion-mnist");
  EXPECT_EQ(r.o.data_dir, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(r.o.model, "lenet");
  EXPECT_EQ(r.o.epochs, 3);
  EXPECT_EQ(r.o.precision, "fp32");
  EXPECT_EQ(r.mode, ops::DispatchMode::direct);
  EXPECT_EQ(r.o.backend, train::best_cpu_backend());
  EXPECT_EQ(r.backend_note, "best CPU backend built");
  const auto names = backends::registry().names();
  const bool has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); }("onednn");
  if (has) {
    EXPECT_EQ(r.o.backend, "onednn");
  }
}

TEST(TrainCli, OptionsAreParsed) {
  train::TrainOptions o;
  ASSERT_EQ(parse(o, "--model resnet18 --backend reference --dispatch static --epochs 7 --batch-size 32 --lr 0.2 "
                     "--init xavier_uniform --seed 9 --data-dir /tmp/x --checkpoint c.safetensors --resume r.safetensors "
                     "--train-limit 100 --test-limit 50 --augment --metrics m.jsonl"),
            "");
  const train::RunConfig r = train::resolve(o);
  EXPECT_EQ(r.o.model, "resnet18");
  EXPECT_EQ(r.o.backend, "reference");
  EXPECT_EQ(r.backend_note, "chosen with --backend");
  EXPECT_EQ(r.mode, ops::DispatchMode::static_call);
  EXPECT_EQ(r.o.epochs, 7);
  EXPECT_EQ(r.o.batch_size, 32);
  EXPECT_DOUBLE_EQ(r.lr, 0.2);
  EXPECT_EQ(r.o.init, "xavier_uniform");
  EXPECT_EQ(r.o.seed, 9u);
  EXPECT_EQ(r.o.data_dir, "/tmp/x");
  EXPECT_EQ(r.o.checkpoint, "c.safetensors");
  EXPECT_EQ(r.o.resume, "r.safetensors");
  EXPECT_EQ(r.o.train_limit, 100);
  EXPECT_EQ(r.o.test_limit, 50);
  EXPECT_EQ(r.o.augment, 1);
  EXPECT_DOUBLE_EQ(r.weight_decay, 5e-4);  // resnet default
}

TEST(TrainCli, UnknownModelDispatchAndDatasetAreRejectedByTheParser) {
  train::TrainOptions o;
  std::string msg = parse(o, "--model vgg16");
  EXPECT_NE(msg.find("--model: vgg16 not in {lenet,resnet18,resnet50}"), std::string::npos) << msg;
  msg = parse(o, "--dispatch jit");
  EXPECT_NE(msg.find("--dispatch: jit not in {virtual,static,direct,graph}"), std::string::npos) << msg;
  msg = parse(o, "--dataset imagenet");
  EXPECT_NE(msg.find("imagenet not in {fashion-mnist,mnist,cifar10,stl10,voc,imagefolder}"), std::string::npos) << msg;
  msg = parse(o, "--epochs three");
  EXPECT_NE(msg.find("--epochs"), std::string::npos) << msg;
  msg = parse(o, "--frobnicate");
  EXPECT_NE(msg.find("frobnicate"), std::string::npos) << msg;
}

TEST(TrainCli, UnknownBackendNamesTheBuiltOnes) {
  train::TrainOptions o;
  o.backend = "tpu";
  EXPECT_STRATA_ERROR(train::resolve(o), "backend 'tpu' is not built into this strata; built: ", "reference");
}

TEST(TrainCli, MixedPrecisionNeedsABf16BackendAndATapeMode) {
  train::TrainOptions o;
  o.backend = "reference";  // f32/f64 only
  o.precision = "bf16";
  EXPECT_STRATA_ERROR(train::resolve(o), "precision 'bf16' is not supported on backend 'reference'",
                      "supported: fp32");
  o.precision = "fp16";
  EXPECT_STRATA_ERROR(train::resolve(o), "precision 'fp16' is not supported on backend 'reference'",
                      "its convolutions and matrix products run in f32, f64");
  o.precision = "fp8";
  EXPECT_STRATA_ERROR(train::resolve(o), "unknown precision 'fp8'", "fp32, bf16, fp16");
}

TEST(TrainCli, Tf32IsForTheCudaBackendOnly) {
  train::TrainOptions o;
  o.backend = "reference";
  o.tf32 = true;
  EXPECT_STRATA_ERROR(train::resolve(o), "--tf32 applies to the cuda backend only", "'reference'");
}

TEST(TrainCli, GraphDispatchSaysWhatItNeeds) {
  train::TrainOptions o;
  o.dispatch = "graph";
  o.backend = "reference";
  EXPECT_STRATA_ERROR(train::resolve(o), "--dispatch graph", "needs --backend cuda", "'reference'");
}

TEST(TrainCli, OtherBadValuesNameWhatIsKnown) {
  train::TrainOptions o;
  o.backend = "reference";
  o.init = "he";
  EXPECT_STRATA_ERROR(train::resolve(o), "unknown policy 'he'", "kaiming_normal_fan_out");
  o.init = "";
  o.optimizer = "lamb";
  EXPECT_STRATA_ERROR(train::resolve(o), "lamb");
  o.optimizer = "";
  o.schedule = "poly";
  EXPECT_STRATA_ERROR(train::resolve(o), "unknown schedule 'poly'", "cosine");
  o.schedule = "cosine";
  o.dispatch = "jit";  // set directly, bypassing the parser's check
  EXPECT_STRATA_ERROR(train::resolve(o), "dispatch mode 'jit' is unknown");
}

TEST(TrainCli, HelpListsEveryPresetsFilesAndHowToGetThem) {
  train::TrainOptions o;
  const std::string help = train::make_cli(o)->help();
  for (const auto& p : train::dataset_presets()) {
    EXPECT_NE(help.find("  " + p.name + " "), std::string::npos) << p.name;
    EXPECT_NE(help.find(p.format), std::string::npos) << p.format;
    EXPECT_NE(help.find("get it with " + p.get_data), std::string::npos) << p.get_data;
  }
  EXPECT_NE(help.find("tools/get-data.sh cifar10 DIR"), std::string::npos) << help;
}

TEST(TrainCli, APresetWithoutADefaultDirectoryNeedsDataDir) {
  train::TrainOptions o;
  o.backend = "reference";
  o.dataset = "stl10";
  EXPECT_STRATA_ERROR(train::resolve(o), "stl10: no data directory given", "pass --data-dir",
                      "{train,test}_{X,y}.bin", "tools/get-data.sh stl10 DIR");
}

}  // namespace
}  // namespace strata::testing
