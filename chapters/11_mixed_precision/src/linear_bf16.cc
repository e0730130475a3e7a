// bfloat16 linear layers (tt/linear_bf16.h): the front-ends and their autograd Function, the
// CPU emulation of cuBLASLt (cpu::run_lt) and the CPU kernels "matmul_lt_forward",
// "matmul_lt_wgrad" and "matmul_lt_dgrad" built on it. The descriptor of the input-gradient
// GEMM is exercise ch11.2 (linear_bf16_gemm.cc); the CUDA "matmul_lt_dgrad" is in
// linear_bf16_cuda.cc, the other two CUDA kernels are chapter 10's.
#include "tt/linear_bf16.h"

#include <string>
#include <utility>
#include <vector>

#include "tt/autograd.h"
#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"
#include "tt/functional.h"
#include "tt/fused_ops.h"
#include "tt/master_weights.h"
#include "tt/parallel.h"

namespace tt {

namespace {

constexpr DType kBf16 = DType::kBFloat16;

// ----- the CPU emulation of cuBLASLt -----------------------------------------------------------

float load(const void* p, DType t, int64_t i) {
  return t == kBf16 ? bfloat16_to_float(static_cast<const bfloat16*>(p)[i])
                    : static_cast<const float*>(p)[i];
}

void store(void* p, DType t, int64_t i, float v) {
  if (t == kBf16) {
    static_cast<bfloat16*>(p)[i] = float_to_bfloat16_rne(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

// op(M) of a column-major matrix stored with leading dimension ld, as a row-major float tensor
// [rows, cols] (rows of op(A) for A; columns of op(B), i.e. op(B)^T, for B), widened exactly.
Tensor widen(const void* p, DType t, bool trans, int64_t rows, int64_t cols, int64_t ld) {
  Tensor out = empty({rows, cols});
  float* o = out.data<float>();
  parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        o[r * cols + c] = load(p, t, trans ? c + r * ld : r + c * ld);
    }
  });
  return out;
}

// ----- the autograd Function -------------------------------------------------------------------

// Inputs {x [M, K] (float32 or bfloat16), w [N, K] float32} or {x, w, b [N] float32}; output
// y [M, N] bfloat16 (gelu of it with gelu_). Keeps the bfloat16 x (or what the pack hook makes
// of it) and W for backward.
struct LinearBf16Fn : autograd::Function {
  explicit LinearBf16Fn(bool gelu) : gelu_(gelu) {}
  std::string name() const override {
    return gelu_ ? "LinearGeluBf16Backward" : "LinearBf16Backward";
  }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    x_dtype_ = x.dtype();
    hooks_ = ScopedLinearHooks::current();
    x_ = x.to(kBf16).contiguous();  // no copy when x is already contiguous bfloat16
    x_shape_ = x_.shape();
    // The optimizer's bfloat16 copies of the masters (tt/master_weights.h), or casts of them.
    w_ = bf16_weight(in[1]);
    const Tensor b = in.size() > 2 ? bf16_weight(in[2]) : Tensor();
    const Device dev = x.device();
    Tensor y = empty({x.size(0), w_.size(0)}, {kBf16, dev});
    if (gelu_) pre_ = empty(y.shape(), {kBf16, dev});
    y = run_forward(y, b);
    if (hooks_.pack) x_ = hooks_.pack(x_);  // after the GEMM, which needed the whole x
    return {y};
  }
  // The forward GEMM(s) of x_ and w_ into y (and pre_); returns the output.
  Tensor run_forward(const Tensor& y, const Tensor& b) {
    const Device dev = y.device();
    if (y.numel() == 0) return y;  // no rows (or no outputs): nothing to compute
    if (call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", dev, y, x_, w_, b, pre_)) return y;
    // cuBLASLt's GELU epilogue needs out % 8 == 0: the bias epilogue into pre, then GELU.
    TT_CHECK(gelu_ && call_kernel<MatmulLtForwardKernel>("matmul_lt_forward", dev, pre_, x_, w_, b,
                                                         Tensor()),
             name(), ": no GEMM algorithm for x ", x_.describe(), ", W ", w_.describe());
    Tensor g = empty(y.shape(), {DType::kFloat32, dev});
    call_kernel<UnaryForwardKernel>("gelu_forward", dev, g, pre_.to(DType::kFloat32));
    return g.to(kBf16);
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    has_bias_ = in.size() > 2;
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    TT_CHECK(x_.defined() && w_.defined(), name(), ": the saved tensors were released");
    const Device dev = x_.device();
    Tensor dh = grads[0].to(kBf16).contiguous();
    if (gelu_) {  // dh = dy gelu'(pre) in float32, rounded to bfloat16
      Tensor g = empty(dh.shape(), {kBf16, dev});
      call_kernel<GeluBackwardBf16Kernel>("gelu_backward_bf16", dev, g, dh, pre_);
      dh = g;
    }
    const bool empty_problem = dh.numel() == 0;  // no rows: zero gradients
    std::vector<Tensor> out(has_bias_ ? 3 : 2);
    if (needs_input_grad(0)) {
      Tensor dx = empty(x_shape_, {kBf16, dev});
      if (empty_problem) {
        dx.fill_(0.0);
      } else {
        TT_CHECK(call_kernel<MatmulLtDgradKernel>("matmul_lt_dgrad", dev, dx, dh, w_), name(),
                 ": no GEMM algorithm for dy ", dh.describe(), ", W ", w_.describe());
      }
      out[0] = dx.to(x_dtype_);
      if (hooks_.dgrad) hooks_.dgrad(out[0]);  // before the dW GEMM: its work may overlap it
    }
    if (hooks_.unpack) {  // x back for the dW GEMM, after dx (whose GEMM did not need it)
      x_ = hooks_.unpack(x_).to(kBf16).contiguous();
      TT_CHECK(x_.shape() == x_shape_, name(), ": the unpack hook gave ", x_.describe(),
               " for the saved input ", x_shape_);
    }
    const bool need_db = has_bias_ && needs_input_grad(2);
    if (needs_input_grad(1) || need_db) {
      const TensorOptions f32{DType::kFloat32, dev};
      // Gradient-accumulation fusion: with W's float32 .grad as the target, the GEMM adds into
      // it (beta = 1) and W gets no separate gradient (tt/autograd.h, accumulation_target).
      // Declined (false, nothing written) when the GEMM would not run in one pass: then a new dW.
      const Tensor target = empty_problem ? Tensor() : accumulation_target(1);
      Tensor db = need_db ? empty({w_.size(0)}, f32) : Tensor();
      const bool fused = target.defined() && call_kernel<MatmulLtWgradKernel>(
                                                 "matmul_lt_wgrad", dev, target, dh, x_, db, 1.0);
      Tensor dw = fused ? Tensor() : empty(w_.shape(), f32);
      if (empty_problem) {
        dw.fill_(0.0);
        if (need_db) db.fill_(0.0);
      } else if (!fused) {
        TT_CHECK(call_kernel<MatmulLtWgradKernel>("matmul_lt_wgrad", dev, dw, dh, x_, db, 0.0),
                 name(), ": no GEMM algorithm for dy ", dh.describe(), ", x ", x_.describe());
      }
      out[1] = dw;
      if (need_db) out[2] = db;
    }
    return out;
  }
  void release_saved() override {
    Function::release_saved();
    x_ = w_ = pre_ = Tensor();
    hooks_ = LinearHooks{};
  }

  bool gelu_;
  LinearHooks hooks_;  // the hooks installed when forward ran (ScopedLinearHooks)
  bool has_bias_ = false;
  DType x_dtype_ = DType::kFloat32;
  Shape x_shape_;       // x's shape [M, K] (x_ may be packed)
  Tensor x_, w_, pre_;  // bfloat16 x (or its pack), W and pre-activation: no history, no cycle
};

Tensor linear_bf16_impl(const char* op, const Tensor& x, nn::Linear& layer, bool gelu) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == layer.in_features &&
               (x.dtype() == DType::kFloat32 || x.dtype() == kBf16),
           op, ": expected a float32 or bfloat16 input [..., ", layer.in_features, "], got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TT_CHECK(layer.weight.dtype() == DType::kFloat32 &&
               (!layer.bias.defined() || layer.bias.dtype() == DType::kFloat32) &&
               x.device() == layer.weight.device(),
           op, ": expects float32 parameters (the master weights) on the input's device, got ",
           "input ", x.describe(), ", weight ", layer.weight.describe());
  TT_CHECK(!gelu || layer.bias.defined(), op, ": the layer must have a bias (", layer.extra_repr(),
           ")");
  return apply_linear_function<LinearBf16Fn>(x, layer, gelu);
}

}  // namespace

namespace {
thread_local LinearHooks current_linear_hooks;
}  // namespace

ScopedLinearHooks::ScopedLinearHooks(LinearHooks hooks) : previous_(current_linear_hooks) {
  TT_CHECK(static_cast<bool>(hooks.pack) == static_cast<bool>(hooks.unpack),
           "ScopedLinearHooks: pack and unpack come together (got only ",
           hooks.pack ? "pack" : "unpack", ")");
  current_linear_hooks = std::move(hooks);
}

ScopedLinearHooks::~ScopedLinearHooks() {
  current_linear_hooks = std::move(previous_);
}

const LinearHooks& ScopedLinearHooks::current() {
  return current_linear_hooks;
}

Tensor linear_bf16(const Tensor& x, nn::Linear& layer) {
  return linear_bf16_impl("linear_bf16", x, layer, false);
}

Tensor linear_gelu_bf16(const Tensor& x, nn::Linear& layer) {
  return linear_bf16_impl("linear_gelu_bf16", x, layer, true);
}

LtGemm checked_lt_linear_dgrad_gemm(const char* op, const Tensor& dx, const Tensor& dy,
                                    const Tensor& w) {
  // dx [M, K] and w [N, K] are a linear layer's x and W, dy [M, N] its y.
  check_lt_operands(op, dx, w, dy, Tensor(), Tensor());
  TT_CHECK(dy.dtype() == w.dtype(), op, ": dy and w must share a dtype, got dy ", dy.describe(),
           ", w ", w.describe());
  return lt_linear_dgrad_gemm(dx, dy, w);
}

void check_gelu_backward_bf16(const char* op, const Tensor& dx, const Tensor& dy,
                              const Tensor& pre) {
  TT_CHECK(dx.defined() && dy.defined() && pre.defined(), op, ": undefined operand");
  const bool ok = dx.dtype() == kBf16 && dy.dtype() == kBf16 && pre.dtype() == kBf16 &&
                  dx.shape() == dy.shape() && dx.shape() == pre.shape() && dx.is_contiguous() &&
                  dy.is_contiguous() && pre.is_contiguous() && dx.device() == dy.device() &&
                  dx.device() == pre.device();
  TT_CHECK(ok, op,
           ": expected contiguous bfloat16 dx, dy and pre of one shape on one device, got dx ",
           dx.describe(), ", dy ", dy.describe(), ", pre ", pre.describe());
}

namespace cpu {

void gelu_backward_bf16(const Tensor& dx, const Tensor& dy, const Tensor& pre) {
  check_gelu_backward_bf16("cpu::gelu_backward_bf16", dx, dy, pre);
  Tensor g = empty(dx.shape());
  call_kernel<UnaryBackwardKernel>("gelu_backward", Device::cpu(), g, dy.to(DType::kFloat32),
                                   pre.to(DType::kFloat32));
  dx.copy_(g);  // rounded to nearest even
}

bool run_lt(const LtGemm& g) {
  if (g.m == 0 || g.n == 0 || g.k == 0) return false;
  if (g.aux != nullptr && g.ldd % 8 != 0) return false;                 // as cuBLASLt
  const Tensor a = widen(g.a, g.ab_type, g.trans_a, g.m, g.k, g.lda);   // op(A) [m, k]
  const Tensor b = widen(g.b, g.ab_type, !g.trans_b, g.n, g.k, g.ldb);  // op(B)^T [n, k]
  const bool bias = g.epilogue == LtEpilogue::kBias || g.epilogue == LtEpilogue::kGeluAuxBias;
  // h [n, m] = D^T before rounding: D[i, j] is h[j, i].
  Tensor h = empty({g.n, g.m});
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* ph = h.data<float>();
  parallel_for(0, g.n, 4, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      for (int64_t i = 0; i < g.m; ++i) {
        float acc = 0.0f;
        for (int64_t l = 0; l < g.k; ++l) acc += pa[i * g.k + l] * pb[j * g.k + l];
        if (g.beta != 0.0f) acc += g.beta * load(g.d, g.d_type, i + j * g.ldd);
        if (bias) acc += load(g.bias, g.d_type, i);
        ph[j * g.m + i] = acc;
      }
    }
  });
  if (g.epilogue == LtEpilogue::kGeluAuxBias) {
    for (int64_t j = 0; j < g.n; ++j) {
      for (int64_t i = 0; i < g.m; ++i) store(g.aux, g.d_type, i + j * g.ldd, ph[j * g.m + i]);
    }
    Tensor y = empty(h.shape());
    call_kernel<UnaryForwardKernel>("gelu_forward", Device::cpu(), y, h);
    h = y;
    ph = h.data<float>();
  }
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) store(g.d, g.d_type, i + j * g.ldd, ph[j * g.m + i]);
  }
  if (g.epilogue == LtEpilogue::kBGradB) {  // the sums of op(B) over k, per column j
    for (int64_t j = 0; j < g.n; ++j) {
      float acc = 0.0f;
      for (int64_t l = 0; l < g.k; ++l) acc += pb[j * g.k + l];
      store(g.bias, g.d_type, j, acc);
    }
  }
  return true;
}

bool matmul_lt_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Tensor& pre) {
  TT_CHECK(x.device().is_cpu(), "cpu::matmul_lt_forward: expected CPU tensors, got ", x.describe());
  return run_lt(lt_linear_forward_gemm(y, x, w, b, pre));
}

bool matmul_lt_wgrad(const Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& db,
                     double beta) {
  TT_CHECK(x.device().is_cpu(), "cpu::matmul_lt_wgrad: expected CPU tensors, got ", x.describe());
  return run_lt(lt_linear_wgrad_gemm(dw, dy, x, db, beta));
}

bool matmul_lt_dgrad(const Tensor& dx, const Tensor& dy, const Tensor& w) {
  TT_CHECK(dx.device().is_cpu(), "cpu::matmul_lt_dgrad: expected CPU tensors, got ", dx.describe());
  return run_lt(checked_lt_linear_dgrad_gemm("cpu::matmul_lt_dgrad", dx, dy, w));
}

}  // namespace cpu

TT_REGISTER_KERNEL("matmul_lt_forward", DeviceType::kCPU, cpu::matmul_lt_forward);
TT_REGISTER_KERNEL("matmul_lt_wgrad", DeviceType::kCPU, cpu::matmul_lt_wgrad);
TT_REGISTER_KERNEL("matmul_lt_dgrad", DeviceType::kCPU, cpu::matmul_lt_dgrad);
TT_REGISTER_KERNEL("gelu_backward_bf16", DeviceType::kCPU, cpu::gelu_backward_bf16);

}  // namespace tt
