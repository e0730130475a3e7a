// Small differentiable test ops for chapter 03's tests. Chapter 04's real ops do not exist yet,
// so these compute on raw float64 CPU data (or with chapter 02's binary_op kernels).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/ops.h"
#include "tt/testing.h"

namespace tt::test03 {

using autograd::Function;
using autograd::is_grad_enabled;

/// A float64 CPU tensor from values (1-D unless a shape is given).
inline Tensor f64(const std::vector<double>& values, Shape shape = {}) {
  return from_vector<double>(values, std::move(shape));
}

/// out[i] = f(x[i]) on float64 CPU data (a new contiguous tensor).
template <typename F>
Tensor map_f64(const Tensor& x, F f) {
  const Tensor xc = x.contiguous();
  Tensor out = empty(x.shape(), {DType::kFloat64});
  const double* px = xc.data<double>();
  double* po = out.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) po[i] = f(px[i]);
  return out;
}

/// out[i] = f(a[i], b[i]) on float64 CPU data of equal shapes.
template <typename F>
Tensor zip_f64(const Tensor& a, const Tensor& b, F f) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  Tensor out = empty(a.shape(), {DType::kFloat64});
  const double* pa = ac.data<double>();
  const double* pb = bc.data<double>();
  double* po = out.data<double>();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = f(pa[i], pb[i]);
  return out;
}

/// y = x * x (raw loop); saves x.
struct SquareFn : Function {
  std::string name() const override { return "SquareBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {map_f64(in[0], [](double v) { return v * v; })};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {zip_f64(g[0], saved_tensors()[0], [](double gi, double x) { return 2 * gi * x; })};
  }
};

/// Like SquareFn with a wrong backward (3x instead of 2x): gradcheck must catch it.
struct BadSquareFn : SquareFn {
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {zip_f64(g[0], saved_tensors()[0], [](double gi, double x) { return 3 * gi * x; })};
  }
};

/// y = k * x with k a constructor argument (Function::apply<ScaleFn>({x}, k)).
struct ScaleFn : Function {
  explicit ScaleFn(double k) : k_(k) {}
  std::string name() const override { return "ScaleBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {map_f64(in[0], [k = k_](double v) { return k * v; })};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {map_f64(g[0], [k = k_](double v) { return k * v; })};
  }
  double k_;
};

/// y = a * b through chapter 02's dispatched "mul" kernel; saves both inputs.
struct MulFn : Function {
  std::string name() const override { return "MulBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {binary_op("mul", in[0], in[1])};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward(in);
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const auto& s = saved_tensors();
    return {needs_input_grad(0) ? binary_op("mul", g[0], s[1]) : Tensor(),
            needs_input_grad(1) ? binary_op("mul", g[0], s[0]) : Tensor()};
  }
};

/// y = a + b; backward hands the SAME gradient tensor to both inputs (as a real add does).
struct AddFn : Function {
  std::string name() const override { return "AddBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {binary_op("add", in[0], in[1])};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {g[0], g[0]}; }
};

/// y = exp(x); saves its OUTPUT (the classic reference-cycle trap).
struct ExpFn : Function {
  std::string name() const override { return "ExpBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {map_f64(in[0], [](double v) { return std::exp(v); })};
  }
  void setup_context(const std::vector<Tensor>&, const std::vector<Tensor>& out) override {
    save_for_backward(out);
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {zip_f64(g[0], saved_tensors()[0], [](double gi, double y) { return gi * y; })};
  }
};

/// y = sum(x), a 0-d tensor.
struct SumFn : Function {
  std::string name() const override { return "SumBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor xc = in[0].contiguous();
    double s = 0;
    for (int64_t i = 0; i < xc.numel(); ++i) s += xc.data<double>()[i];
    return {scalar_tensor(s, {DType::kFloat64})};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    shape_ = in[0].shape();
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {full(shape_, g[0].item(), {DType::kFloat64})};
  }
  Shape shape_;
};

/// Two outputs: the first and the second half of a 1-D tensor of even length.
struct SplitFn : Function {
  std::string name() const override { return "SplitBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const int64_t h = in[0].numel() / 2;
    const Tensor x = in[0].contiguous();
    Tensor a = empty({h}, {DType::kFloat64}), b = empty({h}, {DType::kFloat64});
    for (int64_t i = 0; i < h; ++i) {
      a.data<double>()[i] = x.data<double>()[i];
      b.data<double>()[i] = x.data<double>()[h + i];
    }
    return {a, b};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const int64_t h = g[0].numel();
    Tensor out = empty({2 * h}, {DType::kFloat64});
    const Tensor g0 = g[0].contiguous(), g1 = g[1].contiguous();
    for (int64_t i = 0; i < h; ++i) {
      out.data<double>()[i] = g0.data<double>()[i];
      out.data<double>()[h + i] = g1.data<double>()[i];
    }
    return {out};
  }
};

/// Returns its input handle unchanged: Function::apply must not rewrite the input's history.
struct IdentityFn : Function {
  std::string name() const override { return "IdentityBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override { return {in[0]}; }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {g[0]}; }
};

/// Any number of inputs, two outputs (copies of input 0); records what Function::apply does.
struct ProbeFn : Function {
  std::string name() const override { return "ProbeBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    grad_mode_in_forward = is_grad_enabled();
    return {in[0].clone(), in[0].clone()};
  }
  void setup_context(const std::vector<Tensor>&, const std::vector<Tensor>&) override {
    ++setup_calls;
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return std::vector<Tensor>(next_edges().size(), g[0]);
  }
  static inline bool grad_mode_in_forward = true;
  static inline int setup_calls = 0;
};

/// A backward that returns a gradient of the wrong shape.
struct WrongShapeFn : Function {
  std::string name() const override { return "WrongShapeBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override { return {in[0].clone()}; }
  std::vector<Tensor> backward(const std::vector<Tensor>&) override {
    return {zeros({7}, {DType::kFloat64})};
  }
};

}  // namespace tt::test03
