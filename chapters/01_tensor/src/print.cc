// PyTorch-style printing: tensor([[1.0000, 2.5000],
//                                 [3.0000, 4.0000]], dtype=float64)
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tt/tensor.h"

namespace tt {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;  // numel above which "..." is used
constexpr int64_t kEdgeItems = 3;              // items kept at each end when summarizing
constexpr int64_t kLineWidth = 80;

enum class FloatMode { kInteger, kFixed, kScientific };

struct Formatter {
  bool floating = true;
  FloatMode mode = FloatMode::kFixed;
  int width = 1;

  std::string format(double v) const {
    char buf[64];
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    } else if (std::isnan(v)) {
      std::snprintf(buf, sizeof buf, "nan");
    } else if (std::isinf(v)) {
      std::snprintf(buf, sizeof buf, v > 0 ? "inf" : "-inf");
    } else if (mode == FloatMode::kInteger) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else if (mode == FloatMode::kScientific) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
};

// Indices shown along a dim of size n (all, or the edges when summarizing); -1 marks "...".
std::vector<int64_t> shown(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item());
    return;
  }
  for (int64_t i : shown(t.size(0), summarize)) {
    if (i >= 0) collect(t.select(0, i), summarize, out);
  }
}

void render(const Tensor& t, const Formatter& f, bool summarize, int indent, std::string& s) {
  if (t.dim() == 0) {
    std::string v = f.format(t.item());
    s += std::string(f.width - static_cast<int>(v.size()), ' ') + v;
    return;
  }
  s += '[';
  const auto idx = shown(t.size(0), summarize);
  if (t.dim() == 1) {
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / (f.width + 2));
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) {
        s += ',';
        s += (k % per_line == 0) ? "\n" + std::string(indent + 1, ' ') : " ";
      }
      if (idx[k] < 0)
        s += "...";
      else
        render(t.select(0, idx[k]), f, summarize, indent + 1, s);
    }
  } else {
    const std::string sep = "," + std::string(t.dim() - 1, '\n') + std::string(indent + 1, ' ');
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (k > 0) s += sep;
      if (idx[k] < 0)
        s += "...";
      else
        render(t.select(0, idx[k]), f, summarize, indent + 1, s);
    }
  }
  s += ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const Tensor host = to(Device::cpu());
  const bool summarize = host.numel() > kSummarizeThreshold;
  std::vector<double> values;
  if (host.numel() > 0) collect(host, summarize, values);

  Formatter f;
  f.floating = is_floating(dtype());
  if (f.floating) {
    bool all_int = true;
    double max_abs = 0, min_abs = INFINITY;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      all_int = all_int && v == std::round(v);
      const double a = std::abs(v);
      max_abs = std::max(max_abs, a);
      if (a > 0) min_abs = std::min(min_abs, a);
    }
    if (all_int && max_abs < 1e8)
      f.mode = FloatMode::kInteger;
    else if (max_abs >= 1e8 || (min_abs < 1e-4) || max_abs / min_abs > 1000)
      f.mode = FloatMode::kScientific;
    else
      f.mode = FloatMode::kFixed;
  }
  for (double v : values) f.width = std::max(f.width, static_cast<int>(f.format(v).size()));

  std::string s = "tensor(";
  if (host.numel() == 0)
    s += host.dim() == 0 ? "" : "[]";
  else
    render(host, f, summarize, 7, s);
  if (summarize || host.numel() == 0) {
    if (host.numel() == 0 || summarize) s += ", size=" + shape_str(shape());
  }
  if (!device().is_cpu()) s += ", device='" + device().str() + "'";
  if (dtype() == DType::kFloat64 || dtype() == DType::kBFloat16) {
    s += ", dtype=";
    s += dtype_name(dtype());
  }
  if (requires_grad()) s += is_leaf() ? ", requires_grad=True" : ", grad_fn=<node>";
  s += ')';
  return s;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.to_string();
}

}  // namespace tt
