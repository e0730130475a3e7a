// Chapter 03 exercise ch03.5: finite differences, and gradcheck built on them.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "tt/autograd.h"
#include "tt/todo.h"

namespace tt::autograd {

namespace {

/// Seed of gradcheck's random output weights w (fixed: a failure reproduces exactly).
constexpr uint64_t kGradcheckSeed = 20240603;

void check_float64(const Tensor& t, const std::string& what) {
  TT_CHECK(t.dtype() == DType::kFloat64, "gradcheck: ", what, " is ", t.describe(),
           "; finite differences need float64 (convert with .to(DType::kFloat64))");
}

/// <y, w> in float64, summed in row-major order (deterministic).
double dot(const Tensor& y, const Tensor& w_host) {
  TT_CHECK(y.defined(), "gradcheck: the function returned an undefined tensor");
  check_float64(y, "the output");
  TT_CHECK(y.shape() == w_host.shape(), "gradcheck: the function returned shape ", y.shape(),
           " but its output had shape ", w_host.shape(), " at the unperturbed point");
  const Tensor yh = y.to(Device::cpu()).contiguous();
  const double* py = yh.data<double>();
  const double* pw = w_host.data<double>();
  double sum = 0.0;
  for (int64_t i = 0; i < yh.numel(); ++i) sum += py[i] * pw[i];
  return sum;
}

}  // namespace

std::vector<Tensor> numerical_vjp(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                  const Tensor& w, double eps) {
  TT_CHECK(w.defined(), "numerical_vjp: w is undefined");
  check_float64(w, "w");
  TT_CHECK(eps > 0, "numerical_vjp: eps must be positive, got ", eps);
  const Tensor w_host = w.to(Device::cpu()).contiguous();
  NoGradGuard no_grad;

  // Private CPU copies of the inputs we differentiate; `args` is what fn sees.
  std::vector<Tensor> hosts(inputs.size());
  std::vector<Tensor> args(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    TT_CHECK(inputs[k].defined(), "numerical_vjp: input ", k, " is undefined");
    args[k] = inputs[k].detach();
    if (!inputs[k].requires_grad()) continue;
    check_float64(inputs[k], detail::str("input ", k));
    hosts[k] = inputs[k].to(Device::cpu()).clone();
  }
  // <fn(args), w> at the current (perturbed) values of the host copies.
  [[maybe_unused]] auto objective = [&]() {  // (unused only in the starter)
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      if (hosts[k].defined()) args[k] = hosts[k].to(inputs[k].device());
    }
    return dot(fn(args), w_host);
  };

  std::vector<Tensor> result(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!hosts[k].defined()) continue;
#if TT_SOLUTION
    double* x = hosts[k].data<double>();
    Tensor r = zeros(hosts[k].shape(), {DType::kFloat64});
    double* out = r.data<double>();
    for (int64_t i = 0; i < r.numel(); ++i) {
      const double original = x[i];
      x[i] = original + eps;
      const double plus = objective();
      x[i] = original - eps;
      const double minus = objective();
      x[i] = original;  // restore before moving to the next element
      out[i] = (plus - minus) / (2 * eps);
    }
    result[k] = r.to(inputs[k].device());
#else
    TT_TODO(
        "ch03.5",
        "numerical_vjp: result[k][i] = the central difference of <fn(args), w> for element i of input k with step eps, every other element unchanged (float64, on input k's device)");
#endif
  }
  return result;
}

GradcheckResult gradcheck(const TensorFn& fn, const std::vector<Tensor>& inputs, double eps,
                          double atol, double rtol) {
  TT_CHECK(is_grad_enabled(), "gradcheck: grad mode is off (called under NoGradGuard?)");
  bool any = false;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    TT_CHECK(inputs[k].defined(), "gradcheck: input ", k, " is undefined");
    if (!inputs[k].requires_grad()) continue;
    check_float64(inputs[k], detail::str("input ", k));
    any = true;
  }
  TT_CHECK(any,
           "gradcheck: no input requires grad; call set_requires_grad() on the inputs to check");

  // Analytic side first: fn on fresh leaves sharing the inputs' data (so the inputs' own .grad
  // is never touched); its output shape fixes w, a random weighting of the outputs, so that one
  // backward(y, w) checks the whole Jacobian at once.
  std::vector<Tensor> leaves(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    leaves[k] = inputs[k].detach();
    if (inputs[k].requires_grad()) leaves[k].set_requires_grad(true);
  }
  const Tensor y = fn(leaves);
  TT_CHECK(y.defined(), "gradcheck: the function returned an undefined tensor");
  check_float64(y, "the output");
  Generator gen(kGradcheckSeed);
  const Tensor w = randn(y.shape(), gen, {DType::kFloat64, y.device()});

  const std::vector<Tensor> numeric = numerical_vjp(fn, inputs, w, eps);
  if (y.requires_grad()) backward(y, w);  // an output that does not depend on x: gradient 0

  GradcheckResult res;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!numeric[k].defined()) continue;
    const Tensor n_host = numeric[k].to(Device::cpu()).contiguous();
    const Tensor g = leaves[k].grad();
    const Tensor a_host =
        g.defined() ? g.to(Device::cpu()).contiguous() : zeros(n_host.shape(), {DType::kFloat64});
    const double* pa = a_host.data<double>();
    const double* pn = n_host.data<double>();
    for (int64_t i = 0; i < n_host.numel(); ++i) {
      const double err = std::abs(pa[i] - pn[i]);
      const double tol = atol + rtol * std::abs(pn[i]);
      res.max_abs_err = std::max(res.max_abs_err, err);
      res.max_rel_err = std::max(res.max_rel_err, err / std::max(std::abs(pn[i]), atol));
      if (!(err <= tol) && res.ok) {  // also catches NaN
        res.ok = false;
        std::ostringstream os;
        os << "gradcheck: input " << k << " (shape " << shape_str(n_host.shape()) << "), element "
           << i << ": analytic " << pa[i] << " vs numeric " << pn[i] << " (|diff| " << err
           << " > atol + rtol*|numeric| = " << tol << ")";
        res.message = os.str();
      }
    }
  }
  return res;
}

}  // namespace tt::autograd
