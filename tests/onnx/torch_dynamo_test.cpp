// Models in the form of PyTorch's dynamo exporter (torch.onnx.export(..., dynamo=True), the
// default from PyTorch 2.9): opset 20, IR version 10, initializers in "<model>.onnx.data"
// (small ones inline), batch norm already folded into the Conv before it, ReduceMean (axes
// as an input, keepdims) + Reshape (allowzero, a constant [batch, features]) in place of
// GlobalAveragePool + Flatten, Gemm with transB, every attribute spelt out, value_info and
// metadata_props (fields newer than the ONNX 1.12 classes strata reads with).
//  - A real export (LeNet, PyTorch 2.11, random weights, data/torch_dynamo_lenet) computes
//    PyTorch's own output within 1e-5 on every CPU backend in every dispatch mode, and
//    bitwise what its legacy form (Flatten, all inline, open batch, opset 17) computes.
//  - strata's ResNet-18 rewritten in the dynamo exporter's form imports as the same modules,
//    state dict and outputs (bitwise) as its legacy form: strata's export with batch norm
//    folded, which is what the TorchScript exporter writes for a model in eval mode.
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "strata/autograd/grad_mode.h"
#include "strata/backends/api/registry.h"
#include "strata/nn/safetensors.h"
#include "onnx_builder.h"
#include "onnx_test_util.h"

namespace strata::testing {
namespace {

namespace fs = std::filesystem;
using ops::DispatchMode;

const fs::path kLeNet = fs::path(STRATA_ONNX_TEST_DATA) / "torch_dynamo_lenet";

Tensor run(const onnx::Imported& imp, const Tensor& x) {
  autograd::NoGradGuard no_grad;
  return imp.module->forward(x).clone();
}

// reference first, then the other CPU backends built.
std::vector<std::string> cpu_backends() {
  std::vector<std::string> out{"reference"};
  for (const std::string& b : backends::registry().names())
    if (b != "reference" && b != "null" && backends::registry().get(b).device_type() == DeviceType::cpu)
      out.push_back(b);
  return out;
}

::onnx::ModelProto parse_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes)) << path;
  return m;
}

std::vector<std::string> module_types(nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [path, mod] : m.named_modules()) out.emplace_back(mod->type_name());
  return out;
}

// Same names, order and values.
void expect_same_state(nn::Module& a, nn::Module& b) {
  const nn::StateDict sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TRUE(bitwise_equal(sa[i].second, sb[i].second)) << sa[i].first;
  }
}

// The legacy exporter's form of a dynamo export: external data read back inline (with a
// plain ifstream, not strata's reader), Reshape to [batch, features] as Flatten, the batch
// dimension open, opset 17 and IR version 8, no value_info.
::onnx::ModelProto legacy_form(::onnx::ModelProto m, const fs::path& folder) {
  auto& g = *m.mutable_graph();
  std::set<std::string> shapes;
  for (auto& n : *g.mutable_node())
    if (n.op_type() == "Reshape") {
      shapes.insert(n.input(1));
      n.set_op_type("Flatten");
      n.mutable_input()->RemoveLast();
      n.clear_attribute();
      set_int(n, "axis", 1);
    }
  auto& inits = *g.mutable_initializer();
  for (int i = inits.size() - 1; i >= 0; --i)
    if (shapes.count(inits.Get(i).name())) inits.DeleteSubrange(i, 1);
  for (auto& t : inits) {
    if (t.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    std::map<std::string, std::string> e;
    for (auto& kv : t.external_data()) e[kv.key()] = kv.value();
    std::ifstream in(folder / e["location"], std::ios::binary);
    in.seekg(std::stoll(e["offset"]));
    std::string bytes(std::stoull(e["length"]), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(in.good()) << t.name();
    t.clear_external_data();
    t.set_data_location(::onnx::TensorProto::DEFAULT);
    t.set_raw_data(bytes);
  }
  g.clear_value_info();
  g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  g.mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  m.set_ir_version(8);
  m.mutable_opset_import(0)->set_version(17);
  return m;
}

TEST(OnnxTorchDynamo, RealLeNetExportComputesPyTorchsOutput) {
  const nn::safetensors::Contents io = nn::safetensors::load((kLeNet / "lenet_io.safetensors").string());
  const Tensor x = *nn::find_entry(io.tensors, "x"), want = *nn::find_entry(io.tensors, "y");
  const std::string path = (kLeNet / "lenet.onnx").string();
  for (const std::string& backend : cpu_backends()) {
    Tensor first;
    for (DispatchMode mode : kAllModes) {
      SCOPED_TRACE(backend + " " + std::string(ops::dispatch_mode_name(mode)));
      const onnx::Imported imp = onnx::load_model(path, mode, backend);
      EXPECT_EQ(imp.opset, 20);
      EXPECT_EQ(imp.producer, "pytorch 2.11.0+cu130");
      EXPECT_EQ(imp.input_name, "x");
      EXPECT_EQ(imp.output_name, "linear_2");
      EXPECT_EQ(imp.input_sizes, (Shape{1, 1, 28, 28}));
      const Tensor y = run(imp, x);
      EXPECT_TRUE(close(y, want, 1e-5));
      if (!first.defined()) first = y;
      EXPECT_TRUE(bitwise_equal(y, first)) << "the dispatch modes differ";
    }
  }
}

TEST(OnnxTorchDynamo, RealLeNetExportEqualsItsLegacyForm) {
  const ::onnx::ModelProto legacy = legacy_form(parse_file(kLeNet / "lenet.onnx"), kLeNet);
  const onnx::Imported a = onnx::load_model((kLeNet / "lenet.onnx").string(), DispatchMode::virtual_call, "reference");
  const onnx::Imported b =
      onnx::import_model(legacy.SerializeAsString(), DispatchMode::virtual_call, "reference", "legacy");
  EXPECT_EQ(b.input_sizes, (Shape{-1, 1, 28, 28}));
  EXPECT_EQ(module_types(*a.module), module_types(*b.module));
  expect_same_state(*a.module, *b.module);
  std::vector<std::string> names;
  for (auto& [n, t] : a.module->state_dict()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"f.0.weight", "f.0.bias", "f.3.weight", "f.3.bias", "f.7.weight",
                                             "f.7.bias", "f.9.weight", "f.9.bias", "f.11.weight", "f.11.bias"}));
  const Tensor x = random_tensor({1, 1, 28, 28}, DType::f32, 31);
  EXPECT_TRUE(bitwise_equal(run(a, x), run(b, x)));
}

// ---- strata's ResNet in the dynamo exporter's form ----------------------------------------

// metadata_props as a field these ONNX classes do not know (ValueInfoProto 4, NodeProto 9,
// GraphProto 16 in IR version 10): kept as unknown fields and written out again.
void add_metadata(google::protobuf::Message& m, int field, const std::string& key, const std::string& value) {
  ::onnx::StringStringEntryProto e;
  e.set_key(key);
  e.set_value(value);
  m.GetReflection()->MutableUnknownFields(&m)->AddLengthDelimited(field, e.SerializeAsString());
}

void set_attr_ints(::onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
  for (auto& a : *n.mutable_attribute())
    if (a.name() == name) return;
  set_ints(n, name, v);
}

::onnx::TensorProto& add_int64(::onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& v) {
  auto& t = *g.add_initializer();
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(v.size()));
  t.set_raw_data(v.data(), v.size() * sizeof(int64_t));
  return t;
}

bool all_zero(const ::onnx::TensorProto& t) {
  return t.raw_data().find_first_not_of('\0') == std::string::npos;
}

// strata's export with batch norm folded (Conv with bias, GlobalAveragePool + Flatten, Gemm
// transB, all inline, open batch), rewritten as the dynamo exporter writes the same network
// (the node lists of its ResNet-18/50 exports): values and nodes renamed after the aten ops
// ("conv2d_3", "node_conv2d_3"), input "x" of a fixed batch, every attribute spelt out,
// ReduceMean + Reshape, value_info and metadata_props, initializers above 64 bytes in
// "resnet.onnx.data" packed by increasing size. zero_bias_dropped: Conv biases that are all
// zero are left out, as the exporter's optimiser does. Written to folder/resnet.onnx.
void write_dynamo_form(::onnx::ModelProto m, const fs::path& folder, int64_t batch, bool zero_bias_dropped) {
  m.set_ir_version(10);
  m.mutable_opset_import(0)->set_version(20);
  m.set_producer_name("pytorch");
  m.set_producer_version("2.11.0");
  m.clear_metadata_props();
  auto& g = *m.mutable_graph();
  g.set_name("main_graph");
  add_metadata(g, 16, "pkg.torch.export.ExportedProgram.range_constraints", "{}");

  std::map<std::string, std::string> rename{{g.input(0).name(), "x"}};
  std::map<std::string, int> used;
  const std::map<std::string, std::string> aten{{"Conv", "conv2d"}, {"Relu", "relu"}, {"MaxPool", "max_pool2d"},
                                                 {"Add", "add"}, {"GlobalAveragePool", "mean"}, {"Flatten", "view"},
                                                 {"Gemm", "linear"}};
  std::map<std::string, const ::onnx::TensorProto*> inits;
  for (auto& t : g.initializer()) inits[t.name()] = &t;
  std::set<std::string> dropped;
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input())
      if (rename.count(in)) in = rename[in];
    const std::string base = aten.at(n.op_type());
    const int k = used[base]++;
    const std::string out = k == 0 ? base : base + "_" + std::to_string(k);
    rename[n.output(0)] = out;
    n.set_output(0, out);
    n.set_name("node_" + out);
    add_metadata(n, 9, "pkg.torch.onnx.name_scopes", "['', '" + out + "']");
    if (n.op_type() == "Conv") {
      set_string(n, "auto_pad", "NOTSET");
      if (zero_bias_dropped && n.input_size() == 3 && all_zero(*inits.at(n.input(2)))) {
        dropped.insert(n.input(2));
        n.mutable_input()->RemoveLast();
      }
    } else if (n.op_type() == "MaxPool") {
      set_string(n, "auto_pad", "NOTSET");
      set_int(n, "ceil_mode", 0);
      set_attr_ints(n, "dilations", {1, 1});
      set_int(n, "storage_order", 0);
    } else if (n.op_type() == "GlobalAveragePool") {
      n.set_op_type("ReduceMean");
      n.add_input("val_axes");
      set_int(n, "keepdims", 1);
      set_int(n, "noop_with_empty_axes", 0);
    } else if (n.op_type() == "Flatten") {
      n.set_op_type("Reshape");
      n.clear_attribute();
      n.add_input("val_shape");
      set_int(n, "allowzero", 1);
    } else if (n.op_type() == "Gemm") {
      n.clear_attribute();
      set_float(n, "alpha", 1.0f);
      set_float(n, "beta", 1.0f);
      set_int(n, "transA", 0);
      set_int(n, "transB", 1);
    }
  }
  // The fc layer's input features, for Reshape's constant shape.
  int64_t features = -1;
  for (auto& n : g.node())
    if (n.op_type() == "Gemm") features = inits.at(n.input(1))->dims(1);
  auto& all = *g.mutable_initializer();
  for (int i = all.size() - 1; i >= 0; --i)
    if (dropped.count(all.Get(i).name())) all.DeleteSubrange(i, 1);
  add_int64(g, "val_axes", {-1, -2});
  add_int64(g, "val_shape", {batch, features});

  for (auto* v : {g.mutable_input(0), g.mutable_output(0)}) {
    v->set_name(rename.at(v->name()));
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(batch);
    add_metadata(*v, 4, "pkg.torch.export.graph_signature.InputSpec.kind", "USER_INPUT");
  }
  for (auto& t : g.initializer()) {
    auto& v = *g.add_value_info();
    v.set_name(t.name());
    v.mutable_type()->mutable_tensor_type()->set_elem_type(t.data_type());
    add_metadata(v, 4, "pkg.torch.export.graph_signature.InputSpec.kind", "PARAMETER");
  }
  for (auto& n : g.node())
    if (n.output(0) != g.output(0).name()) {
      auto& v = *g.add_value_info();
      v.set_name(n.output(0));
      v.mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
    }

  std::vector<std::pair<size_t, std::string>> big;
  for (auto& t : g.initializer())
    if (t.data_type() == ::onnx::TensorProto::FLOAT && t.raw_data().size() > 64)
      big.emplace_back(t.raw_data().size(), t.name());
  std::stable_sort(big.begin(), big.end());
  std::vector<std::string> names;
  for (auto& [size, name] : big) names.push_back(name);
  move_to_external_file(m, folder, "resnet.onnx.data", names, 1);
  save(m, folder / "resnet.onnx");
}

using OnnxDynamoForm = OnnxFilesTest;

TEST_F(OnnxDynamoForm, ResNetEqualsTheLegacyForm) {
  auto m = nn::make_resnet(small_resnet(18, false, 8), DispatchMode::virtual_call, "reference");
  randomize_batch_norm(m->module(), 9);
  ::onnx::ModelProto legacy;
  ASSERT_TRUE(legacy.ParseFromString(onnx::export_model(m->module(), export_options({3, 40, 40}, true))));
  write_dynamo_form(legacy, root_, 1, false);
  const ::onnx::ModelProto written = parse_file(root_ / "resnet.onnx");
  int external = 0;
  for (auto& t : written.graph().initializer()) external += t.data_location() == ::onnx::TensorProto::EXTERNAL;
  EXPECT_GT(external, 20);
  EXPECT_LT(external, written.graph().initializer_size());

  const Tensor x = random_tensor({1, 3, 40, 40}, DType::f32, 41);
  for (const std::string& backend : cpu_backends())
    for (DispatchMode mode : kAllModes) {
      if (backend != "reference" && mode != DispatchMode::direct) continue;
      SCOPED_TRACE(backend + " " + std::string(ops::dispatch_mode_name(mode)));
      const onnx::Imported want = onnx::import_model(legacy.SerializeAsString(), mode, backend, "legacy");
      const onnx::Imported got = onnx::load_model((root_ / "resnet.onnx").string(), mode, backend);
      EXPECT_EQ(got.opset, 20);
      EXPECT_EQ(got.input_name, "x");
      EXPECT_EQ(got.input_sizes, (Shape{1, 3, 40, 40}));
      EXPECT_EQ(module_types(*got.module), module_types(*want.module));
      expect_same_state(*got.module, *want.module);
      EXPECT_TRUE(bitwise_equal(run(got, x), run(want, x)));
    }
}

// torchvision's exports from freshly made models: batch norm at its defaults folds into
// zero biases, which the exporter leaves out (Conv without bias).
TEST_F(OnnxDynamoForm, ZeroBiasesLeftOutGiveTheSameOutputs) {
  auto m = nn::make_resnet(small_resnet(18, false, 8), DispatchMode::virtual_call, "reference");
  ::onnx::ModelProto legacy;
  ASSERT_TRUE(legacy.ParseFromString(onnx::export_model(m->module(), export_options({3, 40, 40}, true))));
  write_dynamo_form(legacy, root_, 2, true);
  const ::onnx::ModelProto written = parse_file(root_ / "resnet.onnx");
  int convs = 0, biased = 0;
  for (auto& n : written.graph().node())
    if (n.op_type() == "Conv") ++convs, biased += n.input_size() == 3;
  EXPECT_EQ(convs, 20);
  EXPECT_EQ(biased, 0);

  const Tensor x = random_tensor({2, 3, 40, 40}, DType::f32, 42);
  for (const std::string& backend : cpu_backends()) {
    SCOPED_TRACE(backend);
    const onnx::Imported want = onnx::import_model(legacy.SerializeAsString(), DispatchMode::direct, backend, "legacy");
    const onnx::Imported got = onnx::load_model((root_ / "resnet.onnx").string(), DispatchMode::direct, backend);
    EXPECT_EQ(got.input_sizes, (Shape{2, 3, 40, 40}));
    // Adding a zero bias changes nothing but the sign of a zero.
    EXPECT_TRUE(close(run(got, x), run(want, x), 1e-6));
  }
}

}  // namespace
}  // namespace strata::testing
