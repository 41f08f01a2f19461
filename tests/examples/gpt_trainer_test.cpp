// strata_gpt's run (examples/gpt/): GPT through nn::Model in the CPU dispatch modes bitwise alike,
// a resumed run bitwise the uninterrupted one (losses, weights, metrics), the metrics lines'
// content, the sample, and the command line's errors naming the option and its value.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "examples/gpt/gpt_options.h"
#include "examples/gpt/gpt_trainer.h"
#include "examples/train/options.h"
#include "strata/backends/api/registry.h"
#include "strata/nn/checkpoint.h"
#include "support/compare.h"
#include "support/expect_error.h"
#include "train_test_util.h"

namespace strata::testing {
namespace {

// A tiny model on a small corpus written by the test (byte tokens), on the reference backend.
gpt::GptOptions tiny(const std::filesystem::path& dir, const std::string& dispatch = "static") {
  const std::filesystem::path corpus = dir / "corpus.txt";
  std::ofstream(corpus) << std::string(
      "The jury said the election was conducted well. The city of Atlanta took the praise and the thanks.\n"
      "It recommended that the laws be studied and revised. The grand jury commented on other topics.\n");
  gpt::GptOptions o;
  o.data = corpus.string();
  o.held_out = 0.25;
  o.block = 8;
  o.layers = 1;
  o.heads = 2;
  o.embd = 8;
  o.backend = "reference";
  o.dispatch = dispatch;
  o.steps = 6;
  o.batch = 2;
  o.warmup = 2;
  o.eval_every = 3;
  o.eval_batches = 2;
  o.lr = 1e-2;
  o.seed = 5;
  o.progress = false;
  o.sample = 0;
  return o;
}

gpt::GptRunResult train(const gpt::GptOptions& o, nn::StateDict* state = nullptr) {
  gpt::GptTrainer t(gpt::resolve_gpt(o), nullptr, nullptr);
  gpt::GptRunResult r = t.run();
  if (state) *state = t.model().state_dict();
  return r;
}

void expect_same_state(const nn::StateDict& a, const nn::StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << a[i].first;
}

TEST(GptTrainer, TheCpuDispatchModesTrainBitwiseAlike) {
  const auto dir = temp_dir("gpt_modes");
  nn::StateDict first;
  const gpt::GptRunResult v = train(tiny(dir, "virtual"), &first);
  ASSERT_EQ(v.losses.size(), 6u);
  EXPECT_LT(v.losses.back(), v.losses.front());
  for (const char* mode : {"static", "direct"}) {
    SCOPED_TRACE(mode);
    nn::StateDict state;
    const gpt::GptRunResult r = train(tiny(dir, mode), &state);
    EXPECT_EQ(r.losses, v.losses);  // every double, bit for bit
    ASSERT_EQ(r.lines.size(), 2u);
    EXPECT_EQ(r.lines[1].test_loss, v.lines[1].test_loss);
    expect_same_state(state, first);
  }
}

TEST(GptTrainer, AResumedRunIsBitwiseTheUninterruptedOne) {
  for (const char* mode : {"static", "direct"}) {
    SCOPED_TRACE(mode);
    const auto dir = temp_dir(std::string("gpt_resume_") + mode);
    gpt::GptOptions full = tiny(dir, mode);
    full.metrics = (dir / "full.jsonl").string();
    nn::StateDict whole;
    const gpt::GptRunResult a = train(full, &whole);

    gpt::GptOptions first = tiny(dir, mode);
    first.checkpoint = (dir / "gpt.safetensors").string();
    first.metrics = (dir / "parts.jsonl").string();
    first.stop_after_steps = 4;  // inside the second stretch of 3 steps: its loss sum goes into the checkpoint
    const gpt::GptRunResult b = train(first);
    EXPECT_TRUE(b.interrupted);
    EXPECT_EQ(b.steps, 4);
    EXPECT_EQ(nn::safetensors::load(first.checkpoint).metadata.at("strata.step"), "4");

    gpt::GptOptions second = first;
    second.stop_after_steps = 0;
    second.resume = first.checkpoint;
    nn::StateDict resumed;
    const gpt::GptRunResult c = train(second, &resumed);
    ASSERT_EQ(c.losses.size(), 2u);
    EXPECT_EQ(c.losses[0], a.losses[4]);
    EXPECT_EQ(c.losses[1], a.losses[5]);
    expect_same_state(resumed, whole);
    // The second stretch's line holds its three steps, two of them trained before the stop.
    ASSERT_EQ(c.lines.size(), 1u);
    EXPECT_EQ(c.lines[0].train_loss, a.lines[1].train_loss);
    EXPECT_EQ(c.lines[0].test_loss, a.lines[1].test_loss);
    EXPECT_TRUE(c.lines[0].resumed);
    EXPECT_FALSE(a.lines[1].resumed);
    // One run id in the file across the resume.
    std::ifstream parts(first.metrics);
    std::vector<nlohmann::json> lines;
    for (std::string l; std::getline(parts, l);) lines.push_back(nlohmann::json::parse(l));
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].at("run_id"), lines[1].at("run_id"));
    EXPECT_EQ(lines[1].at("step"), 6);
  }
}

TEST(GptTrainer, MetricsLinesSayWhatRanAndHowItWent) {
  const auto dir = temp_dir("gpt_metrics");
  gpt::GptOptions o = tiny(dir, "direct");
  o.metrics = (dir / "m.jsonl").string();
  const gpt::GptRunResult r = train(o);
  std::ifstream in(o.metrics);
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 2u);
  const nlohmann::json& j = lines[1];
  for (const char* key : {"run_id", "time", "step", "dataset", "model", "backend", "dispatch", "precision", "seed",
                          "lr", "steps", "train_loss", "test_loss", "train_tokens", "test_tokens", "train_seconds",
                          "eval_seconds", "tokens_per_second", "peak_memory_bytes", "max_rss_bytes", "resumed"})
    EXPECT_TRUE(j.contains(key)) << key << " in " << j.dump();
  EXPECT_EQ(j.at("step"), 6);
  EXPECT_EQ(j.at("steps"), 6);
  EXPECT_EQ(j.at("model"), "gpt");
  EXPECT_EQ(j.at("dataset"), "text:plain");
  EXPECT_EQ(j.at("backend"), "reference");
  EXPECT_EQ(j.at("dispatch"), "direct");
  EXPECT_EQ(j.at("precision"), "fp32");
  EXPECT_EQ(j.at("seed"), 5);
  EXPECT_EQ(j.at("train_tokens"), 3 * 2 * 8);  // three steps of 2 x 8 tokens since the first line
  EXPECT_EQ(j.at("test_tokens"), 2 * 2 * 8);
  EXPECT_DOUBLE_EQ(j.at("train_loss").get<double>(), (r.losses[3] + r.losses[4] + r.losses[5]) / 3);
  EXPECT_DOUBLE_EQ(j.at("test_loss").get<double>(), r.lines[1].test_loss);
  EXPECT_GT(j.at("tokens_per_second").get<double>(), 0);
  EXPECT_EQ(j.at("resumed"), false);
  EXPECT_EQ(lines[0].at("step"), 3);
  EXPECT_GT(lines[0].at("lr").get<double>(), j.at("lr").get<double>());  // the cosine falls
}

TEST(GptTrainer, SamplesFromTheCheckpointOfAFinishedRun) {
  const auto dir = temp_dir("gpt_sample");
  gpt::GptOptions o = tiny(dir);
  o.checkpoint = (dir / "gpt.safetensors").string();
  o.sample = 12;
  o.prompt = "The";
  std::string after_training;
  {
    gpt::GptTrainer t(gpt::resolve_gpt(o), nullptr, nullptr);
    t.run();
    after_training = t.sample();
  }
  EXPECT_EQ(after_training.size(), 3u + 12u);
  EXPECT_EQ(after_training.rfind("The", 0), 0u);
  gpt::GptOptions again = o;
  again.resume = o.checkpoint;
  gpt::GptTrainer t(gpt::resolve_gpt(again), nullptr, nullptr);
  EXPECT_TRUE(t.run().losses.empty());  // at the last step: nothing to train
  EXPECT_EQ(t.sample(), after_training);
}

TEST(GptTrainer, AResumeOfAnotherModelNamesTheOptions) {
  const auto dir = temp_dir("gpt_other_model");
  gpt::GptOptions o = tiny(dir);
  o.checkpoint = (dir / "gpt.safetensors").string();
  o.steps = 2;
  train(o);
  gpt::GptOptions other = o;
  other.resume = o.checkpoint;
  other.checkpoint.clear();
  other.embd = 16;
  EXPECT_STRATA_ERROR(gpt::GptTrainer(gpt::resolve_gpt(other), nullptr, nullptr), "holds another model",
                      "--embd 8 (this run: 16)", "pass the options of the original run (--embd 8)");
}

// The command line: what the parser refuses names the option and the value.
std::string parse_error(std::vector<std::string> args) {
  gpt::GptOptions o;
  auto app = gpt::make_gpt_cli(o);
  args.insert(args.begin(), "strata_gpt");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(GptOptions, BadValuesNameTheOptionAndTheValue) {
  EXPECT_NE(parse_error({"--data", "x", "--dispatch", "jit"}).find("--dispatch: jit not in"), std::string::npos);
  EXPECT_NE(parse_error({"--data", "x", "--precision", "int8"}).find("--precision: int8 not in"), std::string::npos);
  EXPECT_NE(parse_error({"--data", "x", "--clip", "-1"}).find("'-1' is outside [0, 1e+06]"), std::string::npos);
  EXPECT_NE(parse_error({"--data", "x", "--lr", "nan"}).find("'nan' is not a finite number"), std::string::npos);
  EXPECT_NE(parse_error({"--data", "x", "--nproc", "0"}).find("--nproc"), std::string::npos);
  EXPECT_NE(parse_error({"--data", "x", "--checkpoint-every", "-3"}).find("--checkpoint-every"), std::string::npos);
  EXPECT_EQ(parse_error({"--data", "x", "--dispatch", "direct", "--precision", "bf16", "--metrics", "m.jsonl"}), "");
}

TEST(GptOptions, WhatThisBuildCannotHonourIsAUsageError) {
  gpt::GptOptions o;
  o.data = "x";
  o.backend = "reference";
  auto refused = [&](gpt::GptOptions bad, std::initializer_list<const char*> parts) {
    try {
      gpt::resolve_gpt(bad);
      ADD_FAILURE() << "accepted";
    } catch (const train::UsageError& e) {
      for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  gpt::GptOptions graph = o;
  graph.dispatch = "graph";
  refused(graph, {"--dispatch graph", "--backend cuda", "'reference'"});
  gpt::GptOptions nproc = o;
  nproc.nproc = 2;
  refused(nproc, {"--nproc 2", "cuda backend", "'reference'"});
  gpt::GptOptions half = o;
  half.precision = "fp16";
  refused(half, {"precision 'fp16'", "backend 'reference'", "supported: fp32"});
  // A backend whose linear layers run bf16 but whose attention ops do not (onednn on a CPU with
  // native bf16): refused by the op, not after training started.
  const backends::Backend* onednn = backends::registry().find("onednn");
  if (onednn && onednn->supports(ops::OpId::linear_fwd, DType::bf16) &&
      !onednn->supports(ops::OpId::bmm, DType::bf16)) {
    gpt::GptOptions ops_half = o;
    ops_half.backend = "onednn";
    ops_half.precision = "bf16";
    refused(ops_half, {"precision 'bf16'", "backend 'onednn'", "for this model: its bmm runs in"});
  }
  gpt::GptOptions bpe = o;
  bpe.tokenizer = "gpt2";
  refused(bpe, {"--tokenizer gpt2 needs --bpe-dir"});
  gpt::GptOptions no_gpt2 = o;
  no_gpt2.bpe_dir = "dir";
  refused(no_gpt2, {"--bpe-dir is read only with --tokenizer gpt2", "not with --tokenizer byte"});
  gpt::GptOptions width = o;
  width.embd = 10;
  width.heads = 4;
  refused(width, {"--embd 10", "not a multiple of --heads 4"});
  gpt::GptOptions backend = o;
  backend.backend = "tpu";
  refused(backend, {"backend 'tpu' is not built"});
  gpt::GptOptions lr = o;
  lr.min_lr = 0.5;
  lr.lr = 0.1;
  refused(lr, {"--min-lr 0.5", "above --lr 0.1"});
  const gpt::GptRunConfig ok = gpt::resolve_gpt(o);
  EXPECT_EQ(ok.mode, ops::DispatchMode::virtual_call);
  EXPECT_FALSE(ok.compute.has_value());
}

}  // namespace
}  // namespace strata::testing
