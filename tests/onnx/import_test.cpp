// What strata reads: hand-written graphs in the forms exporters write (torch.onnx.export's
// names, Reshape or ReduceMean instead of Flatten or GlobalAveragePool, Gemm without
// transB, Identity, Dropout, Constant), and every kind of file it must refuse, with one
// message that names every problem.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/layers/batch_norm.h"
#include "onnx_builder.h"
#include "onnx_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

Tensor run(const onnx::Imported& imp, const Tensor& x) {
  autograd::NoGradGuard no_grad;
  return imp.module->forward(x).clone();
}

onnx::Imported import(const OnnxBuilder& b, DispatchMode mode = DispatchMode::virtual_call) {
  return onnx::import_model(b.bytes(), mode, "reference", "test.onnx");
}

TEST(OnnxImport, TorchStyleGraphRunsInEveryMode) {
  const OnnxBuilder b = tiny_model();
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 1);
  const onnx::Imported ref = import(b);
  EXPECT_EQ(ref.input_name, "x");
  EXPECT_EQ(ref.output_name, "y");
  EXPECT_EQ(ref.producer, "test");
  EXPECT_EQ(ref.input_sizes, (Shape{-1, 3, 8, 8}));
  const Tensor y = run(ref, x);
  EXPECT_EQ(y.sizes(), (Shape{2, 2}));
  for (DispatchMode mode : kAllModes) EXPECT_TRUE(bitwise_equal(run(import(b, mode), x), y));
  // Parameter names follow the initializers; ONNX's float epsilon comes back as 1e-5.
  std::vector<std::string> names;
  for (auto& [n, t] : ref.module->state_dict()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
                                             "bn.running_var", "bn.num_batches_tracked", "fc.weight", "fc.bias"}));
  for (auto& [n, m] : ref.module->named_modules())
    if (auto* bn = dynamic_cast<nn::BatchNorm2d<ops::VirtualDispatch>*>(m)) {
      EXPECT_EQ(bn->options().eps, 1e-5);
      EXPECT_EQ(bn->options().momentum, 0.1);
    }
}

TEST(OnnxImport, EquivalentFormsGiveTheSameOutputs) {
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 2);
  const OnnxBuilder base = tiny_model(13);
  const Tensor want = run(import(base), x);

  // GlobalAveragePool + Flatten as ReduceMean(keepdims) + Reshape(0, -1) with a Constant shape,
  // Identity and Dropout in between, Gemm with B = weight^T (transB 0).
  OnnxBuilder b = tiny_model(13);
  auto& g = b.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    auto* n = g.mutable_node(i);
    if (n->op_type() == "GlobalAveragePool") {
      n->set_op_type("ReduceMean");
      set_ints(*n, "axes", {-1, -2});
    }
    if (n->op_type() == "Flatten") {
      n->set_op_type("Reshape");
      n->clear_attribute();
      n->add_input("shape");
    }
    if (n->op_type() == "Relu") n->set_input(0, "d");
    if (n->op_type() == "Gemm") {
      n->clear_attribute();
      set_float(*n, "alpha", 1.0f);
    }
  }
  b.node("Identity", {"n"}, {"i"});
  b.node("Dropout", {"i", "", ""}, {"d", "mask"});
  auto& shape = b.node("Constant", {}, {"shape"});
  auto& value = attr(shape, "value_ints");
  value.set_type(::onnx::AttributeProto::INTS);
  value.add_ints(0);
  value.add_ints(-1);
  // fc.weight [2,4] -> [4,2] (transB 0 reads B as [in, out]).
  for (auto& t : *g.mutable_initializer())
    if (t.name() == "fc.weight") {
      const Tensor w = Tensor::from_vector(
          std::vector<float>(reinterpret_cast<const float*>(t.raw_data().data()),
                             reinterpret_cast<const float*>(t.raw_data().data()) + 8), {2, 4});
      const Tensor wt = w.permute({1, 0}).contiguous();
      t.set_dims(0, 4);
      t.set_dims(1, 2);
      t.set_raw_data(wt.data_ptr(), wt.nbytes());
    }
  // ONNX requires topological order: move the added nodes before Relu.
  std::vector<::onnx::NodeProto> nodes(g.node().begin(), g.node().end());
  std::vector<::onnx::NodeProto> ordered{nodes[0], nodes[1], nodes[6], nodes[7], nodes[8], nodes[2],
                                         nodes[3], nodes[4], nodes[5]};
  g.clear_node();
  for (auto& n : ordered) *g.add_node() = n;
  EXPECT_TRUE(bitwise_equal(run(import(b), x), want));
}

// Gemm(transB) as MatMul by the transposed constant followed by Add of the bias (as some
// exporters write a linear layer); an Add of a constant anywhere else is refused.
TEST(OnnxImport, MatMulAndBiasAddAreALinearLayer) {
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 3);
  const OnnxBuilder base = tiny_model();
  const Tensor want = run(import(base), x);
  OnnxBuilder b = tiny_model();
  auto& g = b.graph();
  g.mutable_node(5)->set_op_type("MatMul");
  g.mutable_node(5)->clear_attribute();
  g.mutable_node(5)->mutable_input()->RemoveLast();
  g.mutable_node(5)->set_output(0, "mm");
  g.mutable_node(5)->set_input(1, "fc.weight_t");
  for (auto& t : *g.mutable_initializer())
    if (t.name() == "fc.weight") {
      const float* w = reinterpret_cast<const float*>(t.raw_data().data());
      const Tensor wt = Tensor::from_vector(std::vector<float>(w, w + 8), {2, 4}).permute({1, 0}).contiguous();
      auto& u = *g.add_initializer();
      u.set_name("fc.weight_t");
      u.set_data_type(::onnx::TensorProto::FLOAT);
      u.add_dims(4);
      u.add_dims(2);
      u.set_raw_data(wt.data_ptr(), wt.nbytes());
      break;
    }
  b.node("Add", {"fc.bias", "mm"}, {"y"}, "/fc/Add");
  EXPECT_TRUE(bitwise_equal(run(import(b), x), want));

  OnnxBuilder elsewhere = tiny_model();
  elsewhere.graph().mutable_node(2)->set_op_type("Add");  // Relu -> Add(n, conv.bias)
  elsewhere.graph().mutable_node(2)->add_input("conv.bias");
  EXPECT_STRATA_ERROR(import(elsewhere), "node '/relu/Relu' (Add): adds the constant 'conv.bias'");
}

TEST(OnnxImport, EveryUnsupportedOpAndAttributeIsNamed) {
  OnnxBuilder b = tiny_model();
  auto& g = b.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    auto* n = g.mutable_node(i);
    if (n->op_type() == "Relu") n->set_op_type("Sigmoid");
    if (n->op_type() == "Conv") set_string(*n, "auto_pad", "SAME_UPPER");
    if (n->op_type() == "Gemm") set_float(*n, "beta", 0.5f);
    if (n->op_type() == "BatchNormalization") set_int(*n, "training_mode", 1);
  }
  g.mutable_output(0)->set_name("s");
  b.node("Softmax", {"y"}, {"s"}, "/softmax");
  auto& custom = b.node("FusedThing", {"s"}, {"t"}, "/custom");
  custom.set_domain("com.example");
  EXPECT_STRATA_ERROR(import(b), "test.onnx", "6 problems", "op Sigmoid is not supported (1 node: '/relu/Relu')",
                      "op Softmax is not supported", "op com.example::FusedThing is not supported",
                      "node '/conv/Conv' (Conv): auto_pad SAME_UPPER is not supported",
                      "node '/fc/Gemm' (Gemm): alpha and beta other than 1",
                      "node '/bn/BatchNormalization' (BatchNormalization): training_mode 1", "strata imports Add");
}

TEST(OnnxImport, AttributesStrataCannotExpressAreErrors) {
  OnnxBuilder b = tiny_model();
  auto& g = b.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    auto* n = g.mutable_node(i);
    if (n->op_type() == "Conv") {
      n->clear_attribute();
      set_ints(*n, "pads", {1, 1, 0, 0});
      set_ints(*n, "strides", {1, 2});
      set_int(*n, "weird", 3);
    }
    if (n->op_type() == "Relu") set_float(*n, "alpha", 0.1f);
    if (n->op_type() == "Flatten") {
      n->clear_attribute();
      set_int(*n, "axis", 0);
    }
  }
  EXPECT_STRATA_ERROR(import(b), "pads [1,1,0,0] is not supported", "strides [1,2] is not supported",
                      "attribute 'weird' is not supported", "node '/relu/Relu' (Relu): attribute 'alpha' is not supported",
                      "axis 0 is not supported");
}

TEST(OnnxImport, TensorsAndValuesThatCannotBeUsed) {
  OnnxBuilder ext = tiny_model();
  for (auto& t : *ext.graph().mutable_initializer())
    if (t.name() == "conv.weight") {
      t.set_data_location(::onnx::TensorProto::EXTERNAL);
      t.clear_raw_data();
    }
  EXPECT_STRATA_ERROR(import(ext), "initializer 'conv.weight' [4,3,3,3] FLOAT in external data: the model was read "
                      "from memory", "load it from its file");  // external_data_test.cpp has the rest

  OnnxBuilder shortdata = tiny_model();
  for (auto& t : *shortdata.graph().mutable_initializer())
    if (t.name() == "conv.bias") t.set_raw_data(std::string(8, '\0'));
  EXPECT_STRATA_ERROR(import(shortdata), "initializer 'conv.bias' holds 8 bytes for [4] FLOAT (4 values)");

  OnnxBuilder dtype = tiny_model();
  for (auto& t : *dtype.graph().mutable_initializer())
    if (t.name() == "fc.bias") t.set_data_type(::onnx::TensorProto::DOUBLE);
  EXPECT_STRATA_ERROR(import(dtype), "'fc.bias' has data type DOUBLE");

  OnnxBuilder shared = tiny_model();
  shared.graph().mutable_node(5)->set_input(1, "conv.bias");  // Gemm's B
  EXPECT_STRATA_ERROR(import(shared), "B 'conv.bias' must be FLOAT of rank 2, not [4]");

  OnnxBuilder computed = tiny_model();
  computed.graph().mutable_node(0)->set_input(1, "x");
  EXPECT_STRATA_ERROR(import(computed), "weight 'x' must be an initializer");

  OnnxBuilder dangling = tiny_model();
  dangling.graph().mutable_node(2)->set_input(0, "nowhere");
  EXPECT_STRATA_ERROR(import(dangling), "input 0 'nowhere' is neither the graph input nor an earlier node's output");

  OnnxBuilder twice = tiny_model();
  twice.graph().mutable_node(2)->set_output(0, "c");
  EXPECT_STRATA_ERROR(import(twice), "writes 'c', which already exists");

  OnnxBuilder squeezed = tiny_model();
  squeezed.graph().mutable_node(4)->set_op_type("Relu");  // Flatten -> Relu on the pooled [N,C,1,1]
  squeezed.graph().mutable_node(4)->clear_attribute();
  EXPECT_STRATA_ERROR(import(squeezed), "only Flatten or Reshape to [N,C] may follow it");

  OnnxBuilder mismatch = tiny_model();
  for (auto& t : *mismatch.graph().mutable_initializer())
    if (t.name() == "fc.weight") {
      t.set_dims(1, 2);
      t.set_dims(0, 4);
    }
  EXPECT_STRATA_ERROR(import(mismatch), "node '/fc/Gemm'", "linear: input has 4 features but weight expects 2");
}

TEST(OnnxImport, GraphsStrataDoesNotTake) {
  OnnxBuilder two = tiny_model();
  two.input("z", {1, 3});
  two.output("extra");
  EXPECT_STRATA_ERROR(import(two), "the graph has 2 inputs ('x', 'z')", "2 outputs");

  OnnxBuilder ints = tiny_model();
  ints.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::INT64);
  EXPECT_STRATA_ERROR(import(ints), "input 'x' has elements of type INT64");

  EXPECT_STRATA_ERROR(import(tiny_model(9)), "opset 9; strata reads opsets 11 to 23");
  EXPECT_STRATA_ERROR(import(tiny_model(24)), "opset 24");
  EXPECT_NO_THROW(import(tiny_model(11)));
  EXPECT_NO_THROW(import(tiny_model(23)));

  OnnxBuilder unknown_output = tiny_model();
  unknown_output.graph().mutable_output(0)->set_name("zzz");
  EXPECT_STRATA_ERROR(import(unknown_output), "the graph output 'zzz' is not computed by any node");
}

TEST(OnnxImport, BytesThatAreNoModel) {
  const std::string good = tiny_model().bytes();
  EXPECT_STRATA_ERROR(onnx::import_model(good.substr(0, good.size() / 2), DispatchMode::virtual_call, "reference", "half.onnx"),
                      "half.onnx: not an ONNX model (protobuf cannot parse");
  EXPECT_STRATA_ERROR(onnx::import_model("", DispatchMode::virtual_call, "reference", "empty.onnx"), "empty.onnx",
                      "IR version 0", "no version of the default operator set", "no graph");
  EXPECT_STRATA_ERROR(onnx::import_model(good, DispatchMode::virtual_call, "nonesuch"), "nonesuch");
}

TEST(OnnxImport, ManyProblemsAreCountedAndCapped) {
  OnnxBuilder b = tiny_model();
  for (int i = 0; i < 150; ++i) {
    std::string name = "a";  // (not "a" + to_string: GCC 12's -Wrestrict false positive)
    name += std::to_string(i);
    set_int(*b.graph().mutable_node(2), name, i);
  }
  EXPECT_STRATA_ERROR(import(b), "150 problems", "... and 50 more");
}

TEST(OnnxImport, FilesAreReadOnlyWhenRegular) {
  const auto dir = std::filesystem::temp_directory_path() / ("strata_onnx_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_STRATA_ERROR(onnx::load_model(dir.string(), DispatchMode::virtual_call, "reference"), "not a regular file");
  EXPECT_STRATA_ERROR(onnx::load_model((dir / "missing.onnx").string(), DispatchMode::virtual_call, "reference"),
                      "no such file");
  const std::string fifo = (dir / "pipe.onnx").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_STRATA_ERROR(onnx::load_model(fifo, DispatchMode::virtual_call, "reference"), "not a regular file");
  const std::string path = (dir / "tiny.onnx").string();
  std::ofstream(path, std::ios::binary) << tiny_model().bytes();
  EXPECT_EQ(onnx::load_model(path, DispatchMode::direct, "reference").input_name, "x");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::testing
