#include "strata/core/print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <vector>

#include "strata/core/dtype_dispatch.h"

namespace strata {

namespace {

// The elements printing reads, on the host.
class Reader {
 public:
  explicit Reader(const Tensor& t) : t_(t) {
    if (!t_.device().is_cpu()) {
      Tensor host = Tensor::empty(t.sizes(), t.dtype(), Device::cpu());
      copy_into(t, host);
      t_ = host;
    }
  }
  const Tensor& tensor() const { return t_; }
  // The element at `idx` (one index per dimension).
  double real(const std::vector<int64_t>& idx) const { return read<double>(idx); }
  int64_t integer(const std::vector<int64_t>& idx) const { return read<int64_t>(idx); }

 private:
  template <class To>
  To read(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t_.strides()[static_cast<int>(d)];
    return visit_dtype(t_.dtype(), [&](auto tag) {
      return convert_element<To>(static_cast<const decltype(tag)*>(t_.data_ptr())[off]);
    });
  }
  Tensor t_;
};

std::string printf_string(const char* fmt, int precision, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

std::string non_finite(double v) { return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"); }

// torch/_tensor_str.py's _Formatter: one format and width for all printed values.
class Formatter {
 public:
  Formatter(bool floating, int precision) : floating_(floating), precision_(precision) {}

  // Called with every value that will be printed, then finish().
  void see(double v, int64_t i) {
    if (!floating_) {
      width_ = std::max(width_, std::to_string(i).size());
      return;
    }
    if (!std::isfinite(v) || v == 0) return;
    values_.push_back(v);
  }
  void finish() {
    if (!floating_ || values_.empty()) return;
    double lo = INFINITY, hi = 0;
    for (double v : values_) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (double v : values_) {
      const size_t w = sci_ ? format_sci(v).size() : (int_mode_ ? format_int(v).size() + 1 : format_fixed(v).size());
      width_ = std::max(width_, w);
    }
  }
  size_t width() const { return width_; }

  std::string format(double v, int64_t i) const {
    std::string s;
    if (!floating_)
      s = std::to_string(i);
    else if (!std::isfinite(v))
      s = non_finite(v);
    else if (sci_)
      s = format_sci(v);
    else if (int_mode_)
      s = format_int(v) + ".";
    else
      s = format_fixed(v);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  std::string format_sci(double v) const { return printf_string("%.*e", precision_, v); }
  std::string format_fixed(double v) const { return printf_string("%.*f", precision_, v); }
  std::string format_int(double v) const { return printf_string("%.*f", 0, v); }

  bool floating_;
  int precision_;
  bool int_mode_ = true, sci_ = false;
  size_t width_ = 1;
  std::vector<double> values_;
};

class Printer {
 public:
  Printer(const Tensor& t, const PrintOptions& o) : r_(t), o_(o), fmt_(is_floating(t.dtype()), o.precision) {
    const Tensor& h = r_.tensor();
    const bool summarize = h.numel() > o.threshold;
    for (int d = 0; d < h.dim(); ++d) {
      const int64_t n = h.size(d);
      std::vector<int64_t> keep;
      if (summarize && n > 2 * o.edgeitems) {
        for (int64_t i = 0; i < o.edgeitems; ++i) keep.push_back(i);
        for (int64_t i = n - o.edgeitems; i < n; ++i) keep.push_back(i);
      } else {
        for (int64_t i = 0; i < n; ++i) keep.push_back(i);
      }
      elided_.push_back(summarize && n > 2 * o.edgeitems);
      keep_.push_back(std::move(keep));
    }
    std::vector<int64_t> idx;
    visit_kept(idx, [&](const std::vector<int64_t>& at) { fmt_.see(value(at), integer(at)); });
    fmt_.finish();
  }

  std::string body(int indent) {
    std::vector<int64_t> idx;
    return block(idx, indent);
  }

 private:
  double value(const std::vector<int64_t>& at) const { return fmt_floating() ? r_.real(at) : 0.0; }
  int64_t integer(const std::vector<int64_t>& at) const { return fmt_floating() ? 0 : r_.integer(at); }
  bool fmt_floating() const { return is_floating(r_.tensor().dtype()); }

  template <class Fn>
  void visit_kept(std::vector<int64_t>& idx, Fn&& fn) {
    const size_t d = idx.size();
    if (d == keep_.size()) return fn(idx);
    for (int64_t i : keep_[d]) {
      idx.push_back(i);
      visit_kept(idx, fn);
      idx.pop_back();
    }
  }

  // _tensor_str_with_formatter / _vector_str: the dimensions from idx.size() on.
  std::string block(std::vector<int64_t>& idx, int indent) {
    const size_t d = idx.size(), rank = keep_.size();
    if (d == rank) return fmt_.format(value(idx), integer(idx));
    std::vector<std::string> parts;
    const auto& keep = keep_[d];
    for (size_t k = 0; k < keep.size(); ++k) {
      if (elided_[d] && k == static_cast<size_t>(o_.edgeitems)) parts.push_back(d + 1 == rank ? " ..." : "...");
      idx.push_back(keep[k]);
      parts.push_back(d + 1 == rank ? fmt_.format(value(idx), integer(idx)) : block(idx, indent + 1));
      idx.pop_back();
    }
    std::string out = "[";
    if (d + 1 == rank) {
      const auto element = static_cast<int64_t>(fmt_.width() + 2);
      const int64_t per_line = std::max<int64_t>(1, (o_.linewidth - indent) / element);
      const std::string wrap = std::string(",\n").append(static_cast<size_t>(indent + 1), ' ');
      for (size_t k = 0; k < parts.size(); ++k) {
        if (k > 0) out += k % static_cast<size_t>(per_line) == 0 ? wrap : std::string(", ");
        out += parts[k];
      }
    } else {
      const std::string sep = std::string(",").append(rank - d - 1, '\n').append(static_cast<size_t>(indent + 1), ' ');
      for (size_t k = 0; k < parts.size(); ++k) {
        if (k > 0) out += sep;
        out += parts[k];
      }
    }
    return out + "]";
  }

  Reader r_;
  PrintOptions o_;
  Formatter fmt_;
  std::vector<std::vector<int64_t>> keep_;
  std::vector<bool> elided_;
};

}  // namespace

std::string to_string(const Tensor& t, const PrintOptions& o) {
  if (!t.defined()) return "tensor(undefined)";
  STRATA_CHECK(o.precision >= 0 && o.precision <= 30 && o.threshold >= 0 && o.edgeitems >= 1 && o.linewidth >= 1,
               "to_string: invalid PrintOptions (precision ", o.precision, ", threshold ", o.threshold, ", edgeitems ",
               o.edgeitems, ", linewidth ", o.linewidth, ")");
  const std::string prefix = "tensor(";
  std::string out = prefix + (t.numel() == 0 ? "[]" : Printer(t, o).body(static_cast<int>(prefix.size())));
  out += ", shape=" + t.sizes().str() + ", dtype=" + std::string(dtype_name(t.dtype())) + ", device=" + t.device().str();
  if (t.requires_grad()) out += ", requires_grad=true";
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace strata
