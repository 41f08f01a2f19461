// Model::describe(verbose): one row per module with its output shape and parameters, the total,
// the same table in every dispatch mode; shapes from the latest input when none is given; the
// model's state (train/eval, batch-norm statistics) untouched.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <vector>

#include "strata/core/factories.h"
#include "strata/nn/custom_model.h"
#include "strata/nn/layers/factories.h"
#include "gpt_test_util.h"
#include "nn_test_util.h"

namespace strata::testing {
namespace {

using ops::DispatchMode;

struct TableRow {
  std::string name, shape, params;
};
// The rows of the table (after the describe() line and the header), by name; `what` is skipped.
std::vector<TableRow> table_rows(const std::string& summary) {
  std::vector<TableRow> rows;
  std::istringstream in(summary);
  std::string line;
  std::getline(in, line);  // describe()
  std::getline(in, line);  // header
  while (std::getline(in, line) && line.rfind("total parameters: ", 0) != 0) {
    std::istringstream f(line);
    std::vector<std::string> words;
    for (std::string w; f >> w;) words.push_back(w);
    if (words.size() >= 3) rows.push_back({words.front(), words[words.size() - 2], words.back()});
  }
  return rows;
}

auto mlp = [](const auto& p) { return nn::sequential(nn::linear(p, 16, 64), nn::relu(p), nn::linear(p, 64, 4)); };

TEST(Summary, EveryLayerOfASequentialWithItsShapeAndParametersInEveryMode) {
  std::string first_table;
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    auto model = nn::make_model(mlp, mode, "reference");
    const std::string s = model->describe(true, {8, 16});
    EXPECT_EQ(s.rfind(model->describe() + "\n", 0), 0u) << s;
    const std::vector<TableRow> rows = table_rows(s);
    ASSERT_EQ(rows.size(), 4u) << s;
    EXPECT_EQ(rows[0].name, "(model)");
    EXPECT_EQ(rows[0].shape, "[8,4]");
    EXPECT_EQ(rows[0].params, "1,348");
    EXPECT_EQ(rows[1].name, "0");
    EXPECT_EQ(rows[1].shape, "[8,64]");
    EXPECT_EQ(rows[1].params, "1,088");  // 16 x 64 + 64
    EXPECT_EQ(rows[2].shape, "[8,64]");
    EXPECT_EQ(rows[2].params, "0");
    EXPECT_EQ(rows[3].shape, "[8,4]");
    EXPECT_EQ(rows[3].params, "260");
    EXPECT_NE(s.find("total parameters: 1,348 | shapes for input [8,16]"), std::string::npos) << s;
    EXPECT_NE(s.find("Linear(in_features=16, out_features=64, bias=True)"), std::string::npos) << s;
    const std::string table = s.substr(s.find('\n'));
    if (first_table.empty()) first_table = table;
    EXPECT_EQ(table, first_table);  // only the describe() line names the mode
  }
}

TEST(Summary, ShapesOfTheLatestInputWhenNoneIsGivenAndNoneBeforeARun) {
  auto model = nn::make_model(mlp, DispatchMode::virtual_call, "reference");
  const std::string before = model->describe(true);
  EXPECT_NE(before.find("no output shapes: give an input shape, or run the model once"), std::string::npos) << before;
  EXPECT_EQ(table_rows(before)[1].shape, "-");
  auto opt = model->make_optimizer({.lr = 0.1});
  model->train_step(randn({5, 16}), randint(0, 4, {5}), *opt);
  const std::string after = model->describe(true);
  EXPECT_EQ(table_rows(after)[1].shape, "[5,64]") << after;
  EXPECT_NE(after.find("shapes for input [5,16]"), std::string::npos) << after;
}

TEST(Summary, LeNetIsAChainEveryRowHasItsShape) {
  nn::LeNetConfig c;
  auto model = nn::make_lenet(c, DispatchMode::virtual_call, "reference");
  const std::string s = model->describe(true, {2, 1, 28, 28});
  const std::vector<TableRow> rows = table_rows(s);
  ASSERT_EQ(static_cast<int64_t>(rows.size()), static_cast<int64_t>(model->module().named_modules().size())) << s;
  for (const TableRow& r : rows) EXPECT_NE(r.shape, "-") << r.name << "\n" << s;
  EXPECT_EQ(rows.front().shape, "[2,10]");
  EXPECT_EQ(rows.back().shape, "[2,10]");  // fc2
  EXPECT_NE(s.find("total parameters: " + nn::group_thousands(model->num_parameters())), std::string::npos);
}

TEST(Summary, AResidualBlocksChildrenAreNotAChainAndTheStateIsUntouched) {
  auto model = nn::make_resnet(tiny_resnet(18), DispatchMode::virtual_call, "reference");
  const nn::StateDict before = model->module().named_buffers();
  std::vector<std::vector<float>> saved;
  for (const auto& [name, t] : before) saved.push_back(t.to_vector<float>());
  const std::string s = model->describe(true, {2, 3, 8, 8});
  std::map<std::string, TableRow> by_name;
  for (const TableRow& r : table_rows(s)) by_name[r.name] = r;
  EXPECT_EQ(by_name["(model)"].shape, "[2,10]") << s;
  EXPECT_EQ(by_name["conv1"].shape, "[2,8,8,8]") << s;
  EXPECT_EQ(by_name["layer1"].shape, "[2,8,8,8]") << s;
  EXPECT_EQ(by_name["layer2.0"].shape, "[2,16,4,4]") << s;  // a block of a stage: the stage is a chain
  EXPECT_EQ(by_name["layer2.0.conv1"].shape, "-") << s;     // inside the block, the residual path is not
  EXPECT_EQ(by_name["fc"].shape, "[2,10]") << s;
  EXPECT_TRUE(model->module().is_training());
  const nn::StateDict after = model->module().named_buffers();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i].second.to_vector<float>(), saved[i]) << before[i].first;
}

// GPT reads token ids: the table runs it on zero ids, the position embedding is a lookup beside the
// chain and the output projection (tied to wte) a head after ln_f.
TEST(Summary, AGptListsItsLayersWithTheirShapesInEveryMode) {
  std::string first_table;
  for (DispatchMode mode : kAllModes) {
    SCOPED_TRACE(ops::dispatch_mode_name(mode));
    auto model = make_tiny_gpt(mode);
    const std::string s = model->describe(true, {2, 8});
    std::map<std::string, TableRow> by_name;
    for (const TableRow& r : table_rows(s)) by_name[r.name] = r;
    EXPECT_EQ(by_name["(model)"].shape, "[2,8,11]") << s;
    EXPECT_EQ(by_name["wte"].shape, "[2,8,8]") << s;
    EXPECT_EQ(by_name["wte"].params, "88") << s;  // 11 ids x 8
    EXPECT_EQ(by_name["wpe"].shape, "[2,8,8]") << s;
    EXPECT_EQ(by_name["h.0"].shape, "[2,8,8]") << s;
    EXPECT_EQ(by_name["h.1.ln_1"].shape, "[2,8,8]") << s;
    EXPECT_EQ(by_name["h.1.mlp"].shape, "[2,8,8]") << s;
    EXPECT_EQ(by_name["ln_f"].shape, "[2,8,8]") << s;
    EXPECT_NE(s.find("shapes for input [2,8]"), std::string::npos) << s;
    const std::string table = s.substr(s.find('\n'));
    if (first_table.empty()) first_table = table;
    EXPECT_EQ(table, first_table);
  }
  // From the latest input, after a training step on ids.
  auto model = make_tiny_gpt(DispatchMode::virtual_call);
  auto opt = model->make_optimizer(gpt_adamw());
  model->train_step(gpt_batch(0).first, gpt_batch(0).second, *opt);
  EXPECT_NE(model->describe(true).find("shapes for input [3,8]"), std::string::npos);
}

}  // namespace
}  // namespace strata::testing
