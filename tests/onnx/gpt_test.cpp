// A GPT through ONNX: the file strata writes (ONNX's checker and strict shape inference
// accept it; its ops, its dynamic dimensions, one initializer for the tied embedding),
// export -> import round trips bitwise on every CPU backend in every dispatch mode, and the
// errors for files that are not the GPT strata writes.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <random>

#include "strata/autograd/grad_mode.h"
#include "strata/nn/layers/transformer.h"
#include "onnx_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

// ε is not GPT-2's: the import must take it from the file.
nn::GptConfig gpt_config() {
  nn::GptConfig c;
  c.vocab_size = 37;
  c.block_size = 12;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.layer_norm_eps = 1e-6;
  return c;
}

// Every parameter at random, the layer norms' too (their 1 and 0 would hide a mix-up).
std::unique_ptr<nn::Model> random_gpt(DispatchMode mode, const std::string& backend, const nn::GptConfig& c,
                                      uint64_t seed = 5) {
  auto m = nn::make_gpt(c, mode, backend);
  nn::StateDict sd;
  for (auto& [name, t] : m->module().named_parameters())
    sd.emplace_back(name, random_tensor(t.sizes(), DType::f32, ++seed, -0.5, 0.5));
  m->module().load_state_dict(sd, true);
  return m;
}

Tensor random_ids(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(static_cast<size_t>(batch * length));
  for (int64_t& x : v) x = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  return Tensor::from_vector(v, Shape{batch, length});
}

Tensor logits(nn::Module& m, const Tensor& ids) {
  autograd::NoGradGuard no_grad;
  m.eval();
  return m.forward(ids).clone();
}

std::string export_gpt(const nn::Module& m, Shape sizes = {}) {
  onnx::ExportOptions o;
  o.input_sizes = sizes;
  o.input_name = "input_ids";
  o.output_name = "logits";
  return onnx::export_model(m, o);
}

::onnx::ModelProto parse(const std::string& bytes) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

std::string bytes_of(const ::onnx::ModelProto& m) {
  std::string s;
  EXPECT_TRUE(m.SerializeToString(&s));
  return s;
}

// Exports m, imports it in `mode` on `backend` and expects the same logits, bit for bit,
// at two batch sizes and two lengths through one imported module (both dimensions open).
void expect_round_trip(nn::Model& m, DispatchMode mode, const std::string& backend, const std::string& what) {
  const int64_t vocab = gpt_config().vocab_size;
  onnx::Imported imp = onnx::import_model(export_gpt(m.module()), mode, backend, what);
  EXPECT_EQ(imp.input_dtype, DType::i64);
  EXPECT_EQ(imp.input_sizes, (Shape{-1, -1}));
  EXPECT_EQ(imp.input_name, "input_ids");
  EXPECT_EQ(imp.output_name, "logits");
  EXPECT_EQ(imp.module->type_name(), "GPT");
  for (auto [batch, length] : {std::pair<int64_t, int64_t>{2, 7}, {1, 12}, {3, 1}}) {
    const Tensor ids = random_ids(batch, length, vocab, 100 + static_cast<uint64_t>(length));
    const Tensor want = logits(m.module(), ids), got = logits(*imp.module, ids);
    EXPECT_EQ(got.sizes(), (Shape{batch, length, vocab}));
    EXPECT_TRUE(bitwise_equal(got, want)) << what << " on " << backend << " in " << ops::dispatch_mode_name(mode)
                                          << ", ids [" << batch << "," << length
                                          << "]: relative error " << relative_error(got, want);
  }
  const nn::StateDict mine = m.module().state_dict(), theirs = imp.module->state_dict();
  ASSERT_EQ(theirs.size(), mine.size());
  for (const auto& [n, t] : mine) {
    const Tensor* u = nn::find_entry(theirs, n);
    ASSERT_NE(u, nullptr) << "the imported GPT has no '" << n << "'";
    EXPECT_TRUE(bitwise_equal(*u, t)) << n;
  }
}

TEST(OnnxGpt, RoundTripEveryModeBitwise) {
  for (DispatchMode mode : kAllModes) {
    auto m = random_gpt(mode, "reference", gpt_config());
    expect_round_trip(*m, mode, "reference", "GPT");
  }
}

TEST(OnnxGpt, RoundTripOtherCpuBackendsBitwise) {
  int tried = 0;
  for (const std::string& backend : backends::registry().names()) {
    if (backend == "reference" || backend == "null" || backends::registry().get(backend).device_type() != DeviceType::cpu)
      continue;
    ++tried;
    for (DispatchMode mode : kAllModes) {
      auto m = random_gpt(mode, backend, gpt_config());
      expect_round_trip(*m, mode, backend, "GPT");
    }
  }
  if (tried == 0) GTEST_SKIP() << "no CPU backend besides reference in this build";
}

TEST(OnnxGpt, ImportKeepsTheExactLayerNormEpsilon) {
  auto m = random_gpt(DispatchMode::virtual_call, "reference", gpt_config());
  onnx::Imported imp = onnx::import_model(export_gpt(m->module()), DispatchMode::virtual_call, "reference");
  auto* gpt = dynamic_cast<nn::Gpt<ops::VirtualDispatch>*>(imp.module.get());
  ASSERT_NE(gpt, nullptr);
  EXPECT_EQ(gpt->config().layer_norm_eps, 1e-6) << "from the metadata, not the f32 attribute";
  EXPECT_EQ(gpt->config().block_size, 12);
  EXPECT_EQ(gpt->config().n_head, 2);
  EXPECT_EQ(gpt->config().n_layer, 2);

  // Without strata's metadata the f32 attribute is what the file says.
  ::onnx::ModelProto p = parse(export_gpt(m->module()));
  p.clear_metadata_props();
  onnx::Imported bare = onnx::import_model(bytes_of(p), DispatchMode::virtual_call, "reference");
  EXPECT_EQ(dynamic_cast<nn::Gpt<ops::VirtualDispatch>&>(*bare.module).config().layer_norm_eps,
            static_cast<double>(static_cast<float>(1e-6)));
}

TEST(OnnxGpt, CheckerAcceptsTheFileAndItsOpsAreStandard) {
  auto m = random_gpt(DispatchMode::virtual_call, "reference", gpt_config());
  for (Shape sizes : {Shape{}, Shape{7}}) {
    ::onnx::ModelProto p = parse(export_gpt(m->module(), sizes));
    EXPECT_NO_THROW(::onnx::checker::check_model(p));
    EXPECT_NO_THROW(::onnx::shape_inference::InferShapes(p, ::onnx::OpSchemaRegistry::Instance(),
                                                         ::onnx::ShapeInferenceOptions(true, 1, false)));
    EXPECT_EQ(p.opset_import(0).version(), onnx::kOpset);
    std::map<std::string, int> ops;
    for (const auto& n : p.graph().node()) {
      ++ops[n.op_type()];
      EXPECT_TRUE(n.domain().empty()) << n.name();
    }
    EXPECT_EQ(ops["LayerNormalization"], 5);
    EXPECT_EQ(ops["Softmax"], 2);
    EXPECT_EQ(ops["Where"], 2);
    EXPECT_EQ(ops["Split"], 2);
    EXPECT_EQ(ops["Tanh"], 2);
    EXPECT_EQ(ops["Gather"], 3) << "the two embeddings and the sequence length";
    EXPECT_EQ(ops.count("Attention") + ops.count("Gelu"), 0u) << "portable ops only";
    // The tied head reads the token embedding's one initializer.
    int wte_readers = 0;
    for (const auto& n : p.graph().node())
      for (const auto& i : n.input()) wte_readers += i == "wte.weight";
    EXPECT_EQ(wte_readers, 2);
    int wte_count = 0;
    for (const auto& t : p.graph().initializer()) wte_count += t.name() == "wte.weight";
    EXPECT_EQ(wte_count, 1);
    const auto& in = p.graph().input(0).type().tensor_type();
    EXPECT_EQ(in.elem_type(), ::onnx::TensorProto::INT64);
    EXPECT_EQ(in.shape().dim(0).dim_param(), "batch");
    if (sizes.empty())
      EXPECT_EQ(in.shape().dim(1).dim_param(), "sequence");
    else
      EXPECT_EQ(in.shape().dim(1).dim_value(), 7);
    EXPECT_EQ(p.graph().output(0).type().tensor_type().shape().dim(2).dim_value(), 37);
  }
  // A fixed length comes back as the import's input size.
  onnx::Imported imp =
      onnx::import_model(export_gpt(m->module(), Shape{7}), DispatchMode::virtual_call, "reference");
  EXPECT_EQ(imp.input_sizes, (Shape{-1, 7}));
}

TEST(OnnxGpt, ExportRefusesWhatItCannotWrite) {
  nn::GptConfig mixed = gpt_config();
  mixed.compute_dtype = DType::bf16;
  auto m = nn::make_gpt(mixed, DispatchMode::virtual_call, "reference");
  EXPECT_STRATA_ERROR(export_gpt(m->module()), "onnx export", "computes in bf16", "f32");
  auto f = random_gpt(DispatchMode::virtual_call, "reference", gpt_config());
  EXPECT_STRATA_ERROR(export_gpt(f->module(), Shape{2, 3}), "onnx export", "GPT's input_sizes", "[2,3]");
  EXPECT_STRATA_ERROR(export_gpt(f->module(), Shape{13}), "onnx export", "13 tokens", "block_size 12");
}

// Imports the exported file after `edit` and expects an error holding every part.
class OnnxGptImportErrors : public ::testing::Test {
 protected:
  void SetUp() override { m_ = random_gpt(DispatchMode::virtual_call, "reference", gpt_config()); }
  ::onnx::ModelProto file() { return parse(export_gpt(m_->module())); }
  static std::string import_error(const ::onnx::ModelProto& p) {
    try {
      onnx::import_model(bytes_of(p), DispatchMode::direct, "reference", "gpt.onnx");
    } catch (const Error& e) {
      return e.what();
    }
    return "(imported without an error)";
  }
  static ::onnx::NodeProto& node(::onnx::ModelProto& p, const std::string& name) {
    for (auto& n : *p.mutable_graph()->mutable_node())
      if (n.name() == name) return n;
    throw std::runtime_error("no node " + name);
  }
  static ::onnx::TensorProto& initializer(::onnx::ModelProto& p, const std::string& name) {
    for (auto& t : *p.mutable_graph()->mutable_initializer())
      if (t.name() == name) return t;
    throw std::runtime_error("no initializer " + name);
  }
  static void remove_initializer(::onnx::ModelProto& p, const std::string& name) {
    auto* inits = p.mutable_graph()->mutable_initializer();
    for (int i = 0; i < inits->size(); ++i)
      if (inits->Get(i).name() == name) {
        inits->DeleteSubrange(i, 1);
        return;
      }
    throw std::runtime_error("no initializer " + name);
  }
  std::unique_ptr<nn::Model> m_;
};

TEST_F(OnnxGptImportErrors, MissingInitializerIsNamed) {
  ::onnx::ModelProto p = file();
  remove_initializer(p, "h.1.ln_2.bias");
  EXPECT_TRUE(message_contains(import_error(p), {"gpt.onnx", "'h.1.ln_2'", "LayerNormalization", "input 2",
                                                 "'h.1.ln_2.bias' is not an initializer", "missing"}));
  p = file();
  remove_initializer(p, "wte.weight");
  EXPECT_TRUE(message_contains(import_error(p), {"gpt.onnx", "token embedding", "'wte.weight'"}));
}

TEST_F(OnnxGptImportErrors, WrongVocabularyOrShapeIsNamed) {
  ::onnx::ModelProto p = file();
  p.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_value(40);
  EXPECT_TRUE(message_contains(import_error(p), {"output 'logits'", "vocabulary of 40", "37 rows"}));

  // A position embedding narrower than the token embedding.
  p = file();
  ::onnx::TensorProto& wpe = initializer(p, "wpe.weight");
  wpe.set_dims(1, 8);
  wpe.set_raw_data(std::string(static_cast<size_t>(12 * 8 * 4), '\0'));
  EXPECT_TRUE(message_contains(import_error(p), {"node", "'wpe'", "'wpe.weight' is [12,8] FLOAT",
                                                 "reads 'wpe.weight' as [12,16] FLOAT"}));

  // A projection of the wrong width.
  p = file();
  ::onnx::TensorProto& b = initializer(p, "h.0.mlp.c_fc.bias");
  b.set_dims(0, 63);
  b.set_raw_data(std::string(63 * 4, '\0'));
  EXPECT_TRUE(message_contains(import_error(p), {"'h.0.mlp.c_fc'", "[63] FLOAT", "[64] FLOAT"}));

  // Heads that do not divide the width.
  p = file();
  ::onnx::TensorProto& heads = initializer(p, "heads_shape");
  const int64_t five[] = {0, 0, 5, 3};
  heads.set_raw_data(five, sizeof five);
  EXPECT_TRUE(message_contains(import_error(p), {"5 heads", "width 16"}));
}

TEST_F(OnnxGptImportErrors, AnyOtherComputationIsRefusedAtItsNode) {
  ::onnx::ModelProto p = file();
  node(p, "h.0.mlp.gelu.tanh").set_op_type("Sigmoid");
  EXPECT_TRUE(message_contains(import_error(p), {"'h.0.mlp.gelu.tanh' (Sigmoid)", "another op", "(Tanh)"}));

  p = file();
  node(p, "h.1.attn.probs").mutable_attribute(0)->set_i(1);
  EXPECT_TRUE(message_contains(import_error(p), {"'h.1.attn.probs' (Softmax)", "axis = 1", "has -1"}));

  p = file();
  const float scale = 0.5f;
  initializer(p, "attn_scale").set_raw_data(&scale, sizeof scale);
  EXPECT_TRUE(message_contains(import_error(p), {"'h.0.attn.scaled'", "'attn_scale'", "other values"}));

  // The residual skipped: the MLP's residual adds the embeddings instead.
  p = file();
  node(p, "h.0.mlp_residual").set_input(0, "embeddings");
  EXPECT_TRUE(message_contains(import_error(p), {"'h.0.mlp_residual'", "reads input 0 'embeddings'",
                                                 "'h.0.attn_residual'"}));

  // An untied head: its own copy of the token embedding.
  p = file();
  ::onnx::TensorProto copy = initializer(p, "wte.weight");
  copy.set_name("lm_head.weight");
  *p.mutable_graph()->add_initializer() = copy;
  node(p, "lm_head.weight_t").set_input(0, "lm_head.weight");
  EXPECT_TRUE(message_contains(import_error(p), {"'lm_head.weight_t'", "'lm_head.weight'", "shared with 'wte.weight'"}));

  // One layer fewer than the layer norms say.
  p = file();
  auto* nodes = p.mutable_graph()->mutable_node();
  nodes->DeleteSubrange(nodes->size() - 1, 1);
  EXPECT_TRUE(message_contains(import_error(p), {"nodes where strata's GPT"}));
}

TEST_F(OnnxGptImportErrors, NotAGptAtAll) {
  // INT64 ids into a graph with no embedding lookup.
  ::onnx::ModelProto p = file();
  p.mutable_graph()->clear_node();
  EXPECT_TRUE(message_contains(import_error(p), {"reads INT64 token ids", "no Gather"}));
  p = file();
  p.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  EXPECT_TRUE(message_contains(import_error(p), {"input 'input_ids' has elements of type INT64",
                                                 "INT64 token ids [batch, sequence] into a GPT"}));
}

}  // namespace
}  // namespace strata::testing
