// export_resnet50: ResNet-50 checkpoints between strata and torchvision, both ways,
// checked by the logits of one input (bench/peers/interop_resnet50.py is the PyTorch
// side; tools/gpu/bench.sh runs the round trip on the GPU).
//
//   export_resnet50 export --weights strata_w.safetensors --io strata_io.safetensors
//       strata's ResNet-50 (kaiming_normal_fan_out, seed 0) with random BatchNorm
//       affine parameters and running statistics (so eval mode is not the identity),
//       saved with nn::save_checkpoint; the io file holds a random input [2,3,224,224]
//       and strata's eval-mode logits for it (f32, TF32 off).
//   export_resnet50 check --weights tv_w.safetensors --io tv_io.safetensors
//       loads a torchvision state dict with nn::load_checkpoint (strict) in each
//       dispatch mode, runs the io file's input in eval mode and compares the logits
//       with the io file's: relative L2 error, max abs error, argmax agreement.
//       Exit status 0 when every mode is within --tolerance.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "strata/backends/api/registry.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "strata/nn/nn.h"

using namespace strata;
using json = nlohmann::json;

namespace {

constexpr int64_t kClasses = 1000;

std::unique_ptr<nn::Model> make_model(ops::DispatchMode mode, const std::string& backend) {
  nn::ResNetConfig rc;
  rc.depth = 50;
  rc.num_classes = kClasses;
  return nn::make_resnet(rc, mode, backend);
}

// BatchNorm weight/bias/running stats drawn at random (every 1-D entry but fc.bias).
void randomize_batch_norm(nn::Model& m, uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto u = [&](double lo, double hi) { return lo + (hi - lo) * static_cast<double>(gen() >> 11) * 0x1.0p-53; };
  nn::StateDict sd;
  for (const auto& [name, t] : m.state_dict()) {
    if (t.dim() != 1 || name.rfind("fc.", 0) == 0) continue;
    auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.ends_with(s); };
    double lo = 0, hi = 0;
    if (ends(".running_mean") || ends(".bias")) {
      lo = -0.2, hi = 0.2;
    } else if (ends(".running_var") || ends(".weight")) {
      lo = 0.5, hi = 1.5;
    } else {
      continue;
    }
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (float& x : v) x = static_cast<float>(u(lo, hi));
    sd.emplace_back(name, Tensor::from_vector(v, t.sizes()));
  }
  m.load_state_dict(sd, /*strict=*/false);
}

Tensor random_input(uint64_t seed, int64_t batch) {
  std::mt19937_64 gen(seed);
  std::vector<float> v(static_cast<size_t>(batch * 3 * 224 * 224));
  for (float& x : v) x = static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-53 * 4.0 - 2.0);
  return Tensor::from_vector(v, Shape{batch, 3, 224, 224});
}

Tensor to_host(const Tensor& t) {
  Tensor h = Tensor::empty(t.sizes(), t.dtype());
  copy_into(t, h);
  return h;
}

struct Diff {
  double rel_l2 = 0, max_abs = 0, ref_max_abs = 0;
  int64_t argmax_agree = 0, rows = 0;
};

Diff compare(const Tensor& got, const Tensor& want) {
  STRATA_CHECK(got.sizes() == want.sizes(), "compare: logits ", got.str(), " vs reference ", want.str());
  const std::vector<float> a = got.to_vector<float>(), b = want.to_vector<float>();
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = static_cast<double>(a[i]) - b[i];
    num += e * e;
    den += static_cast<double>(b[i]) * b[i];
    d.max_abs = std::max(d.max_abs, std::fabs(e));
    d.ref_max_abs = std::max(d.ref_max_abs, std::fabs(static_cast<double>(b[i])));
  }
  d.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  const int64_t cols = got.size(1);
  d.rows = got.size(0);
  for (int64_t r = 0; r < d.rows; ++r) {
    auto row_a = a.begin() + r * cols, row_b = b.begin() + r * cols;
    d.argmax_agree += std::max_element(row_a, row_a + cols) - row_a == std::max_element(row_b, row_b + cols) - row_b;
  }
  return d;
}

void write_json(const std::string& path, const json& j) {
  if (path.empty()) return;
  std::ofstream f(path);
  f << j.dump(1) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ResNet-50 checkpoints between strata and torchvision"};
  app.require_subcommand(1);
  std::string weights, io, json_path, backend = "cuda", mode_opt = "all";
  uint64_t seed = 0;
  int64_t batch = 2;
  double tolerance = 1e-4;
  auto* ex = app.add_subcommand("export", "write strata's weights, an input and strata's logits");
  auto* ck = app.add_subcommand("check", "load torchvision's weights and compare logits");
  for (auto* s : {ex, ck}) {
    s->add_option("--weights", weights, "the state dict (.safetensors)")->required();
    s->add_option("--io", io, "input and logits (.safetensors)")->required();
    s->add_option("--json", json_path, "write a summary here");
    s->add_option("--backend", backend, "cuda (default), or a CPU backend");
  }
  ex->add_option("--seed", seed, "seed of the BatchNorm values and the input");
  ex->add_option("--batch", batch, "input batch");
  ck->add_option("--mode", mode_opt, "virtual | static | direct | all")
      ->check(CLI::IsMember({"virtual", "static", "direct", "all"}));
  ck->add_option("--tolerance", tolerance, "largest relative L2 error of the logits that passes");
  app.set_version_flag("--version", version_line("export_resnet50"));
  STRATA_CLI11_PARSE(app, argc, argv);

  try {
    if (ex->parsed()) {
      auto model = make_model(ops::DispatchMode::virtual_call, backend);
      randomize_batch_norm(*model, seed + 1);
      model->eval();
      Tensor x = random_input(seed + 2, batch);
      Tensor logits = to_host(model->predict(x));
      nn::save_checkpoint(weights, model->module(), nullptr, 0, {{"strata.note", "export_resnet50"}});
      nn::safetensors::save(io, {{"input", x}, {"logits", logits}}, {{"format", "pt"}});
      const auto sd = model->state_dict();
      std::printf("export: %s | %zu entries -> %s; input %s and logits %s -> %s\n", model->describe().c_str(),
                  sd.size(), weights.c_str(), x.str().c_str(), logits.str().c_str(), io.c_str());
      write_json(json_path, {{"step", "strata export"},
                             {"status", "ok"},
                             {"entries", sd.size()},
                             {"parameters", model->num_parameters()},
                             {"describe", model->describe()}});
      return 0;
    }
    nn::safetensors::Contents c = nn::safetensors::load(io);
    const Tensor* x = nn::find_entry(c.tensors, "input");
    const Tensor* want = nn::find_entry(c.tensors, "logits");
    STRATA_CHECK(x && want, "check: ", io, " needs tensors 'input' and 'logits'");
    std::vector<ops::DispatchMode> modes;
    if (mode_opt == "all")
      modes = {ops::DispatchMode::virtual_call, ops::DispatchMode::static_call, ops::DispatchMode::direct};
    else
      modes = {ops::parse_dispatch_mode(mode_opt)};
    json out = {{"step", "torchvision -> strata"}, {"weights", weights}, {"tolerance", tolerance}, {"modes", json::array()}};
    bool all_ok = true;
    for (auto m : modes) {
      json r = {{"mode", std::string(ops::dispatch_mode_name(m))}};
      try {
        auto model = make_model(m, backend);
        nn::load_checkpoint(weights, model->module());
        model->eval();
        const Diff d = compare(to_host(model->predict(*x)), *want);
        const bool ok = std::isfinite(d.rel_l2) && d.rel_l2 <= tolerance && d.argmax_agree == d.rows;
        all_ok = all_ok && ok;
        r.update({{"status", ok ? "pass" : "FAIL"},
                  {"rel_l2", d.rel_l2},
                  {"max_abs", d.max_abs},
                  {"ref_max_abs", d.ref_max_abs},
                  {"argmax_agree", d.argmax_agree},
                  {"rows", d.rows}});
        std::printf("check %-8s: load_checkpoint ok (strict); logits rel L2 %.3g, max abs %.3g (|ref| max %.3g), "
                    "argmax %lld/%lld -> %s\n",
                    r["mode"].get<std::string>().c_str(), d.rel_l2, d.max_abs, d.ref_max_abs,
                    static_cast<long long>(d.argmax_agree), static_cast<long long>(d.rows), ok ? "pass" : "FAIL");
      } catch (const std::exception& e) {
        all_ok = false;
        r.update({{"status", "error"}, {"note", e.what()}});
        std::printf("check %-8s: error: %s\n", r["mode"].get<std::string>().c_str(), e.what());
      }
      out["modes"].push_back(r);
    }
    out["status"] = all_ok ? "pass" : "FAIL";
    write_json(json_path, out);
    return all_ok ? kExitSuccess : kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "export_resnet50: %s\n", e.what());
    return 1;
  }
}
