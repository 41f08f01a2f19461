#include "strata/codegen/generate.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "strata/codegen/cuda/emitter.h"
#include "strata/codegen/emitter.h"
#include "strata/core/error.h"
#ifdef STRATA_CODEGEN_ONEDNN
#include "strata/codegen/onednn/emitter.h"
#endif

namespace strata::codegen {

namespace fs = std::filesystem;

std::unique_ptr<Emitter> make_emitter(std::string_view backend) {
#ifdef STRATA_CODEGEN_ONEDNN
  if (backend == "onednn") return onednn::make_onednn_emitter();
#endif
  if (backend == "cuda") return cuda::make_cuda_emitter();
  STRATA_FAIL("strata_codegen: no emitter for backend '", backend, "' (there is: ",
#ifdef STRATA_CODEGEN_ONEDNN
              "onednn, "
#endif
              "cuda)");
}

namespace {

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  STRATA_CHECK(out.good(), "strata_codegen: could not write ", path.string());
}

// The output folder: new, or an existing one that is empty (or overwrite). Checked before
// the model runs, created once everything is checked.
void check_out_dir(const GenerateOptions& o) {
  STRATA_CHECK(!o.out_dir.empty(), "strata_codegen: no output folder given");
  const fs::path dir(o.out_dir);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    STRATA_CHECK(fs::is_directory(dir, ec), "strata_codegen: output folder ", o.out_dir,
                 " exists and is not a folder");
    STRATA_CHECK(o.overwrite || fs::is_empty(dir, ec), "strata_codegen: output folder ", o.out_dir,
                 " exists and is not empty; choose another or allow overwriting it (--force)");
  }
}

void create_out_dir(const GenerateOptions& o) {
  std::error_code ec;
  fs::create_directories(fs::path(o.out_dir), ec);
  STRATA_CHECK(!ec, "strata_codegen: could not create output folder ", o.out_dir, ": ", ec.message());
}

}  // namespace

namespace {

template <class Record, class After>
GenerateResult generate_step(const GenerateOptions& o, Record&& record, After&& after) {
  std::unique_ptr<Emitter> emitter = make_emitter(o.backend);
  check_out_dir(o);
  std::map<const void*, std::string> names;
  RecordedStep step = record(*emitter, names);
  step.model = o.description.empty() ? "a strata model" : o.description;
  BufferMap buffers(step, names);
  const std::vector<GeneratedFile> files = emitter->emit(step, buffers);
  // Everything is checked before the folder is touched: a refused model leaves nothing behind.
  create_out_dir(o);
  GenerateResult r;
  for (const GeneratedFile& f : files) {
    write_file(fs::path(o.out_dir) / f.name, f.text);
    r.files.push_back(f.name);
    const bool source = !f.binary && (f.name.ends_with(".cpp") || f.name.ends_with(".h") || f.name.ends_with(".cu"));
    const int64_t lines = source ? std::count(f.text.begin(), f.text.end(), '\n') : 0;
    r.code_lines += lines;
    if (f.name == "model.cpp") r.model_lines = lines;
  }
  after(*emitter, step, buffers);
  r.calls = static_cast<int64_t>(step.calls.size());
  r.arena_bytes = step.arena.bytes;
  r.weight_bytes = buffers.constants_bytes();
  return r;
}

}  // namespace

GenerateResult generate(nn::Model& model, const Tensor& x, const GenerateOptions& o) {
  return generate_step(
      o, [&](Emitter& e, std::map<const void*, std::string>& names) { return e.record(model, x, names); },
      [](Emitter&, const RecordedStep&, const BufferMap&) {});
}

GenerateResult generate_train_step(nn::Model& model, const Tensor& x, const Tensor& labels, nn::Optimizer& opt,
                                   const GenerateOptions& o) {
  return generate_step(
      o,
      [&](Emitter& e, std::map<const void*, std::string>& names) {
        return e.record_train(model, x, labels, opt, names);
      },
      [&](Emitter& e, const RecordedStep& step, const BufferMap& buffers) {
        if (o.check_steps <= 0) return;
        // strata's next steps on the same batch, from the state the weights file holds.
        const fs::path dir = fs::path(o.out_dir) / "check";
        fs::create_directories(dir);
        write_npy((dir / "input.npy").string(), x);
        write_npy((dir / "labels.npy").string(), labels);
        // A batch whose last label is one past the classes: model_train must refuse it by name.
        Tensor bad = labels.clone();
        int64_t classes = 0;
        for (const RecordedCall& c : step.calls)
          if (const auto* xent = std::get_if<ops::SoftmaxXentFwdArgs>(&c.args)) classes = xent->logits.sizes[1];
        bad.data<int64_t>()[bad.numel() - 1] = classes;
        write_npy((dir / "labels_out_of_range.npy").string(), bad);
        std::string losses;
        for (int64_t k = 0; k < o.check_steps; ++k) {
          const nn::StepResult r = model.train_step(x, labels, opt);
          char line[64];
          std::snprintf(line, sizeof line, "step %lld loss %.9g\n", static_cast<long long>(k + 1),
                        r.loss.item());
          losses += line;
        }
        write_file(dir / "losses.txt", losses);
        write_file(dir / "expected_weights.bin", e.state_file(step, buffers, 1 + o.check_steps));
      });
}

void write_npy(const std::string& path, const Tensor& t) {
  STRATA_CHECK((t.dtype() == DType::f32 || t.dtype() == DType::i64) && t.is_contiguous() && t.device().is_cpu(),
               "write_npy: ", path, ": the tensor must be contiguous f32 or i64 on the CPU, and it is ", t.str());
  std::string shape = "(";
  for (int d = 0; d < t.dim(); ++d) shape += (d ? ", " : "") + std::to_string(t.size(d));
  shape += t.dim() == 1 ? ",)" : ")";
  const bool f32 = t.dtype() == DType::f32;
  std::string header = std::string("{'descr': '") + (f32 ? "<f4" : "<i8") + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 255);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * (f32 ? 4 : 8));
  write_file(path, bytes);
}

}  // namespace strata::codegen
