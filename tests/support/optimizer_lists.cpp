#include "support/optimizer_lists.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/ops/table/op_args.h"
#include "support/adaptive_optim_cases.h"
#include "support/compare.h"
#include "support/random.h"

namespace strata::testing {
namespace {

using Place = std::function<Tensor(const Tensor&)>;

// A list's tensors, new ones at each call, in the layouts named above: 70 parameters (a
// cuda launch takes at most 64 of SGD's, 40 of Adam's).
std::vector<Tensor> make_list(uint64_t seed, double lo, double hi, const Place& place) {
  std::vector<Tensor> out;
  for (int i = 0; i < 70; ++i) {
    const uint64_t s = seed + static_cast<uint64_t>(i);
    auto r = [&](const Shape& sizes, MemoryFormat fmt = MemoryFormat::contiguous) {
      return place(random_tensor(sizes, DType::f32, s, lo, hi, fmt));
    };
    switch (i % 7) {
      case 0: out.push_back(r({3, 33})); break;
      case 1: out.push_back(r({2, 8, 3, 3}, MemoryFormat::channels_last)); break;
      case 2: out.push_back(r({5, 4}).permute({1, 0})); break;  // strided: the single kernel's
      case 3: out.push_back(r({0, 3})); break;
      case 4: out.push_back(r({})); break;
      case 5: out.push_back(r({1000 + i})); break;
      default: out.push_back(r({4099})); break;  // several of a launch's chunks
    }
  }
  return out;
}

struct Copies {
  std::vector<Tensor> multi, single;
};
Copies placed(uint64_t seed, double lo, double hi, const Place& place) {
  return {make_list(seed, lo, hi, place), make_list(seed, lo, hi, place)};
}
std::vector<ops::TensorView> views(const std::vector<Tensor>& ts) { return {ts.begin(), ts.end()}; }

void expect_lists_equal(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(got[i], want[i])) << what << "[" << i << "]";
}

// A {lr, step} on the device.
Tensor hyper(double lr, double step, const Place& place) {
  return place(Tensor::from_vector<double>({lr, step}, Shape{2}));
}

// {lr, step} pairs as the rows of one pinned host tensor (graph mode's optimizer's form).
std::vector<Tensor> host_hypers(const std::vector<std::pair<double, double>>& pairs) {
  const auto n = static_cast<int64_t>(pairs.size());
  const Tensor rows = Tensor::empty_pinned(Shape{n, 2}, DType::f64);
  std::vector<Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    rows.data<double>()[2 * i] = pairs[static_cast<size_t>(i)].first;
    rows.data<double>()[2 * i + 1] = pairs[static_cast<size_t>(i)].second;
    out.push_back(rows.narrow(0, i, 1).view(Shape{2}));
  }
  return out;
}

// The run-time forms a step is taken in: plain, graph mode's hypers (on the device, or as
// rows of one pinned host tensor), loss scaling's state (a step taken, a step skipped).
struct Form {
  std::string name;
  bool hypers;
  const Tensor* amp;
  bool host = false;  // the hypers as rows of one pinned host tensor
};
class Forms {
 public:
  explicit Forms(const Place& place)
      : taken_(place(Tensor::from_vector<double>({1024.0, 3.0, 2.0, 1.0 / 1024.0}, Shape{4}))),
        skipped_(place(Tensor::from_vector<double>({512.0, 0.0, 3.0, 0.0}, Shape{4}))),
        forms_{{"plain", false, nullptr},
               {"device hyper", true, nullptr},
               {"host hyper", true, nullptr, true},
               {"amp", false, &taken_},
               {"amp skipped", true, &skipped_},
               {"amp, host hyper", true, &taken_, true}} {}
  Forms(const Forms&) = delete;
  Forms& operator=(const Forms&) = delete;
  auto begin() const { return forms_.begin(); }
  auto end() const { return forms_.end(); }

 private:
  Tensor taken_, skipped_;
  std::vector<Form> forms_;
};

}  // namespace

void expect_multi_steps_match_single_steps(backends::Backend& b, const Place& place) {
  const Forms forms(place);
  uint64_t seed = 31000;
  for (const Form& f : forms)
    for (double momentum : {0.0, 0.9}) {
      SCOPED_TRACE("sgd, " + f.name + ", momentum " + std::to_string(momentum));
      Copies p = placed(seed += 100, -1, 1, place), g = placed(seed += 100, -1, 1, place);
      Copies buf = placed(seed += 100, -0.1, 0.1, place);
      std::vector<Tensor> hypers;
      if (f.host)
        hypers = host_hypers(std::vector<std::pair<double, double>>(p.multi.size(), {0.05, 1.0}));
      for (size_t i = 0; f.hypers && !f.host && i < p.multi.size(); ++i) hypers.push_back(hyper(0.05, 1, place));
      ops::SgdOptions o;
      o.lr = f.hypers ? 123.0 : 0.05, o.momentum = momentum, o.weight_decay = 1e-2, o.nesterov = momentum != 0;
      const std::vector<ops::TensorView> pv = views(p.multi), gv = views(g.multi), bv = views(buf.multi),
                                         hv = views(hypers);
      const ops::TensorView amp = f.amp ? ops::TensorView(*f.amp) : ops::TensorView();
      b.multi_sgd_step(ops::MultiSgdStepArgs{pv, gv, momentum != 0 ? bv : std::vector<ops::TensorView>(), hv, o, amp});
      for (size_t i = 0; i < p.single.size(); ++i)
        b.sgd_step(ops::SgdStepArgs{p.single[i], g.single[i], momentum != 0 ? buf.single[i] : Tensor(), o,
                                    f.hypers ? ops::TensorView(hypers[i]) : ops::TensorView(), amp});
      expect_lists_equal(p.multi, p.single, "params");
      expect_lists_equal(buf.multi, buf.single, "momentum_bufs");
      if (f.hypers) {
        // The hypers were read: the same step with their lr in the options gives the same bits.
        Copies q = placed(seed - 200, -1, 1, place), qb = placed(seed, -0.1, 0.1, place);
        ops::SgdOptions plain = o;
        plain.lr = 0.05;
        for (size_t i = 0; i < q.single.size(); ++i)
          b.sgd_step(ops::SgdStepArgs{q.single[i], g.multi[i], momentum != 0 ? qb.single[i] : Tensor(), plain, {}, amp});
        expect_lists_equal(p.multi, q.single, "params against the options' lr");
      }
    }
  for (const Form& f : forms)
    for (bool adamw : {false, true}) {
      SCOPED_TRACE(std::string(adamw ? "adamw, " : "adam, ") + f.name);
      Copies p = placed(seed += 100, -1, 1, place), g = placed(seed += 100, -1, 1, place);
      Copies m = placed(seed += 100, -0.1, 0.1, place), v = placed(seed += 100, 0, 0.01, place);
      std::vector<Tensor> hypers;
      std::vector<int64_t> steps;
      std::vector<std::pair<double, double>> pairs;
      for (size_t i = 0; i < p.multi.size(); ++i) {
        steps.push_back(1 + static_cast<int64_t>(i % 5) + (f.amp ? 3 : 0));  // each its own count
        pairs.emplace_back(1e-3, static_cast<double>(steps.back()));
        if (f.hypers && !f.host) hypers.push_back(hyper(1e-3, static_cast<double>(steps.back()), place));
      }
      if (f.host) hypers = host_hypers(pairs);
      ops::AdamOptions o;
      o.lr = f.hypers ? 123.0 : 1e-3, o.weight_decay = 1e-2, o.decoupled_weight_decay = adamw;
      const std::vector<ops::TensorView> pv = views(p.multi), gv = views(g.multi), mv = views(m.multi),
                                         vv = views(v.multi), hv = views(hypers);
      const ops::TensorView amp = f.amp ? ops::TensorView(*f.amp) : ops::TensorView();
      b.multi_adam_step(ops::MultiAdamStepArgs{pv, gv, mv, vv, hv, steps, o, amp});
      for (size_t i = 0; i < p.single.size(); ++i)
        b.adam_step(ops::AdamStepArgs{p.single[i], g.single[i], m.single[i], v.single[i], o, steps[i],
                                      f.hypers ? ops::TensorView(hypers[i]) : ops::TensorView(), amp});
      expect_lists_equal(p.multi, p.single, "params");
      expect_lists_equal(m.multi, m.single, "exp_avgs");
      expect_lists_equal(v.multi, v.single, "exp_avg_sqs");
    }
}

void expect_adaptive_multi_steps_match_single_steps(backends::Backend& b, const Place& place) {
  const Forms forms(place);
  uint64_t seed = 41000;
  for (const AdaptiveCase& c : adaptive_cases())
    for (const Form& f : forms) {
      SCOPED_TRACE(c.name + ", " + f.name);
      const uint64_t first = seed += 1000;
      // Parameters, gradients and each state (square averages and sums >= 0, above the
      // squared averages RMSprop's centered form subtracts).
      const auto make = [&](int which) {
        const bool positive = which == 2 || (which > 2 && c.kind == Adaptive::adadelta);
        return placed(first + 100 * static_cast<uint64_t>(which), which < 2 ? -1 : positive ? 0.01 : -0.05,
                      which < 2 ? 1 : positive ? 0.02 : 0.05, place);
      };
      Copies p = make(0), g = make(1);
      std::vector<Copies> st;
      for (int k = 0; k < state_count(c); ++k) st.push_back(make(2 + k));
      const size_t n = p.multi.size();
      std::vector<int64_t> steps;
      std::vector<std::pair<double, double>> pairs;
      std::vector<Tensor> hypers;
      for (size_t i = 0; i < n; ++i) {
        steps.push_back(1 + static_cast<int64_t>(i % 5) + (f.amp ? 3 : 0));
        pairs.emplace_back(case_lr(c), static_cast<double>(steps.back()));
        if (f.hypers && !f.host) hypers.push_back(hyper(case_lr(c), static_cast<double>(steps.back()), place));
      }
      if (f.host) hypers = host_hypers(pairs);
      const Tensor amp = f.amp ? *f.amp : Tensor();
      const double lr = f.hypers ? 123.0 : case_lr(c);  // a decoy where the hypers are read
      const auto state_of = [&](size_t i, bool multi) {
        std::vector<Tensor> s;
        for (const Copies& k : st) s.push_back(multi ? k.multi[i] : k.single[i]);
        return s;
      };
      std::vector<std::vector<Tensor>> multi_state;
      for (size_t i = 0; i < n; ++i) multi_state.push_back(state_of(i, true));
      adaptive_multi_step(b, c, p.multi, g.multi, multi_state, steps, hypers, amp, lr);
      for (size_t i = 0; i < n; ++i)
        adaptive_step(b, c, p.single[i], g.single[i], state_of(i, false), steps[i], f.hypers ? hypers[i] : Tensor(),
                      amp, lr);
      expect_lists_equal(p.multi, p.single, "params");
      for (size_t k = 0; k < st.size(); ++k)
        expect_lists_equal(st[k].multi, st[k].single, "state " + std::to_string(k));
      if (f.hypers) {
        // The hypers were read: the plain step at their lr gives the same bits.
        Copies q = make(0);
        std::vector<Copies> qs;
        for (int k = 0; k < state_count(c); ++k) qs.push_back(make(2 + k));
        for (size_t i = 0; i < n; ++i) {
          std::vector<Tensor> s;
          for (const Copies& k : qs) s.push_back(k.single[i]);
          adaptive_step(b, c, q.single[i], g.multi[i], s, steps[i], Tensor(), amp, case_lr(c));
        }
        expect_lists_equal(p.multi, q.single, "params against the options' lr");
      }
    }
}

}  // namespace strata::testing
