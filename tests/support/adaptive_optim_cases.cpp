#include "support/adaptive_optim_cases.h"

#include <cmath>

#include "strata/backends/reference/reference_backend.h"

namespace strata::testing {

std::vector<AdaptiveCase> adaptive_cases() {
  std::vector<AdaptiveCase> v;
  const auto rms = [&](std::string name, ops::RmspropOptions o) {
    v.push_back({std::move(name), Adaptive::rmsprop, o, {}, {}, 0.0});
  };
  rms("rmsprop", {});
  rms("rmsprop_momentum_wd", {0.01, 0.9, 1e-8, 0.05, 0.9, false});
  rms("rmsprop_centered", {0.01, 0.95, 1e-6, 0.0, 0.0, true});
  rms("rmsprop_centered_momentum_wd", {0.005, 0.9, 1e-8, 1e-2, 0.5, true});
  v.push_back({"adagrad", Adaptive::adagrad, {}, {}, {}, 0.0});
  v.push_back({"adagrad_lr_decay_wd_init", Adaptive::adagrad, {}, {0.1, 0.05, 0.01, 1e-10}, {}, 0.1});
  v.push_back({"adadelta", Adaptive::adadelta, {}, {}, {}, 0.0});
  v.push_back({"adadelta_rho_eps_wd", Adaptive::adadelta, {}, {}, {0.5, 0.8, 1e-4, 0.02}, 0.0});
  return v;
}

std::vector<ParamLayout> param_layouts(const Shape& large) {
  return {{"3x33", {3, 33}, MemoryFormat::contiguous, false},
          {"nhwc_2x8x3x3", {2, 8, 3, 3}, MemoryFormat::channels_last, false},
          {"transposed_5x4", {5, 4}, MemoryFormat::contiguous, true},
          {"one_element", {1}, MemoryFormat::contiguous, false},
          {"large_" + large.str(), large, MemoryFormat::contiguous, false}};
}

int state_count(const AdaptiveCase& c) {
  switch (c.kind) {
    case Adaptive::rmsprop: return 1 + (c.rmsprop.momentum != 0.0) + c.rmsprop.centered;
    case Adaptive::adagrad: return 1;
    case Adaptive::adadelta: return 2;
  }
  return 0;
}

double case_lr(const AdaptiveCase& c) {
  switch (c.kind) {
    case Adaptive::rmsprop: return c.rmsprop.lr;
    case Adaptive::adagrad: return c.adagrad.lr;
    case Adaptive::adadelta: return c.adadelta.lr;
  }
  return 0.0;
}

std::vector<Tensor> new_state(const AdaptiveCase& c, const Tensor& p) {
  std::vector<Tensor> s;
  const MemoryFormat fmt = p.is_channels_last() && !p.is_contiguous() ? MemoryFormat::channels_last
                                                                       : MemoryFormat::contiguous;
  for (int i = 0; i < state_count(c); ++i) {
    s.push_back(Tensor::empty(p.sizes(), p.dtype(), p.device(), fmt));
    backends::ReferenceBackend{}.fill({s.back(), c.kind == Adaptive::adagrad ? c.init : 0.0});
  }
  return s;
}

std::vector<Tensor> clone_state(const std::vector<Tensor>& state) {
  std::vector<Tensor> out;
  for (const Tensor& t : state) out.push_back(t.clone(t.is_channels_last() && !t.is_contiguous()
                                                          ? MemoryFormat::channels_last
                                                          : MemoryFormat::contiguous));
  return out;
}

namespace {

// RMSprop's optional state: where its options keep it, its index in a case's state.
int momentum_index(const AdaptiveCase& c) { return c.rmsprop.momentum != 0.0 ? 1 : -1; }
int grad_avg_index(const AdaptiveCase& c) { return c.rmsprop.centered ? (c.rmsprop.momentum != 0.0 ? 2 : 1) : -1; }

template <class V>
V at_or_none(const std::vector<V>& list, int i) {
  return i < 0 ? V() : list[static_cast<size_t>(i)];
}

std::vector<ops::TensorView> views(const std::vector<Tensor>& ts) { return {ts.begin(), ts.end()}; }
ops::TensorView view_or_none(const Tensor& t) { return t.defined() ? ops::TensorView(t) : ops::TensorView(); }

}  // namespace

void adaptive_step(backends::Backend& b, const AdaptiveCase& c, const Tensor& p, const Tensor& g,
                   const std::vector<Tensor>& s, int64_t t, const Tensor& hyper, const Tensor& amp, double lr) {
  const ops::TensorView h = view_or_none(hyper), a = view_or_none(amp);
  switch (c.kind) {
    case Adaptive::rmsprop: {
      ops::RmspropOptions o = c.rmsprop;
      if (lr >= 0) o.lr = lr;
      b.rmsprop_step({p, g, s[0], view_or_none(at_or_none(s, momentum_index(c))),
                      view_or_none(at_or_none(s, grad_avg_index(c))), o, h, a});
      return;
    }
    case Adaptive::adagrad: {
      ops::AdagradOptions o = c.adagrad;
      if (lr >= 0) o.lr = lr;
      b.adagrad_step({p, g, s[0], o, t, h, a});
      return;
    }
    case Adaptive::adadelta: {
      ops::AdadeltaOptions o = c.adadelta;
      if (lr >= 0) o.lr = lr;
      b.adadelta_step({p, g, s[0], s[1], o, h, a});
      return;
    }
  }
}

void adaptive_multi_step(backends::Backend& b, const AdaptiveCase& c, const std::vector<Tensor>& params,
                         const std::vector<Tensor>& grads, const std::vector<std::vector<Tensor>>& state,
                         const std::vector<int64_t>& steps, const std::vector<Tensor>& hypers, const Tensor& amp,
                         double lr) {
  std::vector<std::vector<ops::TensorView>> lists(static_cast<size_t>(state_count(c)));
  for (const std::vector<Tensor>& s : state)
    for (size_t k = 0; k < lists.size(); ++k) lists[k].push_back(s[k]);
  const std::vector<ops::TensorView> pv = views(params), gv = views(grads), hv = views(hypers);
  const ops::TensorView a = view_or_none(amp);
  const auto list = [&](int k) { return k < 0 ? std::vector<ops::TensorView>() : lists[static_cast<size_t>(k)]; };
  switch (c.kind) {
    case Adaptive::rmsprop: {
      ops::RmspropOptions o = c.rmsprop;
      if (lr >= 0) o.lr = lr;
      const std::vector<ops::TensorView> bufs = list(momentum_index(c)), avgs = list(grad_avg_index(c));
      b.multi_rmsprop_step({pv, gv, lists[0], bufs, avgs, hv, o, a});
      return;
    }
    case Adaptive::adagrad: {
      ops::AdagradOptions o = c.adagrad;
      if (lr >= 0) o.lr = lr;
      b.multi_adagrad_step({pv, gv, lists[0], hv, steps, o, a});
      return;
    }
    case Adaptive::adadelta: {
      ops::AdadeltaOptions o = c.adadelta;
      if (lr >= 0) o.lr = lr;
      b.multi_adadelta_step({pv, gv, lists[0], lists[1], hv, o, a});
      return;
    }
  }
}

void oracle_step(const AdaptiveCase& c, std::vector<double>& p, const std::vector<double>& grad,
                 std::vector<std::vector<double>>& state, int64_t t) {
  for (size_t i = 0; i < p.size(); ++i) {
    double g = grad[i];
    switch (c.kind) {
      case Adaptive::rmsprop: {
        const ops::RmspropOptions& o = c.rmsprop;
        if (o.weight_decay != 0) g = g + o.weight_decay * p[i];
        double& square_avg = state[0][i];
        square_avg = square_avg * o.alpha + (1 - o.alpha) * g * g;  // mul_(alpha).addcmul_(g, g, 1 - alpha)
        double avg;
        if (o.centered) {
          double& grad_avg = state[static_cast<size_t>(grad_avg_index(c))][i];
          grad_avg = grad_avg + (1 - o.alpha) * (g - grad_avg);  // lerp_(g, 1 - alpha)
          avg = std::sqrt(square_avg - grad_avg * grad_avg);
        } else {
          avg = std::sqrt(square_avg);
        }
        avg = avg + o.eps;
        if (o.momentum > 0) {
          double& buf = state[1][i];
          buf = buf * o.momentum + g / avg;
          p[i] = p[i] - o.lr * buf;
        } else {
          p[i] = p[i] - o.lr * g / avg;
        }
        break;
      }
      case Adaptive::adagrad: {
        const ops::AdagradOptions& o = c.adagrad;
        if (o.weight_decay != 0) g = g + o.weight_decay * p[i];
        const double clr = o.lr / (1 + static_cast<double>(t - 1) * o.lr_decay);
        state[0][i] = state[0][i] + g * g;
        p[i] = p[i] - clr * g / (std::sqrt(state[0][i]) + o.eps);
        break;
      }
      case Adaptive::adadelta: {
        const ops::AdadeltaOptions& o = c.adadelta;
        if (o.weight_decay != 0) g = g + o.weight_decay * p[i];
        double &square_avg = state[0][i], &acc_delta = state[1][i];
        square_avg = square_avg * o.rho + (1 - o.rho) * g * g;
        const double std_dev = std::sqrt(square_avg + o.eps);
        const double delta = std::sqrt(acc_delta + o.eps) / std_dev * g;
        acc_delta = acc_delta * o.rho + (1 - o.rho) * delta * delta;
        p[i] = p[i] - o.lr * delta;
        break;
      }
    }
  }
}

}  // namespace strata::testing
