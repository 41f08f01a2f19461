#include "strata/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "strata/autograd/node.h"

namespace strata::autograd {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& o) {
  for (const Tensor& t : inputs) {
    STRATA_CHECK(t.dtype() == DType::f64 && t.device().is_cpu() && t.is_non_overlapping_dense(),
                 "gradcheck: inputs must be dense f64 CPU tensors, got ", t.str());
    if (t.requires_grad()) t.impl().grad.reset();
  }
  Tensor out = f(inputs);
  STRATA_CHECK(out.numel() == 1, "gradcheck: f must return one element, got ", out.str());
  backward(out);

  GradcheckResult r;
  std::ostringstream report;
  int shown = 0;
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.requires_grad()) continue;
    const MemoryFormat fmt = t.is_contiguous() ? MemoryFormat::contiguous : MemoryFormat::channels_last;
    STRATA_CHECK(t.grad().defined(), "gradcheck: input ", i, " (", t.str(), ") received no gradient");
    // Compare in the input's memory order, so element k is the same one in both.
    const Tensor g = t.grad().contiguous(fmt);
    const double* ga = g.data<double>();
    double* x = t.data<double>();
    for (int64_t k = 0; k < t.numel(); ++k) {
      const double saved = x[k];
      x[k] = saved + o.eps;
      const double fp = f(inputs).item();
      x[k] = saved - o.eps;
      const double fm = f(inputs).item();
      x[k] = saved;
      const double numeric = (fp - fm) / (2 * o.eps);
      const double err = std::fabs(ga[k] - numeric);
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (!(err <= o.atol + o.rtol * std::fabs(numeric))) {
        r.ok = false;
        if (shown++ < 5)
          report << "input " << i << " " << t.str() << " element " << k << ": analytic " << ga[k] << " numeric "
                 << numeric << "\n";
      }
    }
  }
  r.report = report.str();
  return r;
}

}  // namespace strata::autograd
