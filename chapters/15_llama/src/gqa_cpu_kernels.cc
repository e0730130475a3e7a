// The CPU "gqa_attention_*" kernels as registered (tt/llama_ops.h): exercise ch15.3's float
// kernels, and bfloat16 through them as chapter 11's CPU FlashAttention emulation does.
#include "tt/dispatcher.h"
#include "tt/flash_attention.h"
#include "tt/flash_attention_bf16.h"
#include "tt/llama_ops.h"

namespace tt::cpu {

void gqa_attention_forward_any(const Tensor& out, const Tensor& lse, const Tensor& q,
                               const Tensor& k, const Tensor& v) {
  if (q.dtype() != DType::kBFloat16) {
    gqa_attention_forward(out, lse, q, k, v);
    return;
  }
  TT_CHECK(out.defined() && out.dtype() == DType::kBFloat16 && k.dtype() == DType::kBFloat16 &&
               v.dtype() == DType::kBFloat16 && lse.defined() &&
               lse.dtype() == flash_kernels(DType::kBFloat16).lse_dtype,
           "gqa_attention_forward: bfloat16 q needs bfloat16 k, v and out and a float32 lse, got ",
           "q ", q.describe(), ", k ", k.describe(), ", v ", v.describe(), ", out ",
           out.defined() ? out.describe() : std::string("undefined"));
  // Chapter 11's emulation; gqa_attention_forward checks the shapes.
  emulate_bf16_attention_forward(gqa_attention_forward, out, lse, q, k, v);
}

void gqa_attention_backward_any(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                const Tensor& dout, const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& out, const Tensor& lse) {
  if (q.dtype() != DType::kBFloat16) {
    gqa_attention_backward(dq, dk, dv, dout, q, k, v, out, lse);
    return;
  }
  for (const Tensor* t : {&dq, &dk, &dv, &dout, &k, &v, &out}) {
    TT_CHECK(t->defined() && t->dtype() == DType::kBFloat16,
             "gqa_attention_backward: bfloat16 q needs every tensor but lse in bfloat16, got q ",
             q.describe(), " and ", t->defined() ? t->describe() : std::string("undefined"));
  }
  emulate_bf16_attention_backward(gqa_attention_backward, dq, dk, dv, dout, q, k, v, out, lse);
}

}  // namespace tt::cpu

TT_REGISTER_KERNEL("gqa_attention_forward", tt::DeviceType::kCPU,
                   tt::cpu::gqa_attention_forward_any);
TT_REGISTER_KERNEL("gqa_attention_backward", tt::DeviceType::kCPU,
                   tt::cpu::gqa_attention_backward_any);
