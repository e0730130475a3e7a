// Front-ends and autograd Functions of the NN ops (tt/ops_nn.h). The kernels
// they call through the dispatcher are in nn_kernels.cc (exercises ch04.10 -
// ch04.16).
#include <string>

#include "tt/autograd.h"
#include "tt/ops_nn.h"

namespace tt {

namespace {

/// Allocates an uninitialized tensor like `t` (shape, dtype, device).
Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), {t.dtype(), t.device()});
}

void check_defined(const char* op, const Tensor& t, const char* what) {
  TT_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

void check_floating(const char* op, const Tensor& t, const char* what) {
  check_defined(op, t, what);
  TT_CHECK(is_floating(t.dtype()), op, ": ", what, " must be float32 or float64, got ",
           t.describe());
}

void check_int64(const char* op, const Tensor& t, const char* what) {
  check_defined(op, t, what);
  TT_CHECK(t.dtype() == DType::kInt64, op, ": ", what, " must be int64, got ", t.describe());
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  TT_CHECK(a.device() == b.device(), op, ": inputs are on different devices: ", a.describe(),
           " and ", b.describe());
}

// ----- softmax / log_softmax
// ------------------------------------------------------------------

/// Softmax and log-softmax differ only in the kernels they call.
struct SoftmaxFamilyFn : autograd::Function {
  SoftmaxFamilyFn(int64_t dim, bool log) : dim_(dim), log_(log) {}
  std::string name() const override { return log_ ? "LogSoftmaxBackward" : "SoftmaxBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous();
    Tensor out = empty_like(x);
    call_kernel<SoftmaxForwardKernel>(log_ ? "log_softmax_forward" : "softmax_forward", x.device(),
                                      out, x, dim_);
    return {out};
  }
  void setup_context(const std::vector<Tensor>&, const std::vector<Tensor>& out) override {
    save_for_backward({out[0]});  // backward needs only the output
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& y = saved_tensors()[0];
    const Tensor dy = grads[0].contiguous();
    Tensor dx = empty_like(y);
    call_kernel<SoftmaxBackwardKernel>(log_ ? "log_softmax_backward" : "softmax_backward",
                                       y.device(), dx, dy, y, dim_);
    return {dx};
  }

  int64_t dim_;
  bool log_;
};

Tensor softmax_family(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_floating(op, x, "x");
  const int64_t d = wrap_dim(dim, x.shape(), op);
  return autograd::Function::apply<SoftmaxFamilyFn>({x}, d, log)[0];
}

// ----- layernorm
// ------------------------------------------------------------------------------

/// LayerNorm; the per-row mean and rstd computed by forward are kept for
/// backward.
struct LayerNormFn : autograd::Function {
  explicit LayerNormFn(double eps) : eps_(eps) {}
  std::string name() const override { return "LayerNormBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous(), w = in[1].contiguous(), b = in[2].contiguous();
    Shape rows(x.shape().begin(), x.shape().end() - 1);
    Tensor out = empty_like(x);
    mean_ = empty(rows, {x.dtype(), x.device()});
    rstd_ = empty(rows, {x.dtype(), x.device()});
    call_kernel<LayerNormForwardKernel>("layernorm_forward", x.device(), out, mean_, rstd_, x, w, b,
                                        eps_);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous()});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& x = saved_tensors()[0];
    const Tensor& w = saved_tensors()[1];
    Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(w);
    call_kernel<LayerNormBackwardKernel>("layernorm_backward", x.device(), dx, dw, db,
                                         grads[0].contiguous(), x, w, mean_, rstd_);
    return {dx, dw, db};
  }
  void release_saved() override {
    Function::release_saved();
    mean_ = rstd_ = Tensor();
  }

  double eps_;
  Tensor mean_, rstd_;  // plain tensors without history: no reference cycle
};

// ----- gelu
// -----------------------------------------------------------------------------------

struct GeluFn : autograd::Function {
  std::string name() const override { return "GeluBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous();
    Tensor out = empty_like(x);
    call_kernel<UnaryForwardKernel>("gelu_forward", x.device(), out, x);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0].contiguous()});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& x = saved_tensors()[0];
    Tensor dx = empty_like(x);
    call_kernel<UnaryBackwardKernel>("gelu_backward", x.device(), dx, grads[0].contiguous(), x);
    return {dx};
  }
};

// ----- embedding
// ------------------------------------------------------------------------------

struct EmbeddingFn : autograd::Function {
  std::string name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor w = in[0].contiguous(), idx = in[1].contiguous();
    Shape shape = idx.shape();
    shape.push_back(w.size(1));
    Tensor out = empty(shape, {w.dtype(), w.device()});
    call_kernel<EmbeddingForwardKernel>("embedding_forward", w.device(), out, w, idx);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[1].contiguous()});
    weight_shape_ = in[0].shape();
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& idx = saved_tensors()[0];
    const Tensor dy = grads[0].contiguous();
    // Gradient-accumulation fusion (tt/autograd.h): where a backend registers the accumulating
    // kernel, the rows are added into the weight's .grad itself, with no zeroed [V, C] table
    // and no add of it afterwards (a pipeline's first stage does this once per micro-batch).
    const Tensor target = accumulation_target(0);
    if (target.defined() && target.dtype() == dy.dtype() &&
        KernelRegistry::instance().has("embedding_backward_accumulate", dy.device().type)) {
      call_kernel<EmbeddingBackwardKernel>("embedding_backward_accumulate", dy.device(), target, dy,
                                           idx);
      return {Tensor(), Tensor()};
    }
    Tensor dw = empty(weight_shape_, {dy.dtype(), dy.device()});
    call_kernel<EmbeddingBackwardKernel>("embedding_backward", dy.device(), dw, dy, idx);
    return {dw, Tensor()};
  }
  Shape weight_shape_;
};

// ----- cross-entropy
// --------------------------------------------------------------------------

/// Fused log-softmax + NLL; forward keeps the per-row log-sum-exp so backward
/// does not redo it.
struct CrossEntropyFn : autograd::Function {
  explicit CrossEntropyFn(int64_t ignore_index) : ignore_index_(ignore_index) {}
  std::string name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous(), t = in[1].contiguous();
    Tensor loss = empty({}, {x.dtype(), x.device()});
    lse_ = empty({x.size(0)}, {x.dtype(), x.device()});
    call_kernel<CrossEntropyForwardKernel>("cross_entropy_forward", x.device(), loss, lse_, x, t,
                                           ignore_index_);
    return {loss};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous()});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& x = saved_tensors()[0];
    const Tensor& t = saved_tensors()[1];
    Tensor dx = empty_like(x);
    call_kernel<CrossEntropyBackwardKernel>("cross_entropy_backward", x.device(), dx,
                                            grads[0].contiguous(), x, t, lse_, ignore_index_);
    return {dx, Tensor()};
  }
  void release_saved() override {
    Function::release_saved();
    lse_ = Tensor();
  }
  int64_t ignore_index_;
  Tensor lse_;
};

// ----- masked fill
// ----------------------------------------------------------------------------

struct MaskedFillFn : autograd::Function {
  explicit MaskedFillFn(double value) : value_(value) {}
  std::string name() const override { return "MaskedFillBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous();
    Tensor out = empty_like(x);
    call_kernel<MaskedFillForwardKernel>("masked_fill_forward", x.device(), out, x, in[1], value_);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[1]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor dy = grads[0].contiguous();
    Tensor dx = empty_like(dy);
    call_kernel<MaskedFillBackwardKernel>("masked_fill_backward", dy.device(), dx, dy,
                                          saved_tensors()[0]);
    return {dx, Tensor()};
  }
  double value_;
};

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_family("softmax", x, dim, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_family("log_softmax", x, dim, true);
}

Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_floating("layernorm", x, "x");
  check_floating("layernorm", weight, "weight");
  check_floating("layernorm", bias, "bias");
  TT_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layernorm: x must have a non-empty last dim, got ",
           x.describe());
  const Shape c{x.size(-1)};
  TT_CHECK(weight.shape() == c && bias.shape() == c && weight.dtype() == x.dtype() &&
               bias.dtype() == x.dtype(),
           "layernorm: weight and bias must have shape ", c, " and x's dtype; got x ", x.describe(),
           ", weight ", weight.describe(), ", bias ", bias.describe());
  check_same_device("layernorm", x, weight);
  check_same_device("layernorm", x, bias);
  TT_CHECK(eps > 0, "layernorm: eps must be positive, got ", eps);
  return autograd::Function::apply<LayerNormFn>({x, weight, bias}, eps)[0];
}

Tensor gelu(const Tensor& x) {
  check_floating("gelu", x, "x");
  return autograd::Function::apply<GeluFn>({x})[0];
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_floating("embedding", weight, "weight");
  check_int64("embedding", indices, "indices");
  TT_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [V, C], got ", weight.describe());
  check_same_device("embedding", weight, indices);
  return autograd::Function::apply<EmbeddingFn>({weight, indices})[0];
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  check_floating("cross_entropy", logits, "logits");
  check_int64("cross_entropy", targets, "targets");
  TT_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
           "cross_entropy: expected logits [N, V] and targets [N], got logits ", logits.describe(),
           " and targets ", targets.describe());
  TT_CHECK(logits.size(1) > 0, "cross_entropy: logits [N, V] need at least one class (V > 0), got ",
           logits.describe());
  check_same_device("cross_entropy", logits, targets);
  return autograd::Function::apply<CrossEntropyFn>({logits, targets}, ignore_index)[0];
}

Tensor causal_mask(int64_t T, Device device) {
  TT_CHECK(T >= 0, "causal_mask: negative length ", T);
  Tensor mask = zeros({T, T}, {DType::kInt64, Device::cpu()});
  int64_t* m = mask.data<int64_t>();
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = i + 1; j < T; ++j) m[i * T + j] = 1;
  }
  return mask.to(device);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_floating("masked_fill", x, "x");
  check_int64("masked_fill", mask, "mask");
  check_same_device("masked_fill", x, mask);
  // Broadcastable: aligned from the right, each mask size equals x's or is 1.
  bool ok = mask.dim() <= x.dim();
  for (int64_t i = 1; ok && i <= mask.dim(); ++i) {
    ok = mask.size(-i) == x.size(-i) || mask.size(-i) == 1;
  }
  TT_CHECK(ok, "masked_fill: mask ", mask.describe(), " does not broadcast to x ", x.describe());
  return autograd::Function::apply<MaskedFillFn>({x, mask.expand(x.shape())}, value)[0];
}

int64_t check_row_tensors(const std::string& op, std::initializer_list<const Tensor*> rows_like,
                          std::initializer_list<const Tensor*> vectors,
                          std::initializer_list<const Tensor*> stats) {
  TT_CHECK(rows_like.size() > 0, op, ": no tensors to check");
  const Tensor& x = **rows_like.begin();
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) > 0, op,
           ": expected a tensor [..., C] with C > 0, got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  const int64_t C = x.size(-1);
  const Shape stat_shape(x.shape().begin(), x.shape().end() - 1);
  const auto check = [&](std::initializer_list<const Tensor*> ts, const Shape& shape) {
    for (const Tensor* t : ts) {
      TT_CHECK(t->defined() && t->shape() == shape && t->dtype() == x.dtype() &&
                   t->device() == x.device() && t->is_contiguous(),
               op, ": expected a contiguous ", dtype_name(x.dtype()), " tensor of shape ", shape,
               " on ", x.device(), ", got ",
               t->defined() ? t->describe() : std::string("an undefined tensor"), " (x ",
               x.describe(), ")");
    }
  };
  check(rows_like, x.shape());
  check(vectors, Shape{C});
  check(stats, stat_shape);
  return C;
}

}  // namespace tt
