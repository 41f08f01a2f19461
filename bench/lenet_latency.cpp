// lenet_latency: the time to classify one image with LeNet-5, the measurement of Gu, Gozum & Lam,
// "Performance and User-friendliness of low-level and higher-level deep neural network frameworks",
// for strata: every dispatch mode (virtual, static, direct, and graph on the cuda backend) on every
// backend built and usable here, side by side in one process.
//
//   lenet_latency --json lenet.json                       # every usable backend but reference and null
//   lenet_latency --backends onednn --modes static,direct --rounds 20
//   lenet_latency --null                                  # and the null backend: strata's own overhead
//   lenet_latency --export DIR                            # weights, input and logits for the peers
//
// The model is nn/lenet.h's (both of the paper's variants by default: "tensorflow", conv 32/64 'same'
// and a 1024-wide dense layer; "keras", conv 5/12 'valid' and 128), f32, eval mode, one 1x1x28x28
// image (a fixed synthetic pattern, normalised as Fashion-MNIST is: the time does not depend on the
// values), PyTorch's default initialisation with seed 0 (untrained: the class is meaningless). Every
// model of a variant gets the weights of the first one, so all compute the same function.
//
// Two times per call, in microseconds:
//   e2e       the image in host memory to the logits in host memory: predict() on the host tensor and
//             the logits read back (on the GPU: the copy in, the forward, the copy out and the wait)
//   resident  the input already in the model's input buffer (nn::Model::input_buffer), the logits left
//             where the model put them, then Backend::synchronize()
// On a CPU backend the two differ by the input copy that direct mode makes.
//
// Protocol. Backends one after another (200 ms apart, so that a library's spinning threads park
// before the next one starts); for each backend one model per mode, `--warmup` untimed calls of each
// (graph mode plans on the first call and captures on the second), then `--rounds` rounds in which
// every mode takes one turn: `--warm-calls` untimed calls, then `--calls` timed calls of each kind.
// The order of the turns alternates so that no mode is always first after another's: round r runs
// the modes rotated by r/2, reversed when r is odd (ABCD, DCBA, BCDA, ADCB, ...). A round's time is
// the median of its calls; the table gives, per mode, the median over rounds and the range (min-max)
// of the rounds' medians. tools/lenet-table.sh runs several processes and takes medians over them.
//
// Checks (the run fails, exit status 1, when one fails; the timings are still written): within a
// backend every mode's logits are bitwise those of the first mode (strata's modes share plans and
// algorithms, docs: DESIGN "Invariants"), e2e and resident alike; every backend's logits are within
// --tolerance (relative to the largest reference logit) of the reference backend's. The null backend
// computes nothing and is timed unchecked (strata's own overhead).
//
// Threads: as the environment sets them before the process starts (OMP_NUM_THREADS for oneDNN's
// OpenMP pool, OPENBLAS_NUM_THREADS for OpenBLAS's own), recorded in the JSON.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "strata/backends/api/registry.h"
#include "strata/backends/static_backends.h"
#include "strata/core/exit_status.h"
#include "strata/core/version.h"
#include "strata/nn/nn.h"
#include "strata/nn/safetensors.h"
#include "study/stats.h"

using namespace strata;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kSide = 28;  // MNIST's and Fashion-MNIST's images, the paper's input

struct Options {
  std::vector<std::string> variants{"tensorflow", "keras"};
  std::vector<std::string> backends;  // empty: every usable one but reference and null
  std::vector<std::string> modes{"virtual", "static", "direct", "graph"};
  int rounds = 10;
  int calls = 30;
  int warm_calls = 5;
  int warmup = 20;
  double tolerance = 1e-4;
};

// The fixed input: a pattern in [0, 1) normalised with Fashion-MNIST's mean and standard deviation.
Tensor input_image() {
  std::vector<float> v(static_cast<size_t>(kSide * kSide));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.2860f) / 0.3530f;
  return Tensor::from_vector(v, Shape{1, 1, kSide, kSide});
}

nn::LeNetConfig lenet_config(const std::string& variant) {
  nn::LeNetConfig c;
  c.variant = nn::parse_lenet_variant(variant);
  c.input_size = kSide;
  return c;
}

std::unique_ptr<nn::Model> make_model(const std::string& variant, ops::DispatchMode mode, const std::string& backend) {
  nn::ModelOptions mo;
  mo.borrowed_results = true;  // no copy of direct and graph modes' planned outputs (read before the next call)
  auto m = nn::make_lenet(lenet_config(variant), mode, backend, mo);
  m->eval();
  return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// NaN when either holds one (so that no tolerance passes it).
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!(e <= d)) d = e;
  }
  return d;
}

double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

// One mode of one backend: its model, its resident input, its rounds and its latest logits.
struct Case {
  ops::DispatchMode mode;
  std::unique_ptr<nn::Model> model;
  Tensor resident_in;
  std::vector<double> e2e_rounds, resident_rounds;  // per round: median us of its calls
  std::vector<float> e2e_logits, resident_logits;
};

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

std::vector<float> call_e2e(Case& c, const Tensor& x) { return c.model->predict(x).to_vector<float>(); }

void call_resident(Case& c, backends::Backend& be) {
  Tensor y = c.model->predict(c.resident_in);
  be.synchronize();
}

// Rounds in alternating order; fills each case's round medians and latest logits.
void run_rounds(std::vector<Case>& cases, backends::Backend& be, const Tensor& x, const Options& o) {
  for (Case& c : cases)
    for (int i = 0; i < o.warmup; ++i) {
      c.e2e_logits = call_e2e(c, x);
      call_resident(c, be);
    }
  const size_t n = cases.size();
  std::vector<double> t(static_cast<size_t>(o.calls));
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = (i + static_cast<size_t>(r / 2)) % n;
    if (r % 2 == 1) std::reverse(order.begin(), order.end());
    for (size_t k : order) {
      Case& c = cases[k];
      for (int i = 0; i < o.warm_calls; ++i) call_e2e(c, x);
      for (auto& ti : t) {
        const auto t0 = Clock::now();
        c.e2e_logits = call_e2e(c, x);
        ti = us_since(t0);
      }
      c.e2e_rounds.push_back(study::quantile(t, 0.5));
      for (auto& ti : t) {
        const auto t0 = Clock::now();
        call_resident(c, be);
        ti = us_since(t0);
      }
      c.resident_rounds.push_back(study::quantile(t, 0.5));
    }
  }
  for (Case& c : cases) c.resident_logits = c.model->predict(c.resident_in).to_vector<float>();
}

json rounds_json(const std::vector<double>& v) {
  const study::Summary s = study::summarize(v);
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"rounds", v}};
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Every backend of the build that can run here, but the oracle and the one that computes nothing.
std::vector<std::string> default_backends() {
  std::vector<std::string> out;
  for (const std::string& n : backends::registry().names())
    if (n != "reference" && n != "null") out.push_back(n);
  return out;
}

// The reference backend's model of `variant`: the weights every other model copies, and the logits
// they are checked against.
struct Oracle {
  std::unique_ptr<nn::Model> model;
  std::vector<float> logits;
};

Oracle make_oracle(const std::string& variant, const Tensor& x) {
  Oracle o{make_model(variant, ops::DispatchMode::virtual_call, "reference"), {}};
  o.logits = o.model->predict(x).to_vector<float>();
  return o;
}

// Times one variant on one backend; appends its rows to `rows` and returns the failed checks.
int run_backend(const std::string& variant, const std::string& backend, const Oracle& oracle, const Tensor& x,
                const Options& o, json& rows) {
  backends::Backend& be = backends::registry().get(backend);
  const bool device = be.device_type() != DeviceType::cpu;
  std::vector<Case> cases;
  for (const std::string& m : o.modes) {
    const ops::DispatchMode mode = ops::parse_dispatch_mode(m);
    if (mode == ops::DispatchMode::graph && !device) continue;  // CUDA graphs: a device backend's mode
    Case c{mode, make_model(variant, mode, backend), {}, {}, {}, {}, {}};
    c.model->load_state_dict(oracle.model->state_dict());
    c.resident_in = c.model->input_buffer(x.sizes());
    copy_into(x, c.resident_in);
    cases.push_back(std::move(c));
  }
  if (cases.empty()) return 0;
  run_rounds(cases, be, x, o);

  int failed = 0;
  const bool computes = backend != "null";
  const double scale = std::max(1.0, max_abs(oracle.logits));
  const double direct_e2e = [&]() -> double {
    for (const Case& c : cases)
      if (c.mode == ops::DispatchMode::direct) return study::quantile(c.e2e_rounds, 0.5);
    return NAN;
  }();
  for (const Case& c : cases) {
    const std::string mode(ops::dispatch_mode_name(c.mode));
    json checks = json::object();
    bool ok = true;
    if (computes) {
      const bool same = same_bits(c.e2e_logits, cases[0].e2e_logits) && same_bits(c.resident_logits, c.e2e_logits);
      const double diff = max_abs_diff(c.e2e_logits, oracle.logits);
      checks["bitwise_equal_to"] = std::string(ops::dispatch_mode_name(cases[0].mode));
      checks["bitwise_equal"] = same;
      checks["max_abs_diff_vs_reference"] = diff;
      checks["tolerance_abs"] = o.tolerance * scale;
      ok = same && diff <= o.tolerance * scale;
      if (!same)
        std::fprintf(stderr, "lenet_latency: %s %s %s: logits differ from %s mode's (or e2e from resident)\n",
                     variant.c_str(), backend.c_str(), mode.c_str(),
                     std::string(ops::dispatch_mode_name(cases[0].mode)).c_str());
      if (!(diff <= o.tolerance * scale))
        std::fprintf(stderr, "lenet_latency: %s %s %s: logits differ from the reference backend's by %.3g (> %.3g)\n",
                     variant.c_str(), backend.c_str(), mode.c_str(), diff, o.tolerance * scale);
    }
    if (!ok) ++failed;
    const double e2e = study::quantile(c.e2e_rounds, 0.5), res = study::quantile(c.resident_rounds, 0.5);
    std::printf("%-10s %-9s %-8s %10.1f (%.1f-%.1f) %10.1f (%.1f-%.1f) %8.2f  %s\n", variant.c_str(), backend.c_str(),
                mode.c_str(), e2e, *std::min_element(c.e2e_rounds.begin(), c.e2e_rounds.end()),
                *std::max_element(c.e2e_rounds.begin(), c.e2e_rounds.end()), res,
                *std::min_element(c.resident_rounds.begin(), c.resident_rounds.end()),
                *std::max_element(c.resident_rounds.begin(), c.resident_rounds.end()), e2e / direct_e2e,
                !computes ? "unchecked (null computes nothing)" : ok ? "ok" : "FAILED");
    std::fflush(stdout);
    rows.push_back({{"framework", "strata"},
                    {"variant", variant},
                    {"backend", backend},
                    {"mode", mode},
                    {"device", device ? "gpu" : "cpu"},
                    {"status", ok ? "ok" : "check failed"},
                    {"describe", c.model->describe()},
                    {"e2e_us", rounds_json(c.e2e_rounds)},
                    {"resident_us", rounds_json(c.resident_rounds)},
                    {"checks", checks},
                    {"logits", c.e2e_logits}});
  }
  return failed;
}

// The weights, the input and the reference backend's logits of each variant, for the peers
// (bench/peers/pytorch_lenet.py, jax_lenet.py): DIR/lenet_<variant>.safetensors.
void export_io(const Options& o, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const Tensor x = input_image();
  for (const std::string& v : o.variants) {
    const Oracle oracle = make_oracle(v, x);
    nn::StateDict sd = oracle.model->state_dict();
    sd.emplace_back("input", x);
    sd.emplace_back("logits", Tensor::from_vector(oracle.logits, Shape{1, static_cast<int64_t>(oracle.logits.size())}));
    const nn::LeNetConfig c = lenet_config(v);
    const nn::safetensors::Metadata meta{{"variant", v},
                                         {"padding", c.variant == nn::LeNetVariant::keras ? "0" : "2"},
                                         {"describe", oracle.model->describe()},
                                         {"logits_from", "strata reference backend"},
                                         {"strata_version", std::string(version())}};
    const std::string path = dir + "/lenet_" + v + ".safetensors";
    nn::safetensors::save(path, sd, meta);
    std::printf("lenet_latency: wrote %s (%s)\n", path.c_str(), oracle.model->describe().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"LeNet-5, one image, in each dispatch mode on each backend (Gu, Gozum & Lam's measurement)"};
  Options o;
  std::string json_path, export_dir;
  app.add_option("--variants", o.variants, "LeNet variants: tensorflow, keras")
      ->delimiter(',')
      ->check(CLI::IsMember({"tensorflow", "keras"}));
  app.add_option("--backends", o.backends, "backends (default: every usable one but reference and null)")
      ->delimiter(',');
  bool with_null = false;
  app.add_flag("--null", with_null, "time the null backend too (it computes nothing: strata's own overhead)");
  app.add_option("--modes", o.modes, "dispatch modes (graph: device backends only)")
      ->delimiter(',')
      ->check(CLI::IsMember({"virtual", "static", "direct", "graph"}));
  app.add_option("--rounds", o.rounds, "rounds of turns, in alternating order")->check(CLI::Range(1, 100000));
  app.add_option("--calls", o.calls, "timed calls per turn and kind (e2e, resident)")->check(CLI::Range(1, 1000000));
  app.add_option("--warm-calls", o.warm_calls, "untimed calls at the start of each turn")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--warmup", o.warmup, "untimed calls of each mode before the first round")
      ->check(CLI::Range(2, 1000000));
  app.add_option("--tolerance", o.tolerance,
                 "largest |logit - reference logit|, relative to the largest reference logit")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "write the results here");
  app.add_option("--export", export_dir, "write DIR/lenet_<variant>.safetensors (weights, input, logits) and exit");
  app.set_version_flag("--version", version_line("lenet_latency"));
  STRATA_CLI11_PARSE(app, argc, argv);

  try {
    if (!export_dir.empty()) {
      export_io(o, export_dir);
      return kExitSuccess;
    }
    if (o.backends.empty()) o.backends = default_backends();
    if (with_null && std::find(o.backends.begin(), o.backends.end(), "null") == o.backends.end())
      o.backends.push_back("null");
    for (const std::string& b : o.backends) {
      backends::Backend& be = backends::registry().get(b);  // the registry's error lists the built ones
      const bool has_graph = std::find(o.modes.begin(), o.modes.end(), "graph") != o.modes.end();
      if (has_graph && o.modes.size() == 1 && be.device_type() == DeviceType::cpu) {
        std::fprintf(stderr,
                     "lenet_latency: --modes graph: backend '%s' runs on the CPU (graph mode captures CUDA graphs)\n",
                     b.c_str());
        return kExitUsage;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lenet_latency: %s\n", e.what());
    return kExitUsage;
  }

  json be_describe = json::object();
  for (const std::string& b : o.backends) be_describe[b] = backends::registry().get(b).describe();
  json out = {{"program", "lenet_latency"},
              {"version", std::string(version())},
              {"framework", "strata"},
              {"input", "1x1x28x28 f32, synthetic pattern normalised as Fashion-MNIST"},
              {"protocol",
               {{"rounds", o.rounds},
                {"calls", o.calls},
                {"warm_calls", o.warm_calls},
                {"warmup", o.warmup},
                {"order", "modes rotated by round/2, reversed on odd rounds"},
                {"statistic", "median of each round's calls; median and min-max over rounds"}}},
              {"environment",
               {{"OMP_NUM_THREADS", env_or("OMP_NUM_THREADS", "(unset)")},
                {"OPENBLAS_NUM_THREADS", env_or("OPENBLAS_NUM_THREADS", "(unset)")},
                {"OMP_WAIT_POLICY", env_or("OMP_WAIT_POLICY", "(unset)")},
                {"hardware_concurrency", std::thread::hardware_concurrency()},
                {"loadavg_start", loadavg()},
                {"backends", backends::registry().describe()},
                {"backend_describe", be_describe}}},
              {"results", json::array()}};
  std::printf("lenet_latency | %s | threads: OMP %s, OpenBLAS %s | load %s\n", backends::registry().describe().c_str(),
              env_or("OMP_NUM_THREADS", "-").c_str(), env_or("OPENBLAS_NUM_THREADS", "-").c_str(), loadavg().c_str());
  std::printf("%-10s %-9s %-8s %10s %-13s %10s %-13s %8s  %s\n", "variant", "backend", "mode", "e2e_us", "(range)",
              "resident", "(range)", "/direct", "check");
  int failed = 0;
  try {
    const Tensor x = input_image();
    for (const std::string& v : o.variants) {
      const Oracle oracle = make_oracle(v, x);
      for (const std::string& b : o.backends) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        failed += run_backend(v, b, oracle, x, o, out["results"]);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lenet_latency: %s\n", e.what());
    out["error"] = e.what();
    failed += 1;
  }
  out["environment"]["loadavg_end"] = loadavg();
  out["failed_checks"] = failed;
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(1) << "\n";
    if (!f) {
      std::fprintf(stderr, "lenet_latency: cannot write %s\n", json_path.c_str());
      return kExitFailure;
    }
  }
  if (failed > 0) {
    std::fprintf(stderr, "lenet_latency: %d check(s) failed (see above)\n", failed);
    return kExitFailure;
  }
  return kExitSuccess;
}
