// The ONNX importer: onnx::import_model (onnx/onnx.h) on the bytes, which parses the
// protobuf, validates every node, tensor and value, and builds the nn::Dag on the
// reference backend. A graph that imports is run once on a batch of one when it is small
// (its forward may refuse the input with a strata::Error, never crash). fuzz/make_corpus.py
// writes small valid models and a few broken ones as seeds; fuzz/onnx.dict holds ONNX's
// op and attribute names.
#include <string_view>

#include "strata/autograd/grad_mode.h"
#include "fuzz/fuzz_util.h"
#include "strata/onnx/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_error([&] {
    onnx::Imported imp = onnx::import_model(bytes, ops::DispatchMode::virtual_call, "reference", "fuzz");
    STRATA_FUZZ_ASSERT(imp.module != nullptr);
    int64_t param_bytes = 0;
    for (const auto& [name, t] : imp.module->state_dict()) param_bytes += static_cast<int64_t>(t.nbytes());
    STRATA_FUZZ_ASSERT(param_bytes <= static_cast<int64_t>(size) + 8 * 1024);  // parameters come from the file
    Shape in = imp.input_sizes;
    bool small = in.size() >= 2 && imp.module->num_parameters() <= 16384;
    for (int i = 1; i < in.size(); ++i) small = small && in[i] > 0;
    if (!small) return;
    in[0] = 1;
    if (in.numel() > 4096) return;
    autograd::NoGradGuard no_grad;
    fuzz::expect_ok_or_error([&] {
      const Tensor y = imp.module->forward(Tensor::empty(in, DType::f32));
      STRATA_FUZZ_ASSERT(y.defined() && y.size(0) == 1);
    });
  });
  return 0;
}
