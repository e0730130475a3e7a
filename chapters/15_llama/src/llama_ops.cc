// Front-ends, autograd Functions and the given kernels of the LLaMA ops (tt/llama_ops.h). The
// CPU kernels that are exercises (RMSNorm, RoPE, GQA) are in llama_kernels.cc.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/flash_attention.h"
#include "tt/functional.h"
#include "tt/fused_ops.h"
#include "tt/llama_ops.h"
#include "tt/master_weights.h"
#include "tt/ops_matmul.h"

namespace tt {

namespace {

Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), {t.dtype(), t.device()});
}

std::string describe(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

// ----- RMSNorm ------------------------------------------------------------------------------

struct RmsNormFn : autograd::Function {
  explicit RmsNormFn(double eps) : eps_(eps) {}
  std::string name() const override { return "RmsNormBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous(), w = in[1].contiguous();
    Tensor out = empty_like(x);
    Shape rows(x.shape().begin(), x.shape().end() - 1);
    const DType stat = x.dtype() == DType::kBFloat16 ? DType::kFloat32 : x.dtype();
    rstd_ = empty(rows, {stat, x.device()});
    call_kernel<RmsNormForwardKernel>("rms_norm_forward", x.device(), out, rstd_, x, w, eps_);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous()});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& x = saved_tensors()[0];
    const Tensor& w = saved_tensors()[1];
    Tensor dx = empty_like(x), dw = empty_like(w);
    call_kernel<RmsNormBackwardKernel>("rms_norm_backward", x.device(), dx, dw,
                                       grads[0].contiguous(), x, w, rstd_);
    return {dx, dw};
  }
  void release_saved() override {
    Function::release_saved();
    rstd_ = Tensor();
  }
  double eps_;
  Tensor rstd_;
};

// ----- RoPE ---------------------------------------------------------------------------------

struct RopeFn : autograd::Function {
  explicit RopeFn(RopeTables tables) : tables_(std::move(tables)) {}
  std::string name() const override { return "RopeBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    Tensor out = empty(x.shape(), {x.dtype(), x.device()});
    call_kernel<RopeKernel>("rope_forward", x.device(), out, x, tables_.cos, tables_.sin, in[1],
                            false);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[1]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& positions = saved_tensors()[0];
    const Tensor g = grads[0].stride(3) == 1 ? grads[0] : grads[0].contiguous();
    Tensor dx = empty(g.shape(), {g.dtype(), g.device()});
    call_kernel<RopeKernel>("rope_forward", g.device(), dx, g, tables_.cos, tables_.sin, positions,
                            true);
    return {dx, Tensor()};
  }
  RopeTables tables_;
};

// ----- SwiGLU -------------------------------------------------------------------------------

struct SwigluFn : autograd::Function {
  std::string name() const override { return "SwigluBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor a = in[0].contiguous(), b = in[1].contiguous();
    Tensor out = empty_like(a);
    call_kernel<SwigluForwardKernel>("swiglu_forward", a.device(), out, a, b);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous()});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& a = saved_tensors()[0];
    const Tensor& b = saved_tensors()[1];
    Tensor da = empty_like(a), db = empty_like(b);
    call_kernel<SwigluBackwardKernel>("swiglu_backward", a.device(), da, db, grads[0].contiguous(),
                                      a, b);
    return {da, db};
  }
};

// ----- bfloat16 projections of one input ----------------------------------------------------

// Inputs {x [M, K] float32 or bfloat16, w_1 [N_1, K], ..., w_n [N_n, K] float32}; outputs
// y_i [M, N_i] of out_dtype. Keeps the bfloat16 x (cast once) and W_i for backward.
struct LinearsBf16Fn : autograd::Function {
  explicit LinearsBf16Fn(DType out_dtype) : out_dtype_(out_dtype) {}
  std::string name() const override { return "LinearsBf16Backward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    x_dtype_ = in[0].dtype();
    x_ = in[0].to(DType::kBFloat16).contiguous();  // the one cast of x
    const Device dev = x_.device();
    std::vector<Tensor> ys;
    for (std::size_t i = 1; i < in.size(); ++i) {
      w_.push_back(bf16_weight(in[i]));  // the optimizer's copy, or a cast of the master
      Tensor y = empty({x_.size(0), w_.back().size(0)}, {out_dtype_, dev});
      TT_CHECK(y.numel() == 0 || x_.size(1) == 0 ||
                   call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", dev, y, x_, w_.back(),
                                                      Tensor(), Tensor()),
               name(), ": no GEMM algorithm for x ", x_.describe(), ", W ", w_.back().describe());
      if (y.numel() != 0 && x_.size(1) == 0) y.fill_(0.0);
      ys.push_back(y);
    }
    return ys;
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    TT_CHECK(x_.defined(), name(), ": the saved tensors were released");
    const Device dev = x_.device();
    const TensorOptions f32{DType::kFloat32, dev};
    std::vector<Tensor> out(grads.size() + 1);
    // dx in float32 when several dgrads add up (rounded once at the end for a bfloat16 x); one
    // GEMM writes x's dtype directly (the same single rounding, no cast).
    const DType dx_dtype = grads.size() == 1 ? x_dtype_ : DType::kFloat32;
    Tensor dx = needs_input_grad(0) ? empty(x_.shape(), {dx_dtype, dev}) : Tensor();
    bool dx_written = false;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const Tensor dy = grads[i].to(DType::kBFloat16).contiguous();
      const bool empty_problem = dy.numel() == 0 || x_.size(1) == 0;
      if (dx.defined() && !empty_problem) {  // dx (+)= dy W_i, in float32
        call_kernel<GemmKernel>("matmul_lt_gemm", dev, dx, dy, w_[i], 1.0, dx_written ? 1.0 : 0.0);
        dx_written = true;
      }
      if (needs_input_grad(i + 1)) {
        Tensor dw = empty(w_[i].shape(), f32);
        if (empty_problem) {
          dw.fill_(0.0);
        } else {
          TT_CHECK(call_kernel<MatmulLtWgradKernel>("matmul_lt_wgrad", dev, dw, dy, x_, Tensor(), 0.0),
                   name(), ": no GEMM algorithm for dy ", dy.describe(), ", x ", x_.describe());
        }
        out[i + 1] = dw;
      }
    }
    if (dx.defined()) {
      if (!dx_written) dx.fill_(0.0);
      out[0] = dx.to(x_dtype_);  // rounded once when several dgrads summed for a bfloat16 x
    }
    return out;
  }
  void release_saved() override {
    Function::release_saved();
    x_ = Tensor();
    w_.clear();
  }

  DType out_dtype_;
  DType x_dtype_ = DType::kFloat32;
  Tensor x_;               // bfloat16 x: no history, no reference cycle
  std::vector<Tensor> w_;  // bfloat16 W_i
};

// ----- GQA ----------------------------------------------------------------------------------

struct GqaFn : autograd::Function {
  std::string name() const override { return "GqaAttentionBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor q = in[0].contiguous(), k = in[1].contiguous(), v = in[2].contiguous();
    Tensor out = empty_like(q);
    // lse in the dtype of the softmax statistics: q's, float32 for bfloat16 (chapter 11).
    lse_ =
        empty({q.size(0), q.size(1), q.size(2)}, {flash_kernels(q.dtype()).lse_dtype, q.device()});
    call_kernel<GqaForwardKernel>("gqa_attention_forward", q.device(), out, lse_, q, k, v);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous(), in[2].contiguous(), out[0]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const auto& s = saved_tensors();
    Tensor dq = empty_like(s[0]), dk = empty_like(s[1]), dv = empty_like(s[2]);
    call_kernel<GqaBackwardKernel>("gqa_attention_backward", s[0].device(), dq, dk, dv,
                                   grads[0].contiguous(), s[0], s[1], s[2], s[3], lse_);
    return {dq, dk, dv};
  }
  void release_saved() override {
    Function::release_saved();
    lse_ = Tensor();
  }
  Tensor lse_;
};

void check_gqa(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  TT_CHECK(q.defined() && k.defined() && v.defined() && q.dim() == 4 && k.dim() == 4 &&
               k.shape() == v.shape() && k.size(1) > 0 && q.size(1) % k.size(1) == 0 &&
               q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3) &&
               q.dtype() == k.dtype() && q.dtype() == v.dtype() && q.device() == k.device() &&
               q.device() == v.device() && is_floating(q.dtype()),
           op,
           ": expected q [B, NH, T, hs] and k, v [B, NKV, T, hs] of one float dtype and "
           "device with NKV dividing NH, got q ",
           describe(q), ", k ", describe(k), ", v ", describe(v));
}

// ----- given CPU kernels: SwiGLU ------------------------------------------------------------

void check_swiglu(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& a = **ts.begin();
  for (const Tensor* t : ts) {
    TT_CHECK(t->defined() && t->shape() == a.shape() && t->dtype() == a.dtype() &&
                 t->device() == a.device() && t->is_contiguous(),
             op, ": expected contiguous tensors of one shape, dtype and device, got ", describe(a),
             " and ", describe(*t));
  }
}

// bfloat16 operands on the CPU: `kernel` on their exact float32 values, each output rounded
// once to nearest even (what the CUDA kernels do per element in float32 registers).
template <typename Kernel>
void through_float32(Kernel kernel, std::initializer_list<const Tensor*> outs,
                     std::initializer_list<const Tensor*> ins) {
  std::vector<Tensor> wide_out, wide_in;
  for (const Tensor* t : outs) wide_out.push_back(empty(t->shape()));
  for (const Tensor* t : ins) wide_in.push_back(t->to(DType::kFloat32));
  kernel(wide_out, wide_in);
  std::size_t i = 0;
  for (const Tensor* t : outs) t->copy_(wide_out[i++]);
}

void swiglu_forward_cpu(const Tensor& out, const Tensor& gate, const Tensor& up) {
  check_swiglu("swiglu_forward", {&out, &gate, &up});
  if (gate.dtype() == DType::kBFloat16) {
    through_float32([](const std::vector<Tensor>& o,
                       const std::vector<Tensor>& i) { swiglu_forward_cpu(o[0], i[0], i[1]); },
                    {&out}, {&gate, &up});
    return;
  }
  dispatch_floating(gate.dtype(), "swiglu_forward", [&]<typename T>() {
    const T* a = gate.data<T>();
    const T* b = up.data<T>();
    T* y = out.data<T>();
    const int64_t n = gate.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T s = T(1) / (T(1) + std::exp(-a[i]));
      y[i] = a[i] * s * b[i];
    }
  });
}

void swiglu_backward_cpu(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                         const Tensor& gate, const Tensor& up) {
  check_swiglu("swiglu_backward", {&dgate, &dup, &dout, &gate, &up});
  if (gate.dtype() == DType::kBFloat16) {
    through_float32(
        [](const std::vector<Tensor>& o, const std::vector<Tensor>& i) {
          swiglu_backward_cpu(o[0], o[1], i[0], i[1], i[2]);
        },
        {&dgate, &dup}, {&dout, &gate, &up});
    return;
  }
  dispatch_floating(gate.dtype(), "swiglu_backward", [&]<typename T>() {
    const T* a = gate.data<T>();
    const T* b = up.data<T>();
    const T* dy = dout.data<T>();
    T* da = dgate.data<T>();
    T* db = dup.data<T>();
    const int64_t n = gate.numel();
    for (int64_t i = 0; i < n; ++i) {
      const T s = T(1) / (T(1) + std::exp(-a[i]));
      da[i] = dy[i] * b[i] * s * (T(1) + a[i] * (T(1) - s));
      db[i] = dy[i] * a[i] * s;
    }
  });
}

}  // namespace

void cpu::rope_any(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
                   const Tensor& positions, bool inverse) {
  if (!x.defined() || x.dtype() != DType::kBFloat16) {
    cpu::rope(out, x, cos, sin, positions, inverse);
    return;
  }
  TT_CHECK(out.defined() && out.dtype() == DType::kBFloat16 && cos.defined() &&
               cos.dtype() == DType::kFloat32 && sin.defined() && sin.dtype() == DType::kFloat32,
           "rope_forward: bfloat16 x needs a bfloat16 out and float32 cos, sin tables, got x ",
           x.describe(), ", out ", describe(out), ", cos ", describe(cos), ", sin ", describe(sin));
  through_float32(
      [&](const std::vector<Tensor>& o, const std::vector<Tensor>& i) {
        cpu::rope(o[0], i[0], cos, sin, positions, inverse);  // checks the shapes
      },
      {&out}, {&x});
}

TT_REGISTER_KERNEL("rope_forward", DeviceType::kCPU, cpu::rope_any);
TT_REGISTER_KERNEL("swiglu_forward", DeviceType::kCPU, swiglu_forward_cpu);
TT_REGISTER_KERNEL("swiglu_backward", DeviceType::kCPU, swiglu_backward_cpu);

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  TT_CHECK(x.defined() && weight.defined() && x.dim() >= 1 && weight.dim() == 1 &&
               x.size(-1) == weight.size(0) && x.dtype() == weight.dtype() &&
               x.device() == weight.device() && is_floating(x.dtype()),
           "rms_norm: expected x [..., C] and weight [C] of one float dtype and device, got x ",
           describe(x), " and weight ", describe(weight));
  TT_CHECK(std::isfinite(eps) && eps >= 0, "rms_norm: eps must be finite and >= 0, got ", eps);
  return autograd::Function::apply<RmsNormFn>({x, weight}, eps)[0];
}

std::vector<double> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling,
                                  bool in_float32) {
  TT_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim must be even and positive, got ",
           head_dim);
  TT_CHECK(theta > 1 && std::isfinite(theta), "rope: theta must be finite and > 1, got ", theta);
  TT_CHECK(scaling.factor > 0, "rope: rope_scaling factor must be > 0, got ", scaling.factor);
  std::vector<double> inv(static_cast<std::size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    if (in_float32) {  // as transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim))
      const float e = static_cast<float>(2 * i) / static_cast<float>(head_dim);
      inv[i] = static_cast<double>(1.0f / std::pow(static_cast<float>(theta), e));
    } else {
      inv[i] = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(head_dim));
    }
  }
  if (scaling.type == "default") return inv;
  if (scaling.type == "linear") {
    for (double& f : inv) f /= scaling.factor;
    return inv;
  }
  TT_CHECK(scaling.type == "llama3", "rope: rope_scaling type '", scaling.type,
           "' is not one of default, linear, llama3");
  TT_CHECK(scaling.high_freq_factor > scaling.low_freq_factor,
           "rope: llama3 scaling needs high_freq_factor > low_freq_factor, got ",
           scaling.high_freq_factor, " and ", scaling.low_freq_factor);
  const double old_len = static_cast<double>(scaling.original_max_position_embeddings);
  const double low_wavelen = old_len / scaling.low_freq_factor;
  const double high_wavelen = old_len / scaling.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f /= scaling.factor;  // low frequencies: interpolated
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_len / wavelen - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      f = (1 - smooth) * f / scaling.factor + smooth * f;
    }  // high frequencies: unchanged
  }
  return inv;
}

RopeTables rope_tables(int64_t max_positions, int64_t head_dim, double theta,
                       const RopeScaling& scaling, TensorOptions options) {
  TT_CHECK(max_positions >= 0, "rope_tables: max_positions must be >= 0, got ", max_positions);
  TT_CHECK(options.dtype == DType::kFloat32 || options.dtype == DType::kFloat64,
           "rope_tables: dtype must be float32 or float64, got ", dtype_name(options.dtype));
  const bool f32 = options.dtype == DType::kFloat32;
  const std::vector<double> inv = rope_inv_freq(head_dim, theta, scaling, f32);
  const int64_t half = head_dim / 2;
  std::vector<double> c(static_cast<std::size_t>(max_positions * half)), s(c.size());
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      if (f32) {  // float32 angle and cos/sin, as transformers computes them
        const float a = static_cast<float>(p) * static_cast<float>(inv[i]);
        c[p * half + i] = std::cos(a);
        s[p * half + i] = std::sin(a);
      } else {
        const double a = static_cast<double>(p) * inv[i];
        c[p * half + i] = std::cos(a);
        s[p * half + i] = std::sin(a);
      }
    }
  }
  RopeTables t;
  t.cos = from_vector(c, {max_positions, half}).to(options.dtype).to(options.device);
  t.sin = from_vector(s, {max_positions, half}).to(options.dtype).to(options.device);
  return t;
}

Tensor rope(const Tensor& x, const RopeTables& tables, const Tensor& positions) {
  TT_CHECK(x.defined() && x.dim() == 4 && x.size(3) % 2 == 0 && x.stride(3) == 1 &&
               is_floating(x.dtype()),
           "rope: expected x [B, H, T, hs] of a float dtype with hs even and a unit stride "
           "along hs, got ",
           describe(x));
  const DType table_dtype = x.dtype() == DType::kBFloat16 ? DType::kFloat32 : x.dtype();
  TT_CHECK(tables.cos.defined() && tables.sin.defined() && tables.cos.dim() == 2 &&
               tables.cos.shape() == tables.sin.shape() && tables.cos.size(1) == x.size(3) / 2 &&
               tables.cos.dtype() == table_dtype && tables.sin.dtype() == table_dtype &&
               tables.cos.device() == x.device() && tables.sin.device() == x.device() &&
               tables.cos.is_contiguous() && tables.sin.is_contiguous(),
           "rope: expected contiguous cos and sin tables [P, ", x.size(3) / 2,
           "] of x's dtype (float32 for bfloat16 x) and device, got cos ", describe(tables.cos),
           " and sin ", describe(tables.sin), " for x ", x.describe());
  TT_CHECK(positions.defined() && positions.dtype() == DType::kInt64 && positions.dim() == 2 &&
               positions.size(0) == x.size(0) && positions.size(1) == x.size(2) &&
               positions.device() == x.device() && positions.is_contiguous(),
           "rope: expected contiguous int64 positions [B, T] = [", x.size(0), ", ", x.size(2),
           "] on ", x.device().str(), ", got ", describe(positions));
  if (positions.device().is_cpu()) {
    const auto* p = positions.data<int64_t>();
    for (int64_t i = 0; i < positions.numel(); ++i) {
      TT_CHECK(p[i] >= 0 && p[i] < tables.cos.size(0), "rope: position ", p[i], " at index ", i,
               " is outside the table of ", tables.cos.size(0), " positions");
    }
  }
  return autograd::Function::apply<RopeFn>({x, positions}, tables)[0];
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  TT_CHECK(gate.defined() && up.defined() && gate.shape() == up.shape() &&
               gate.dtype() == up.dtype() && gate.device() == up.device() &&
               is_floating(gate.dtype()),
           "swiglu: expected gate and up of one shape, float dtype and device, got gate ",
           describe(gate), " and up ", describe(up));
  return autograd::Function::apply<SwigluFn>({gate, up})[0];
}

std::vector<Tensor> linears_bf16(const Tensor& x, const std::vector<nn::Linear*>& layers,
                                 DType out_dtype) {
  TT_CHECK(x.defined() && x.dim() >= 1 &&
               (x.dtype() == DType::kFloat32 || x.dtype() == DType::kBFloat16),
           "linears_bf16: expected a float32 or bfloat16 input [..., in], got ", describe(x));
  TT_CHECK(out_dtype == DType::kFloat32 || out_dtype == DType::kBFloat16,
           "linears_bf16: out_dtype must be float32 or bfloat16, got ", dtype_name(out_dtype));
  TT_CHECK(!layers.empty(), "linears_bf16: no layers for input ", x.describe());
  const int64_t K = x.size(-1);
  std::vector<Tensor> in{reshape(contiguous(x), {x.numel() / std::max<int64_t>(K, 1), K})};
  for (nn::Linear* layer : layers) {
    TT_CHECK(layer != nullptr && layer->in_features == K && !layer->bias.defined() &&
                 layer->weight.dtype() == DType::kFloat32 && layer->weight.device() == x.device(),
             "linears_bf16: expected bias-free layers of in_features ", K,
             " with float32 weights on the input's device, got ",
             layer == nullptr ? std::string("a null layer") : layer->extra_repr(), " with weight ",
             layer == nullptr ? std::string("-") : describe(layer->weight), " for input ",
             x.describe());
    in.push_back(layer->weight);
  }
  std::vector<Tensor> ys = autograd::Function::apply<LinearsBf16Fn>(in, out_dtype);
  for (std::size_t i = 0; i < ys.size(); ++i) {
    Shape shape = x.shape();
    shape.back() = layers[i]->out_features;
    ys[i] = reshape(ys[i], shape);
  }
  return ys;
}

Tensor repeat_kv(const Tensor& k, int64_t g) {
  TT_CHECK(k.defined() && k.dim() == 4 && g >= 1,
           "repeat_kv: expected k [B, NKV, T, hs] and g >= 1, got k ", describe(k), " and g = ", g);
  if (g == 1) return k;
  const Shape s = k.shape();
  return reshape(expand(unsqueeze(k, 2), {s[0], s[1], g, s[2], s[3]}),
                 {s[0], s[1] * g, s[2], s[3]});
}

Tensor gqa_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_gqa("gqa_attention", q, k, v);
  const int64_t g = q.size(1) / k.size(1);
  if (!flash_attention_supports(q.device().type, q.size(3))) {
    return gqa_attention_naive(q, k, v);  // e.g. CUDA with a head size its kernels lack
  }
  if (g == 1) return flash_attention(q, k, v);
  if (KernelRegistry::instance().has("gqa_attention_forward", q.device().type)) {
    return autograd::Function::apply<GqaFn>({q, k, v})[0];
  }
  return flash_attention(q, repeat_kv(k, g), repeat_kv(v, g));
}

Tensor gqa_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_gqa("gqa_attention_naive", q, k, v);
  const int64_t g = q.size(1) / k.size(1);
  return causal_attention_naive(q, repeat_kv(k, g), repeat_kv(v, g));
}

}  // namespace tt
