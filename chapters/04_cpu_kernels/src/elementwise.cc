// Element-wise ops of chapter 04 (given code): the unary and tensor-scalar CPU kernels, and the
// autograd Functions of every element-wise op. Binary ops reuse chapter 02's "add", "sub",
// "mul", "div" kernels on inputs expanded to the broadcast shape.
#include <cmath>
#include <string>

#include "tt/autograd.h"
#include "tt/cpu_loops.h"
#include "tt/dispatcher.h"
#include "tt/ops_elementwise.h"
#include "tt/parallel.h"

namespace tt {

// ----- CPU kernels --------------------------------------------------------------------------

namespace cpu {
namespace {

/// Elements per parallel chunk: large enough that a chunk costs far more than a fork.
constexpr int64_t kElementwiseGrain = 1 << 15;

/// out[i] = f(a[i]) in parallel over fixed chunks (element-wise: no ordering question).
template <typename T, typename F>
void parallel_unary(const Tensor& out, const Tensor& a, F f) {
  parallel_for(0, out.numel(), kElementwiseGrain,
               [&](int64_t b, int64_t e) { cpu_unary_loop<T>(out, a, f, b, e); });
}

}  // namespace

void neg(const Tensor& out, const Tensor& a) {
  dispatch_dtype(a.dtype(), "neg",
                 [&]<typename T>() { parallel_unary<T>(out, a, [](T x) { return -x; }); });
}

void exp(const Tensor& out, const Tensor& a) {
  dispatch_floating(a.dtype(), "exp", [&]<typename T>() {
    parallel_unary<T>(out, a, [](T x) { return std::exp(x); });
  });
}

void log(const Tensor& out, const Tensor& a) {
  dispatch_floating(a.dtype(), "log", [&]<typename T>() {
    parallel_unary<T>(out, a, [](T x) { return std::log(x); });
  });
}

void sqrt(const Tensor& out, const Tensor& a) {
  dispatch_floating(a.dtype(), "sqrt", [&]<typename T>() {
    parallel_unary<T>(out, a, [](T x) { return std::sqrt(x); });
  });
}

void tanh(const Tensor& out, const Tensor& a) {
  dispatch_floating(a.dtype(), "tanh", [&]<typename T>() {
    parallel_unary<T>(out, a, [](T x) { return std::tanh(x); });
  });
}

void add_scalar(const Tensor& out, const Tensor& a, double s) {
  dispatch_floating(a.dtype(), "add_scalar", [&]<typename T>() {
    parallel_unary<T>(out, a, [v = static_cast<T>(s)](T x) { return x + v; });
  });
}

void mul_scalar(const Tensor& out, const Tensor& a, double s) {
  dispatch_floating(a.dtype(), "mul_scalar", [&]<typename T>() {
    parallel_unary<T>(out, a, [v = static_cast<T>(s)](T x) { return x * v; });
  });
}

void pow_scalar(const Tensor& out, const Tensor& a, double s) {
  dispatch_floating(a.dtype(), "pow_scalar", [&]<typename T>() {
    if (s == 2.0) {
      parallel_unary<T>(out, a, [](T x) { return x * x; });
    } else {
      parallel_unary<T>(out, a, [v = static_cast<T>(s)](T x) { return std::pow(x, v); });
    }
  });
}

}  // namespace cpu

TT_REGISTER_KERNEL("neg", DeviceType::kCPU, cpu::neg);
TT_REGISTER_KERNEL("exp", DeviceType::kCPU, cpu::exp);
TT_REGISTER_KERNEL("log", DeviceType::kCPU, cpu::log);
TT_REGISTER_KERNEL("sqrt", DeviceType::kCPU, cpu::sqrt);
TT_REGISTER_KERNEL("tanh", DeviceType::kCPU, cpu::tanh);
TT_REGISTER_KERNEL("add_scalar", DeviceType::kCPU, cpu::add_scalar);
TT_REGISTER_KERNEL("mul_scalar", DeviceType::kCPU, cpu::mul_scalar);
TT_REGISTER_KERNEL("pow_scalar", DeviceType::kCPU, cpu::pow_scalar);

// ----- forward helpers (no autograd) --------------------------------------------------------

namespace {

void check_floating(const char* op, const Tensor& a) {
  TT_CHECK(a.defined(), op, ": undefined input");
  TT_CHECK(is_floating(a.dtype()), op, ": expected a float32 or float64 tensor, got ",
           a.describe());
}

Tensor unary_forward(const char* op, const Tensor& a) {
  Tensor out = empty(a.shape(), {a.dtype(), a.device()});
  call_kernel<UnaryKernel>(op, a.device(), out, a);
  return out;
}

Tensor scalar_forward(const char* op, const Tensor& a, double s) {
  Tensor out = empty(a.shape(), {a.dtype(), a.device()});
  call_kernel<ScalarKernel>(op, a.device(), out, a, s);
  return out;
}

// ----- binary ops ---------------------------------------------------------------------------

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "add";
    case BinaryOp::kSub:
      return "sub";
    case BinaryOp::kMul:
      return "mul";
    case BinaryOp::kDiv:
      return "div";
  }
  return "?";
}

/// binary_op(op, a, b) for same-shape operands. Chapter 02's CPU kernels are serial; on the CPU
/// the rows of dim 0 are split into fixed slabs, each one a call of that kernel on narrowed
/// views, run in parallel (element-wise: no ordering question); the kernel is looked up once.
/// Only for floating dtypes: the
/// int64 "div" kernel throws on a zero divisor, and nothing may throw inside parallel_for.
Tensor parallel_binary(const char* op, const Tensor& a, const Tensor& b) {
  if (!a.device().is_cpu() || !is_floating(a.dtype()) || a.dim() == 0 ||
      a.numel() < 2 * cpu::kElementwiseGrain || a.shape() != b.shape()) {
    return binary_op(op, a, b);
  }
  BinaryKernel* kernel = KernelRegistry::instance().find<BinaryKernel>(op, DeviceType::kCPU);
  Tensor out = empty(a.shape(), {a.dtype(), a.device()});
  const int64_t rows = a.size(0), row_len = a.numel() / rows;
  parallel_for(
      0, rows, std::max<int64_t>(1, cpu::kElementwiseGrain / row_len), [&](int64_t r0, int64_t r1) {
        kernel(out.narrow(0, r0, r1 - r0), a.narrow(0, r0, r1 - r0), b.narrow(0, r0, r1 - r0));
      });
  return out;
}

/// a (op) b with broadcasting; backward reduces each gradient to its input's shape.
class BinaryFn final : public autograd::Function {
 public:
  explicit BinaryFn(BinaryOp op) : op_(op) {}
  std::string name() const override {
    static const char* names[] = {"AddBackward", "SubBackward", "MulBackward", "DivBackward"};
    return names[static_cast<int>(op_)];
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const char* op = binary_name(op_);
    const Tensor &a = in[0], &b = in[1];
    TT_CHECK(a.defined() && b.defined(), op, ": undefined input");
    TT_CHECK(a.dtype() == b.dtype() && a.device() == b.device(), op,
             ": inputs must have the same dtype and device, got ", a.describe(), " and ",
             b.describe());
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
    // Stride-0 views: chapter 02's same-shape kernels then read broadcast inputs for free.
    return {parallel_binary(op, a.expand(shape), b.expand(shape))};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    shape_a_ = in[0].shape();
    shape_b_ = in[1].shape();
    if (op_ == BinaryOp::kMul || op_ == BinaryOp::kDiv) save_for_backward(in);
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override {
    const Tensor& g = grad[0];
    Tensor ga, gb;
    switch (op_) {
      case BinaryOp::kAdd:
        ga = g, gb = g;
        break;
      case BinaryOp::kSub:
        ga = g, gb = neg(g);
        break;
      case BinaryOp::kMul: {
        const Tensor &a = saved_tensors()[0], &b = saved_tensors()[1];
        if (needs_input_grad(0)) ga = mul(g, b);
        if (needs_input_grad(1)) gb = mul(g, a);
        break;
      }
      case BinaryOp::kDiv: {
        const Tensor &a = saved_tensors()[0], &b = saved_tensors()[1];
        if (needs_input_grad(0)) ga = div(g, b);
        if (needs_input_grad(1)) gb = neg(div(mul(g, a), mul(b, b)));
        break;
      }
    }
    return {needs_input_grad(0) ? sum_to_shape(ga, shape_a_) : Tensor(),
            needs_input_grad(1) ? sum_to_shape(gb, shape_b_) : Tensor()};
  }

 private:
  BinaryOp op_;
  Shape shape_a_, shape_b_;
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  TT_CHECK(a.defined() && b.defined(), binary_name(op), ": undefined input (", a.describe(), ", ",
           b.describe(), ")");
  return autograd::Function::apply<BinaryFn>({a, b}, op)[0];
}

// ----- unary and tensor-scalar ops ----------------------------------------------------------

enum class UnaryOp { kNeg, kExp, kLog, kSqrt, kTanh, kAddScalar, kMulScalar, kPowScalar };

/// One Function for every single-input op; `s` is the scalar of the *_scalar ops, `label` the
/// front-end's name for error messages ("sub" for sub(a, s), which runs add_scalar).
class UnaryFn final : public autograd::Function {
 public:
  UnaryFn(UnaryOp op, double s, const char* label) : op_(op), s_(s), label_(label) {}
  std::string name() const override {
    static const char* names[] = {"NegBackward",       "ExpBackward",      "LogBackward",
                                  "SqrtBackward",      "TanhBackward",     "AddScalarBackward",
                                  "MulScalarBackward", "PowScalarBackward"};
    return names[static_cast<int>(op_)];
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& a = in[0];
    if (op_ != UnaryOp::kNeg) check_floating(label_, a);  // neg also takes int64
    switch (op_) {
      case UnaryOp::kNeg:
        return {unary_forward("neg", a)};
      case UnaryOp::kExp:
        return {unary_forward("exp", a)};
      case UnaryOp::kLog:
        return {unary_forward("log", a)};
      case UnaryOp::kSqrt:
        return {unary_forward("sqrt", a)};
      case UnaryOp::kTanh:
        return {unary_forward("tanh", a)};
      case UnaryOp::kAddScalar:
        return {scalar_forward("add_scalar", a, s_)};
      case UnaryOp::kMulScalar:
        return {scalar_forward("mul_scalar", a, s_)};
      case UnaryOp::kPowScalar:
        return {scalar_forward("pow_scalar", a, s_)};
    }
    return {};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    switch (op_) {
      case UnaryOp::kExp:
      case UnaryOp::kSqrt:
      case UnaryOp::kTanh:
        save_for_backward(out);
        break;  // derivative from the output
      case UnaryOp::kLog:
      case UnaryOp::kPowScalar:
        save_for_backward(in);
        break;
      default:
        break;
    }
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override {
    const Tensor& g = grad[0];
    switch (op_) {
      case UnaryOp::kNeg:
        return {neg(g)};
      case UnaryOp::kAddScalar:
        return {g};
      case UnaryOp::kMulScalar:
        return {mul(g, s_)};
      case UnaryOp::kExp:
        return {mul(g, saved_tensors()[0])};
      case UnaryOp::kLog:
        return {div(g, saved_tensors()[0])};
      case UnaryOp::kSqrt:
        return {div(mul(g, 0.5), saved_tensors()[0])};
      case UnaryOp::kTanh: {
        const Tensor& y = saved_tensors()[0];
        return {mul(g, add(neg(mul(y, y)), 1.0))};  // g * (1 - y^2)
      }
      case UnaryOp::kPowScalar: {
        const Tensor& x = saved_tensors()[0];
        return {mul(g, mul(pow(x, s_ - 1.0), s_))};  // g * p * x^(p-1)
      }
    }
    return {Tensor()};
  }

 private:
  UnaryOp op_;
  double s_;
  const char* label_;
};

Tensor unary(const char* label, UnaryOp op, const Tensor& a, double s = 0.0) {
  TT_CHECK(a.defined(), label, ": undefined input");
  return autograd::Function::apply<UnaryFn>({a}, op, s, label)[0];
}

}  // namespace

// ----- front-ends ---------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kAdd, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kSub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kMul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kDiv, a, b);
}

Tensor add(const Tensor& a, double s) {
  return unary("add", UnaryOp::kAddScalar, a, s);
}
Tensor sub(const Tensor& a, double s) {
  return unary("sub", UnaryOp::kAddScalar, a, -s);
}
Tensor mul(const Tensor& a, double s) {
  return unary("mul", UnaryOp::kMulScalar, a, s);
}
Tensor div(const Tensor& a, double s) {
  return unary("div", UnaryOp::kMulScalar, a, 1.0 / s);
}
Tensor pow(const Tensor& a, double p) {
  return unary("pow", UnaryOp::kPowScalar, a, p);
}
Tensor neg(const Tensor& a) {
  return unary("neg", UnaryOp::kNeg, a);
}
Tensor exp(const Tensor& a) {
  return unary("exp", UnaryOp::kExp, a);
}
Tensor log(const Tensor& a) {
  return unary("log", UnaryOp::kLog, a);
}
Tensor sqrt(const Tensor& a) {
  return unary("sqrt", UnaryOp::kSqrt, a);
}
Tensor tanh(const Tensor& a) {
  return unary("tanh", UnaryOp::kTanh, a);
}

}  // namespace tt
