#include "tt/testing.h"

#include <cmath>
#include <sstream>

namespace tt::testing {

::testing::AssertionResult tensor_near(const char* actual_expr, const char* expected_expr,
                                       const char*, const char*, const Tensor& actual,
                                       const Tensor& expected, double atol, double rtol) {
  std::ostringstream head;
  head << actual_expr << " vs " << expected_expr << ": ";
  if (!actual.defined() || !expected.defined()) {
    return ::testing::AssertionFailure() << head.str() << "undefined tensor";
  }
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << head.str() << "shape " << shape_str(actual.shape())
                                         << " vs " << shape_str(expected.shape());
  }
  const auto a = actual.to(DType::kFloat64).to_vector<double>();
  const auto e = expected.to(DType::kFloat64).to_vector<double>();
  double max_abs = 0, max_rel = 0;
  int64_t first_bad = -1, n_bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    // Equal values (the same infinity included) and NaN against NaN match exactly.
    const bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    const bool same = both_nan || a[i] == e[i];
    const double abs_err = same ? 0.0 : std::abs(a[i] - e[i]);
    const double rel_err = abs_err / std::max(std::abs(e[i]), 1e-300);
    const bool bad = !same && (!std::isfinite(abs_err) || abs_err > atol + rtol * std::abs(e[i]));
    if (!std::isnan(abs_err)) {
      max_abs = std::max(max_abs, abs_err);
      if (e[i] != 0) max_rel = std::max(max_rel, rel_err);
    }
    if (bad) {
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
      ++n_bad;
    }
  }
  if (first_bad < 0) return ::testing::AssertionSuccess();
  // Turn the flat index into a multi-index.
  std::vector<int64_t> idx(actual.dim());
  int64_t rem = first_bad;
  for (int64_t d = actual.dim() - 1; d >= 0; --d) {
    idx[d] = rem % actual.size(d);
    rem /= actual.size(d);
  }
  return ::testing::AssertionFailure()
         << head.str() << n_bad << " of " << a.size() << " elements differ; shape "
         << shape_str(actual.shape()) << " (" << dtype_name(actual.dtype()) << " vs "
         << dtype_name(expected.dtype()) << "); first at index " << shape_str(idx) << ": "
         << a[first_bad] << " vs " << e[first_bad] << "; max abs err " << max_abs
         << ", max rel err " << max_rel << "; tolerance atol=" << atol << " rtol=" << rtol;
}

std::string reference_path(const std::string& relative) {
  if (relative.starts_with('/')) return relative;  // already absolute (a directory from outside)
  return std::string(TT_REFERENCE_DIR) + "/" + relative;
}

}  // namespace tt::testing
