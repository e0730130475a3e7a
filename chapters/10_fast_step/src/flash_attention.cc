// Front-ends, the autograd Function and the CPU kernel glue of FlashAttention
// (tt/flash_attention.h). The per-head algorithms are the exercises ch10.3 and ch10.4
// (flash_attention_cpu.cc); the online softmax they use is ch10.2 (online_softmax.cc).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/flash_attention.h"
#include "tt/functional.h"

namespace tt {

namespace {

// Checks that q, k, v (and any further tensor of the same role) are defined 4-D float tensors of
// one shape [B, NH, T, hs], one dtype and one device; `op` names the caller.
void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  TT_CHECK(q.defined() && k.defined() && v.defined(), op, ": q, k and v must be defined tensors");
  TT_CHECK(q.dim() == 4 && is_floating(q.dtype()), op,
           ": q must be a float32 or float64 tensor [B, NH, T, hs], got ", q.describe());
  TT_CHECK(k.shape() == q.shape() && v.shape() == q.shape() && k.dtype() == q.dtype() &&
               v.dtype() == q.dtype(),
           op, ": q, k and v must have one shape and dtype, got q ", q.describe(), ", k ",
           k.describe(), ", v ", v.describe());
  TT_CHECK(k.device() == q.device() && v.device() == q.device(), op,
           ": q, k and v must be on one device, got q ", q.describe(), ", k ", k.describe(), ", v ",
           v.describe());
  TT_CHECK(q.size(3) > 0, op, ": head size hs must be positive, got ", q.describe());
}

/// Causal FlashAttention; forward keeps O (an output) and the log-sum-exp L for backward.
struct FlashAttentionFn : autograd::Function {
  std::string name() const override { return "FlashAttentionBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor q = in[0].contiguous(), k = in[1].contiguous(), v = in[2].contiguous();
    Tensor out = empty(q.shape(), {q.dtype(), q.device()});
    const FlashKernels kernels = flash_kernels(q.dtype());
    lse_ = empty({q.size(0), q.size(1), q.size(2)}, {kernels.lse_dtype, q.device()});
    call_kernel<FlashAttentionForwardKernel>(kernels.forward, q.device(), out, lse_, q, k, v);
    return {out};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    save_for_backward({in[0].contiguous(), in[1].contiguous(), in[2].contiguous(), out[0]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const std::vector<Tensor>& s = saved_tensors();
    const Tensor& q = s[0];
    const TensorOptions opts{q.dtype(), q.device()};
    Tensor dq = empty(q.shape(), opts), dk = empty(q.shape(), opts), dv = empty(q.shape(), opts);
    call_kernel<FlashAttentionBackwardKernel>(flash_kernels(q.dtype()).backward, q.device(), dq, dk,
                                              dv, grads[0].contiguous(), q, s[1], s[2], s[3], lse_);
    return {dq, dk, dv};
  }
  void release_saved() override {
    Function::release_saved();
    lse_ = Tensor();
  }

  Tensor lse_;  // a plain tensor without history: no reference cycle
};

// Views of the heads of a [B, T, X] tensor (X = a multiple of C = NH * hs) whose channels
// [first, first + C) hold the heads: [B, NH, T, hs], strides (T X, hs, X, 1). No copy.
Tensor head_view(const Tensor& t, int64_t first, int64_t C, int64_t n_head) {
  const int64_t B = t.size(0), T = t.size(1), X = t.size(2), hs = C / n_head;
  const Tensor split = t.view({B, T, X / hs, hs});  // [B, T, heads of all parts, hs]
  return split.slice(2, first / hs, (first + C) / hs).permute({0, 2, 1, 3});
}

/// Causal FlashAttention of the packed qkv [B, T, 3C] -> y [B, T, C]: the kernels read q, k, v
/// and write y, dqkv through head_view()s. Forward keeps y and the log-sum-exp for backward.
struct FlashAttentionQkvFn : autograd::Function {
  explicit FlashAttentionQkvFn(int64_t n_head) : n_head_(n_head) {}
  std::string name() const override { return "FlashAttentionQkvBackward"; }

  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor qkv = in[0].contiguous();
    const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
    Tensor y = empty({B, T, C}, {qkv.dtype(), qkv.device()});
    const FlashKernels kernels = flash_kernels(qkv.dtype());
    lse_ = empty({B, n_head_, T}, {kernels.lse_dtype, qkv.device()});
    call_kernel<FlashAttentionForwardKernel>(
        kernels.forward, qkv.device(), head_view(y, 0, C, n_head_), lse_,
        head_view(qkv, 0, C, n_head_), head_view(qkv, C, C, n_head_),
        head_view(qkv, 2 * C, C, n_head_));
    return {y};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    save_for_backward({in[0].contiguous(), out[0]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grads) override {
    const Tensor& qkv = saved_tensors()[0];
    const Tensor& y = saved_tensors()[1];
    const int64_t C = y.size(2);
    const Tensor dy = grads[0].contiguous();
    Tensor dqkv = empty(qkv.shape(), {qkv.dtype(), qkv.device()});
    auto heads = [&](const Tensor& t, int64_t first) { return head_view(t, first, C, n_head_); };
    call_kernel<FlashAttentionBackwardKernel>(flash_kernels(qkv.dtype()).backward, qkv.device(),
                                              heads(dqkv, 0), heads(dqkv, C), heads(dqkv, 2 * C),
                                              heads(dy, 0), heads(qkv, 0), heads(qkv, C),
                                              heads(qkv, 2 * C), heads(y, 0), lse_);
    return {dqkv};
  }
  void release_saved() override {
    Function::release_saved();
    lse_ = Tensor();
  }

  int64_t n_head_;
  Tensor lse_;  // a plain tensor without history: no reference cycle
};

// Checks that the CPU kernels can take the tensors (on the CPU, float32 or float64) and returns
// their geometry.
FlashGeometry check_cpu_tensors(const char* op, std::initializer_list<const Tensor*> inputs,
                                std::initializer_list<const Tensor*> outputs, const Tensor& lse) {
  const FlashGeometry g = check_flash_tensors(op, inputs, outputs, lse);
  const Tensor& q = **inputs.begin();
  TT_CHECK(q.device().is_cpu(), "cpu::", op, ": expected CPU tensors, got ", q.describe());
  return g;
}

}  // namespace

FlashKernels flash_kernels(DType dtype) {
  if (dtype == DType::kBFloat16) {
    return {"flash_attention_bf16_forward", "flash_attention_bf16_backward", DType::kFloat32};
  }
  return {"flash_attention_forward", "flash_attention_backward", dtype};
}

FlashGeometry check_flash_tensors(const char* op, std::initializer_list<const Tensor*> inputs,
                                  std::initializer_list<const Tensor*> outputs, const Tensor& lse,
                                  std::initializer_list<const Tensor*> kv_inputs, FlashMask mask) {
  const Tensor& q = **inputs.begin();
  TT_CHECK(q.defined() && q.dim() == 4 && is_floating(q.dtype()), op,
           ": expected float tensors [B, NH, T, hs], got q ",
           q.defined() ? q.describe() : std::string("(undefined)"));
  // Every tensor of a group has the strides of the group's first one, and `shape`.
  auto layout_of = [&](std::initializer_list<const Tensor*> group, const Shape& shape,
                       const char* what) {
    const Tensor& first = **group.begin();
    for (const Tensor* t : group) {
      TT_CHECK(t->defined() && t->shape() == shape && t->dtype() == q.dtype() &&
                   t->device() == q.device(),
               op, ": expected the ", what, " of shape ", shape,
               " and q's dtype and device, got q ", q.describe(), " and ",
               t->defined() ? t->describe() : std::string("(undefined)"));
      TT_CHECK(t->strides() == first.strides() && (t->stride(3) == 1 || t->size(3) == 1), op,
               ": the ", what, " must share one set of strides with a unit stride along hs, got ",
               "strides ", t->strides(), " and ", first.strides());
    }
    return FlashLayout{first.stride(0), first.stride(1), first.stride(2), 1};
  };
  FlashGeometry g{q.size(0), q.size(1), q.size(2), q.size(3), {}, {}, {}, q.size(2), mask};
  g.qkv = layout_of(inputs, q.shape(), "inputs (q, k, v, dq, dk, dv)");
  g.out = layout_of(outputs, q.shape(), "outputs (out, dout)");
  g.kv = g.qkv;
  if (mask == FlashMask::kFull) {  // a rectangular block: k, v with Tk rows of their own
    TT_CHECK(kv_inputs.size() > 0, op, ": a full (non-causal) mask needs k, v as kv_inputs");
    const Tensor& k = **kv_inputs.begin();
    TT_CHECK(k.defined() && k.dim() == 4 && k.size(2) >= 1, op,
             ": expected k [B, NH, Tk, hs] with Tk >= 1 keys for q ", q.describe(), ", got k ",
             k.defined() ? k.describe() : std::string("(undefined)"));
    g.Tk = k.size(2);
    g.kv = layout_of(kv_inputs, Shape{g.B, g.NH, g.Tk, g.hs}, "k, v (and dk, dv)");
  } else if (kv_inputs.size() > 0) {  // grouped-query attention: k, v with NKV heads dividing NH
    const Tensor& k = **kv_inputs.begin();
    TT_CHECK(k.defined() && k.dim() == 4 && k.size(1) > 0 && g.NH % k.size(1) == 0, op,
             ": expected k [B, NKV, T, hs] with NKV dividing NH = ", g.NH, ", got q ", q.describe(),
             " and k ", k.defined() ? k.describe() : std::string("(undefined)"));
    g.kv = layout_of(kv_inputs, Shape{g.B, k.size(1), g.T, g.hs}, "k, v (and dk, dv)");
    g.kv.group = g.NH / k.size(1);
  }
  const Shape rows{g.B, g.NH, g.T};
  const DType lse_dtype = flash_kernels(q.dtype()).lse_dtype;
  TT_CHECK(lse.defined() && lse.device() == q.device() && lse.is_contiguous() &&
               lse.dtype() == lse_dtype && lse.shape() == rows,
           op, ": lse must be a contiguous ", dtype_name(lse_dtype), " tensor ", rows, " on ",
           q.device().str(), ", got ", lse.defined() ? lse.describe() : std::string("(undefined)"));
  return g;
}

FlashGeometry check_flash_cuda_tensors(
    const char* op, DType dtype, bool (*supports_hs)(int64_t), const char* head_sizes,
    std::initializer_list<const Tensor*> inputs, std::initializer_list<const Tensor*> outputs,
    const Tensor& lse, std::initializer_list<const Tensor*> kv_inputs, FlashMask mask) {
  const Tensor& q = **inputs.begin();
  TT_CHECK(q.defined() && q.device().is_cuda() && q.dtype() == dtype, "cuda::", op, ": expected ",
           dtype_name(dtype), " CUDA tensors [B, NH, T, hs], got ",
           q.defined() ? q.describe() : std::string("(undefined)"));
  const FlashGeometry g = check_flash_tensors(op, inputs, outputs, lse, kv_inputs, mask);
  for (const auto group : {inputs, outputs, kv_inputs}) {
    for (const Tensor* t : group) {
      TT_CHECK(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0, "cuda::", op,
               ": tensor data must be 16-byte aligned (take a clone()), got ", t->describe());
    }
  }
  const int64_t per16 = 16 / static_cast<int64_t>(dtype_size(dtype));  // elements in 16 bytes
  for (const FlashLayout& l : {g.qkv, g.out, g.kv}) {
    TT_CHECK(l.batch % per16 == 0 && l.head % per16 == 0 && l.row % per16 == 0, "cuda::", op,
             ": strides must be multiples of 16 bytes (", per16, " ", dtype_name(dtype),
             "), got batch ", l.batch, ", head ", l.head, ", row ", l.row, " for q ", q.describe());
  }
  // After the layout checks: a misaligned view reports its alignment whatever its head size.
  TT_CHECK(supports_hs(g.hs), "cuda::", op, ": head size hs must be ", head_sizes, " for ",
           dtype_name(dtype), " on CUDA, got hs = ", g.hs, " in q ", q.describe());
  TT_CHECK(g.B * g.NH <= 65535 && g.T <= (int64_t{1} << 24) && g.Tk <= (int64_t{1} << 24),
           "cuda::", op, ": at most 65535 heads (B * NH) and 2^24 positions, got q ", q.describe(),
           " with ", g.Tk, " keys");
  return g;
}

namespace cpu {

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v) {
  const FlashGeometry g = check_cpu_tensors("flash_attention_forward", {&q, &k, &v}, {&out}, lse);
  dispatch_floating(q.dtype(), "cpu::flash_attention_forward", [&]<typename T>() {
    // One head per chunk: heads are independent, each written by one thread.
    parallel_for(0, g.B * g.NH, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t i = g.qkv.offset(h, g.NH), o = g.out.offset(h, g.NH);
        flash_attention_forward_head<T>(q.data<T>() + i, k.data<T>() + i, v.data<T>() + i,
                                        out.data<T>() + o, lse.data<T>() + h * g.T, g.T, g.hs,
                                        g.qkv.row, g.out.row);
      }
    });
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse) {
  const FlashGeometry g = check_cpu_tensors("flash_attention_backward", {&q, &k, &v, &dq, &dk, &dv},
                                            {&out, &dout}, lse);
  dispatch_floating(q.dtype(), "cpu::flash_attention_backward", [&]<typename T>() {
    parallel_for(0, g.B * g.NH, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t i = g.qkv.offset(h, g.NH), o = g.out.offset(h, g.NH);
        flash_attention_backward_head<T>(dq.data<T>() + i, dk.data<T>() + i, dv.data<T>() + i,
                                         dout.data<T>() + o, q.data<T>() + i, k.data<T>() + i,
                                         v.data<T>() + i, out.data<T>() + o,
                                         lse.data<T>() + h * g.T, g.T, g.hs, g.qkv.row, g.out.row);
      }
    });
  });
}

TT_REGISTER_KERNEL("flash_attention_forward", DeviceType::kCPU, cpu::flash_attention_forward);
TT_REGISTER_KERNEL("flash_attention_backward", DeviceType::kCPU, cpu::flash_attention_backward);

}  // namespace cpu

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_qkv("flash_attention", q, k, v);
  return autograd::Function::apply<FlashAttentionFn>({q, k, v})[0];
}

Tensor flash_attention_qkv(const Tensor& qkv, int64_t n_head) {
  TT_CHECK(qkv.defined() && qkv.dim() == 3 && is_floating(qkv.dtype()) && n_head > 0 &&
               qkv.size(2) % (3 * n_head) == 0 && qkv.size(2) > 0,
           "flash_attention_qkv: qkv must be a float tensor [B, T, 3C] with C divisible by "
           "n_head = ",
           n_head, ", got ", qkv.defined() ? qkv.describe() : std::string("(undefined)"));
  return autograd::Function::apply<FlashAttentionQkvFn>({qkv}, n_head)[0];
}

Tensor causal_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_qkv("causal_attention_naive", q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor scores = mul(matmul(q, transpose(k, -2, -1)), scale);  // [B, NH, T, T]
  const Tensor att =
      softmax(masked_fill(scores, causal_mask(q.size(2), q.device()), -INFINITY), -1);
  return matmul(att, v);
}

bool flash_attention_supports(DeviceType device, int64_t hs) {
  if (device == DeviceType::kCUDA) return hs == 32 || hs == 64 || hs == 128;
  return hs >= 1;
}

}  // namespace tt
