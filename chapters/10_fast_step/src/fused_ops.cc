// Front-ends and autograd Functions of tt/fused_ops.h, and the CPU glue of the fused residual +
// LayerNorm (its row cores are exercise ch10.8, residual_layernorm.cc). The cuBLASLt GEMMs are
// in fused_linear_cublaslt.cc, the CUDA residual + LayerNorm in residual_layernorm_cuda.cu.
#include "tt/fused_ops.h"

#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/parallel.h"

namespace tt {

namespace {

// ----- linear layers with epilogues -----------------------------------------------------------

// y = x W^T + b, or gelu of it, for x [M, K] (float32, CUDA): "matmul_lt_forward", or the
// composition when cuBLASLt has no algorithm. Inputs {x, w} or {x, w, b}.
struct LinearLtFn : autograd::Function {
  explicit LinearLtFn(bool gelu) : gelu_(gelu) {}
  std::string name() const override { return gelu_ ? "LinearGeluLtBackward" : "LinearLtBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    const Tensor& w = in[1];
    const Tensor b = in.size() > 2 ? in[2] : Tensor();
    const TensorOptions opts{x.dtype(), x.device()};
    Tensor y = empty({x.size(0), w.size(0)}, opts);
    if (gelu_) pre_ = empty(y.shape(), opts);
    if (call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", x.device(), y, x, w, b, pre_)) {
      return {y};
    }
    Tensor h = matmul(x, w.transpose(0, 1));  // no algorithm: the composition
    if (b.defined()) h = add(h, b);
    if (!gelu_) return {h};
    pre_ = h;
    return {gelu(h)};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0], in[1]});
    has_bias_ = in.size() > 2;
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& x = saved_tensors()[0];
    const Tensor& w = saved_tensors()[1];
    Tensor dh = grads[0].contiguous();
    if (gelu_) {
      Tensor g = empty(dh.shape(), {dh.dtype(), dh.device()});
      call_kernel<UnaryBackwardKernel>("gelu_backward", dh.device(), g, dh, pre_);
      dh = g;
    }
    std::vector<Tensor> out(has_bias_ ? 3 : 2);
    if (needs_input_grad(0)) out[0] = matmul(dh, w);
    const bool need_db = has_bias_ && needs_input_grad(2);
    if (needs_input_grad(1) || need_db) {
      // A new dW for the engine to accumulate: float32 GEMMs do not fuse the accumulation (see
      // the README, "Accumulating the weight gradient in the GEMM"; chapter 11's bf16 ones do).
      Tensor dw = empty(w.shape(), {w.dtype(), w.device()});
      Tensor db = need_db ? empty({w.size(0)}, {w.dtype(), w.device()}) : Tensor();
      if (!call_kernel<MatmulLtWgradKernel>("matmul_lt_wgrad", x.device(), dw, dh, x, db, 0.0)) {
        dw = matmul(dh.transpose(0, 1), x);
        if (need_db) db = sum(dh, {0});
      }
      out[1] = dw;
      if (need_db) out[2] = db;
    }
    return out;
  }
  void release_saved() override {
    Function::release_saved();
    pre_ = Tensor();
  }

  bool gelu_;
  bool has_bias_ = false;
  Tensor pre_;  // the pre-activation (gelu only): no history, no reference cycle
};

void check_linear(const char* op, const Tensor& x, const nn::Linear& layer) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == layer.in_features, op,
           ": expected input [..., ", layer.in_features, "], got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TT_CHECK(x.dtype() == layer.weight.dtype() && x.device() == layer.weight.device(), op, ": input ",
           x.describe(), " must have the dtype and device of the weight ", layer.weight.describe());
}

// The cuBLASLt path: float32 on CUDA; anything else runs the composition.
bool use_lt(const Tensor& x) {
  return x.device().is_cuda() && x.dtype() == DType::kFloat32;
}

Tensor linear_impl(const Tensor& x, nn::Linear& layer, bool gelu) {
  return apply_linear_function<LinearLtFn>(x, layer, gelu);
}

// ----- residual + LayerNorm ------------------------------------------------------------------

// Rows per chunk of the CPU kernels: the chunks, hence the order of the weight and bias
// gradient sums, depend only on the shapes.
constexpr int64_t kRowChunk = 64;

void residual_layernorm_forward_cpu(const Tensor& r, const Tensor& y, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& a, const Tensor& d,
                                    const Tensor& w, const Tensor& b, double eps) {
  const int64_t C = check_residual_layernorm_forward("cpu::residual_layernorm_forward", r, y, mean,
                                                     rstd, a, d, w, b);
  const int64_t rows = r.numel() / C;
  // A bfloat16 d or y (mixed precision, chapter 11): the row cores run on float32 copies, then y
  // is rounded to bfloat16 (an emulation of the CUDA kernel, which converts as it reads and writes).
  const Tensor d_t = d.dtype() == r.dtype() ? d : d.to(r.dtype());
  const Tensor y_t = y.dtype() == r.dtype() ? y : empty(y.shape(), {r.dtype(), r.device()});
  dispatch_floating(r.dtype(), "cpu::residual_layernorm_forward", [&]<typename T>() {
    parallel_for(0, rows, kRowChunk, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        cpu::residual_layernorm_forward_row<T>(a.data<T>() + i * C, d_t.data<T>() + i * C,
                                               w.data<T>(), b.data<T>(), r.data<T>() + i * C,
                                               y_t.data<T>() + i * C, mean.data<T>() + i,
                                               rstd.data<T>() + i, C, static_cast<T>(eps));
      }
    });
  });
  if (!y_t.is_same(y)) y.copy_(y_t);
}

void residual_layernorm_backward_cpu(const Tensor& dr, const Tensor& dd, const Tensor& dw,
                                     const Tensor& db, const Tensor& dr_in, const Tensor& dy_in,
                                     const Tensor& r, const Tensor& w, const Tensor& mean,
                                     const Tensor& rstd) {
  const int64_t C = check_residual_layernorm_backward("cpu::residual_layernorm_backward", dr, dd,
                                                      dw, db, dr_in, dy_in, r, w, mean, rstd);
  // Mixed precision on the CPU is an emulation on float32 copies (as in the forward).
  const Tensor dy = dy_in.dtype() == r.dtype() ? dy_in : dy_in.to(r.dtype());
  const int64_t rows = r.numel() / C;
  const int64_t n_chunks = (rows + kRowChunk - 1) / kRowChunk;
  dispatch_floating(r.dtype(), "cpu::residual_layernorm_backward", [&]<typename T>() {
    // Per chunk: [dw | db] partial sums, added in chunk order below.
    std::vector<T> partial(static_cast<std::size_t>(n_chunks * 2 * C), T(0));
    parallel_for(0, rows, kRowChunk, [&](int64_t r0, int64_t r1) {
      T* acc = partial.data() + (r0 / kRowChunk) * 2 * C;
      for (int64_t i = r0; i < r1; ++i) {
        cpu::residual_layernorm_backward_row<T>(
            dr_in.data<T>() + i * C, dy.data<T>() + i * C, r.data<T>() + i * C, w.data<T>(),
            mean.data<T>()[i], rstd.data<T>()[i], dr.data<T>() + i * C, acc, acc + C, C);
      }
    });
    T* pw = dw.data<T>();
    T* pb = db.data<T>();
    for (int64_t c = 0; c < C; ++c) pw[c] = pb[c] = T(0);
    for (int64_t k = 0; k < n_chunks; ++k) {
      const T* acc = partial.data() + k * 2 * C;
      for (int64_t c = 0; c < C; ++c) {
        pw[c] += acc[c];
        pb[c] += acc[C + c];
      }
    }
  });
  if (dd.defined()) dd.copy_(dr);
}

TT_REGISTER_KERNEL("residual_layernorm_forward", DeviceType::kCPU, residual_layernorm_forward_cpu);
TT_REGISTER_KERNEL("residual_layernorm_backward", DeviceType::kCPU,
                   residual_layernorm_backward_cpu);

// Inputs {residual, delta, w, b}; outputs {r, y}, y of dtype y_dtype (the residual's, or bfloat16
// for mixed precision; delta may be bfloat16 too). mean and rstd are kept for backward.
struct ResidualLayerNormFn : autograd::Function {
  ResidualLayerNormFn(double eps, DType y_dtype) : eps_(eps), y_dtype_(y_dtype) {}
  std::string name() const override { return "ResidualLayerNormBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor a = in[0].contiguous(), d = in[1].contiguous();
    const Tensor w = in[2].contiguous(), b = in[3].contiguous();
    const TensorOptions opts{a.dtype(), a.device()};
    const Shape stats(a.shape().begin(), a.shape().end() - 1);
    Tensor r = empty(a.shape(), opts), y = empty(a.shape(), {y_dtype_, a.device()});
    delta_dtype_ = d.dtype();
    mean_ = empty(stats, opts);
    rstd_ = empty(stats, opts);
    call_kernel<ResidualLayerNormForwardKernel>("residual_layernorm_forward", a.device(), r, y,
                                                mean_, rstd_, a, d, w, b, eps_);
    return {r, y};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    save_for_backward({out[0], in[2].contiguous()});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& r = saved_tensors()[0];
    const Tensor& w = saved_tensors()[1];
    const TensorOptions opts{r.dtype(), r.device()};
    Tensor dr = empty(r.shape(), opts), dw = empty(w.shape(), opts), db = empty(w.shape(), opts);
    // Mixed precision: the kernel reads a bfloat16 gradient of y as it is, and writes a bfloat16
    // delta's gradient (dr rounded) in the same pass: no cast kernels around it.
    const bool mixed_ok = grads[1].dtype() == r.dtype() ||
                          (grads[1].dtype() == DType::kBFloat16 && r.dtype() == DType::kFloat32);
    const Tensor dy = mixed_ok ? grads[1].contiguous() : grads[1].to(r.dtype());
    const Tensor dd =
        delta_dtype_ == r.dtype() ? Tensor() : empty(r.shape(), {delta_dtype_, r.device()});
    call_kernel<ResidualLayerNormBackwardKernel>("residual_layernorm_backward", r.device(), dr, dd,
                                                 dw, db, grads[0].contiguous(), dy, r, w, mean_,
                                                 rstd_);
    // r = residual + delta: both get dr (the engine never adds in place), delta in its dtype.
    return {dr, dd.defined() ? dd : dr, dw, db};
  }
  void release_saved() override {
    Function::release_saved();
    mean_ = Tensor();
    rstd_ = Tensor();
  }

  double eps_;
  DType y_dtype_;
  DType delta_dtype_ = DType::kFloat32;
  Tensor mean_, rstd_;
};

}  // namespace

Tensor linear_lt(const Tensor& x, nn::Linear& layer) {
  check_linear("linear_lt", x, layer);
  if (!use_lt(x)) return layer.forward(x);
  return linear_impl(x, layer, false);
}

Tensor linear_gelu_lt(const Tensor& x, nn::Linear& layer) {
  check_linear("linear_gelu_lt", x, layer);
  TT_CHECK(layer.bias.defined(), "linear_gelu_lt: the layer must have a bias (", layer.extra_repr(),
           ")");
  if (!use_lt(x)) return gelu(layer.forward(x));
  return linear_impl(x, layer, true);
}

namespace {

// A tensor the mixed-precision residual + LayerNorm kernels take in r's dtype, or in bfloat16
// with a float32 r (`bf16_only`: only the latter): contiguous, of r's shape, on r's device.
void check_t_or_bf16(const std::string& op, const char* what, const Tensor& t, const Tensor& r,
                     bool bf16_only = false) {
  const bool bf16 = t.defined() && t.dtype() == DType::kBFloat16 && r.dtype() == DType::kFloat32;
  const bool dtype_ok = bf16 || (!bf16_only && t.defined() && t.dtype() == r.dtype());
  TT_CHECK(dtype_ok && t.shape() == r.shape() && t.device() == r.device() && t.is_contiguous(), op,
           ": expected a contiguous ", bf16_only ? "" : dtype_name(r.dtype()),
           bf16_only ? "bfloat16" : (r.dtype() == DType::kFloat32 ? " or bfloat16" : ""),
           " tensor of shape ", r.shape(), " on ", r.device(),
           bf16_only ? " (with a float32 r)" : "", " for ", what, ", got ",
           t.defined() ? t.describe() : std::string("an undefined tensor"));
}

}  // namespace

int64_t check_residual_layernorm_forward(const std::string& op, const Tensor& r, const Tensor& y,
                                         const Tensor& mean, const Tensor& rstd, const Tensor& a,
                                         const Tensor& d, const Tensor& w, const Tensor& b) {
  const int64_t C = check_row_tensors(op, {&r, &a}, {&w, &b}, {&mean, &rstd});
  check_t_or_bf16(op, "d", d, r);
  check_t_or_bf16(op, "y", y, r);
  return C;
}

int64_t check_residual_layernorm_backward(const std::string& op, const Tensor& dr, const Tensor& dd,
                                          const Tensor& dw, const Tensor& db, const Tensor& dr_in,
                                          const Tensor& dy, const Tensor& r, const Tensor& w,
                                          const Tensor& mean, const Tensor& rstd) {
  const int64_t C = check_row_tensors(op, {&r, &dr, &dr_in}, {&w, &dw, &db}, {&mean, &rstd});
  check_t_or_bf16(op, "dy", dy, r);
  if (dd.defined()) check_t_or_bf16(op, "dd", dd, r, /*bf16_only=*/true);
  return C;
}

std::pair<Tensor, Tensor> residual_layernorm(const Tensor& residual, const Tensor& delta,
                                             nn::LayerNorm& ln) {
  TT_CHECK(residual.defined() && delta.defined() && residual.dtype() == delta.dtype(),
           "residual_layernorm: residual and delta must have one shape, dtype and device, got ",
           residual.defined() ? residual.describe() : std::string("undefined"), " and ",
           delta.defined() ? delta.describe() : std::string("undefined"));
  return residual_layernorm_to(residual, delta, ln, residual.dtype());
}

std::pair<Tensor, Tensor> residual_layernorm_to(const Tensor& residual, const Tensor& delta,
                                                nn::LayerNorm& ln, DType y_dtype) {
  const char* op =
      y_dtype == DType::kBFloat16 ? "residual_layernorm (bfloat16 output)" : "residual_layernorm";
  TT_CHECK(residual.defined() && delta.defined() && residual.shape() == delta.shape() &&
               residual.device() == delta.device(),
           op, ": residual and delta must have one shape and device, got ",
           residual.defined() ? residual.describe() : std::string("undefined"), " and ",
           delta.defined() ? delta.describe() : std::string("undefined"));
  TT_CHECK(residual.dim() >= 1 && residual.size(-1) == ln.dim &&
               residual.dtype() == ln.weight.dtype() && residual.device() == ln.weight.device(),
           op, ": expected [..., ", ln.dim, "] with the LayerNorm's dtype and device ",
           ln.weight.describe(), ", got ", residual.describe());
  const auto mixed_ok = [&](DType t) {
    return t == residual.dtype() || (t == DType::kBFloat16 && residual.dtype() == DType::kFloat32);
  };
  TT_CHECK(mixed_ok(delta.dtype()) && mixed_ok(y_dtype), op, ": delta and the output must have ",
           "the residual's dtype, or be bfloat16 with a float32 residual; got residual ",
           residual.describe(), ", delta ", delta.describe(), ", output ", dtype_name(y_dtype));
  const auto out = autograd::Function::apply<ResidualLayerNormFn>(
      {residual, delta, ln.weight, ln.bias}, ln.eps, y_dtype);
  return {out[0], out[1]};
}

}  // namespace tt
