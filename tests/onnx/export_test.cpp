// What strata writes: files that ONNX's own checker and strict shape inference accept,
// with the state dict's names, an open batch dimension, one node per layer call, and
// batch norm kept or folded.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <map>

#include "strata/nn/lenet.h"
#include "onnx_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

::onnx::ModelProto parse(const std::string& bytes) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

// The checker and strict shape inference (which also checks the declared output shape).
::testing::AssertionResult onnx_accepts(const std::string& bytes) {
  ::onnx::ModelProto m = parse(bytes);
  try {
    ::onnx::checker::check_model(m);
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "onnx rejects the model: " << e.what();
  }
  if (m.graph().value_info_size() == 0) return ::testing::AssertionFailure() << "shape inference inferred nothing";
  return ::testing::AssertionSuccess();
}

std::map<std::string, int> op_counts(const ::onnx::ModelProto& m) {
  std::map<std::string, int> n;
  for (const auto& node : m.graph().node()) ++n[node.op_type()];
  return n;
}

std::vector<std::string> dims(const ::onnx::ValueInfoProto& v) {
  std::vector<std::string> out;
  for (const auto& d : v.type().tensor_type().shape().dim())
    out.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  return out;
}

TEST(OnnxExport, CheckerAcceptsEveryModel) {
  auto resnet18 = nn::make_resnet(small_resnet(18, true), DispatchMode::virtual_call, "reference");
  auto resnet50 = nn::make_resnet(small_resnet(50, false), DispatchMode::direct, "reference");
  nn::LeNetConfig keras;
  keras.variant = nn::LeNetVariant::keras;
  auto lenet = nn::make_lenet({}, DispatchMode::static_call, "reference");
  auto lenet_keras = nn::make_lenet(keras, DispatchMode::virtual_call, "reference");
  auto user = nn::with_policy(DispatchMode::virtual_call, "reference",
                              [](const auto& p) -> std::unique_ptr<nn::Module> { return user_net(p); });
  const std::pair<const nn::Module*, Shape> models[] = {{&resnet18->module(), {3, 32, 32}},
                                                        {&resnet50->module(), {3, 64, 64}},
                                                        {&lenet->module(), {1, 28, 28}},
                                                        {&lenet_keras->module(), {1, 28, 28}},
                                                        {user.get(), {3, 16, 16}}};
  for (const auto& [m, item] : models)
    for (bool fold : {false, true})
      EXPECT_TRUE(onnx_accepts(onnx::export_model(*m, export_options(item, fold))))
          << m->type_name() << (fold ? " folded" : "");
}

TEST(OnnxExport, TorchvisionResNet50NamesAndStructure) {
  nn::ResNetConfig c;  // torchvision's ResNet-50, on the null backend: nothing is computed
  auto m = nn::make_resnet(c, DispatchMode::virtual_call, "null");
  const ::onnx::ModelProto p = parse(onnx::export_model(m->module(), export_options({3, 224, 224})));
  EXPECT_EQ(p.ir_version(), 8);
  ASSERT_EQ(p.opset_import_size(), 1);
  EXPECT_EQ(p.opset_import(0).version(), 17);
  EXPECT_EQ(p.producer_name(), "strata");

  std::vector<std::string> want;
  for (const auto& [n, t] : m->state_dict())
    if (!n.ends_with("num_batches_tracked")) want.push_back(n);
  std::vector<std::string> got;
  for (const auto& t : p.graph().initializer()) got.push_back(t.name());
  EXPECT_EQ(got, want) << "initializers are the state dict, in its order";
  EXPECT_EQ(got.size(), 320u - 53u);

  const std::map<std::string, int> ops = op_counts(p);
  const std::map<std::string, int> expected{{"Conv", 53}, {"BatchNormalization", 53}, {"Relu", 49},
                                            {"MaxPool", 1}, {"Add", 16},  {"GlobalAveragePool", 1},
                                            {"Flatten", 1}, {"Gemm", 1}};
  EXPECT_EQ(ops, expected);
  ASSERT_EQ(p.graph().input_size(), 1);
  EXPECT_EQ(p.graph().input(0).name(), "input");
  EXPECT_EQ(dims(p.graph().input(0)), (std::vector<std::string>{"batch", "3", "224", "224"}));
  ASSERT_EQ(p.graph().output_size(), 1);
  EXPECT_EQ(p.graph().output(0).name(), "output");
  EXPECT_EQ(dims(p.graph().output(0)), (std::vector<std::string>{"batch", "1000"}));
  EXPECT_EQ(p.graph().node(0).name(), "conv1");
  EXPECT_EQ(p.graph().node(0).input(1), "conv1.weight");
}

TEST(OnnxExport, FoldedBatchNormLeavesConvsWithBias) {
  auto m = nn::make_resnet(small_resnet(18, true), DispatchMode::virtual_call, "reference");
  const ::onnx::ModelProto p = parse(onnx::export_model(m->module(), export_options({3, 32, 32}, true)));
  const std::map<std::string, int> ops = op_counts(p);
  EXPECT_EQ(ops.count("BatchNormalization"), 0u);
  EXPECT_EQ(ops.at("Conv"), 20);
  for (const auto& node : p.graph().node())
    if (node.op_type() == "Conv") {
      ASSERT_EQ(node.input_size(), 3) << node.name();
      EXPECT_EQ(node.input(2), node.name() + ".bias");
    }
  for (const auto& t : p.graph().initializer()) EXPECT_EQ(t.name().find("bn"), std::string::npos) << t.name();
  bool said = false;
  for (const auto& kv : p.metadata_props()) said |= kv.key() == "strata.batch_norm" && kv.value() == "folded";
  EXPECT_TRUE(said);
}

TEST(OnnxExport, DropoutLeavesNoNodeAndRepeatedModulesGetNumberedNodes) {
  auto user = nn::with_policy(DispatchMode::direct, "reference",
                              [](const auto& p) -> std::unique_ptr<nn::Module> { return user_net(p); });
  const ::onnx::ModelProto p = parse(onnx::export_model(*user, export_options({3, 16, 16})));
  EXPECT_EQ(op_counts(p).count("Dropout"), 0u);
  EXPECT_EQ(p.graph().node_size(), 12);
  auto m = nn::make_resnet(small_resnet(50, true), DispatchMode::virtual_call, "reference");
  const ::onnx::ModelProto r = parse(onnx::export_model(m->module(), export_options({3, 32, 32})));
  std::vector<std::string> relus;
  for (const auto& node : r.graph().node())
    if (node.name().rfind("layer1.0.relu", 0) == 0) relus.push_back(node.name());
  EXPECT_EQ(relus, (std::vector<std::string>{"layer1.0.relu", "layer1.0.relu_1", "layer1.0.relu_2"}));
}

class Custom final : public nn::Module {
 public:
  std::string_view type_name() const override { return "Custom"; }
};

TEST(OnnxExport, ErrorsNameTheModule) {
  nn::Sequential s;
  s.add(std::make_unique<Custom>());
  EXPECT_STRATA_ERROR(onnx::export_model(s, export_options({3, 8, 8})), "module '0' of type Custom has no ONNX form");
  auto lenet = nn::make_lenet({}, DispatchMode::virtual_call, "reference");
  EXPECT_STRATA_ERROR(onnx::export_model(lenet->module(), export_options({3, 28, 28})), "conv1",
                      "input has 3 channels but weight expects 1");
  EXPECT_STRATA_ERROR(onnx::export_model(lenet->module(), export_options({})), "input_sizes");
  EXPECT_STRATA_ERROR(onnx::export_model(lenet->module(), export_options({1, 0, 28})), "must be positive");
  nn::Sequential empty;
  EXPECT_STRATA_ERROR(onnx::export_model(empty, export_options({3})), "computes nothing");
}

TEST(OnnxExport, SaveIsAtomicAndLoadsBack) {
  const auto dir = std::filesystem::temp_directory_path() / ("strata_onnx_save_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto m = nn::make_lenet({}, DispatchMode::virtual_call, "reference");
  const std::string path = (dir / "lenet.onnx").string();
  onnx::save_model(m->module(), path, export_options({1, 28, 28}));
  onnx::Imported imp = onnx::load_model(path, DispatchMode::direct, "reference");
  EXPECT_EQ(imp.module->num_parameters(), m->num_parameters());
  EXPECT_EQ(imp.producer.rfind("strata ", 0), 0u) << imp.producer;
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u) << "no temporary is left behind";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
