// Front-ends, the autograd Function and the CPU kernel glue of FlashAttention
// (tt/flash_attention.h). The per-head algorithms are the exercises ch10.2 and ch10.3
// (flash_attention_cpu.cc); the online softmax they use is ch10.1 (online_softmax.cc).
#include <cmath>
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
    lse_ = empty({q.size(0), q.size(1), q.size(2)}, {q.dtype(), q.device()});
    call_kernel<FlashAttentionForwardKernel>("flash_attention_forward", q.device(), out, lse_, q, k,
                                             v);
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
    call_kernel<FlashAttentionBackwardKernel>("flash_attention_backward", q.device(), dq, dk, dv,
                                              grads[0].contiguous(), q, s[1], s[2], s[3], lse_);
    return {dq, dk, dv};
  }
  void release_saved() override {
    Function::release_saved();
    lse_ = Tensor();
  }

  Tensor lse_;  // a plain tensor without history: no reference cycle
};

// The geometry of the CPU kernels' tensors: every one contiguous on the CPU with q's dtype, the
// [B, NH, T, hs] ones of q's shape and lse [B, NH, T].
struct HeadGeometry {
  int64_t heads = 0, n = 0, hs = 0;
};

HeadGeometry check_cpu_tensors(const char* op, std::initializer_list<const Tensor*> bhtd,
                               const Tensor& lse) {
  const Tensor& q = **bhtd.begin();
  for (const Tensor* t : bhtd) {
    TT_CHECK(t->defined() && t->device().is_cpu() && t->is_contiguous() &&
                 t->dtype() == q.dtype() && t->shape() == q.shape() && q.dim() == 4,
             "cpu::", op, ": expected contiguous CPU tensors [B, NH, T, hs] of one dtype, got ",
             q.describe(), " and ", t->describe());
  }
  const Shape rows{q.size(0), q.size(1), q.size(2)};
  TT_CHECK(lse.defined() && lse.device().is_cpu() && lse.is_contiguous() &&
               lse.dtype() == q.dtype() && lse.shape() == rows,
           "cpu::", op, ": lse must be a contiguous CPU tensor ", rows, " of q's dtype, got ",
           lse.describe());
  return {q.size(0) * q.size(1), q.size(2), q.size(3)};
}

}  // namespace

namespace cpu {

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v) {
  const HeadGeometry g = check_cpu_tensors("flash_attention_forward", {&q, &k, &v, &out}, lse);
  dispatch_floating(q.dtype(), "cpu::flash_attention_forward", [&]<typename T>() {
    const int64_t stride = g.n * g.hs;
    // One head per chunk: heads are independent, each written by one thread.
    parallel_for(0, g.heads, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        flash_attention_forward_head<T>(q.data<T>() + h * stride, k.data<T>() + h * stride,
                                        v.data<T>() + h * stride, out.data<T>() + h * stride,
                                        lse.data<T>() + h * g.n, g.n, g.hs);
      }
    });
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse) {
  const HeadGeometry g =
      check_cpu_tensors("flash_attention_backward", {&q, &k, &v, &out, &dout, &dq, &dk, &dv}, lse);
  dispatch_floating(q.dtype(), "cpu::flash_attention_backward", [&]<typename T>() {
    const int64_t stride = g.n * g.hs;
    parallel_for(0, g.heads, 1, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t o = h * stride;
        flash_attention_backward_head<T>(dq.data<T>() + o, dk.data<T>() + o, dv.data<T>() + o,
                                         dout.data<T>() + o, q.data<T>() + o, k.data<T>() + o,
                                         v.data<T>() + o, out.data<T>() + o,
                                         lse.data<T>() + h * g.n, g.n, g.hs);
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

Tensor causal_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_qkv("causal_attention_naive", q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor scores = mul(matmul(q, transpose(k, -2, -1)), scale);  // [B, NH, T, T]
  const Tensor att =
      softmax(masked_fill(scores, causal_mask(q.size(2), q.device()), -INFINITY), -1);
  return matmul(att, v);
}

}  // namespace tt
