// The host part of the bf16 FlashAttention (tt/flash_attention_bf16.h): the head sizes of its
// CUDA kernels (flash_attention_bf16.cu), and the CPU kernels, an emulation: bf16 in and out,
// chapter 10's fp32 CPU kernels in between (the reference path of CPU-only builds).
#include <string>

#include "tt/flash_attention_bf16.h"

namespace tt {

bool flash_attention_bf16_supports(int64_t hs) {
  return hs == 32 || hs == 64 || hs == 128;
}

namespace cpu {

namespace {

// Checks the tensors (bfloat16 on the CPU, then chapter 10's rules) for the op `op`.
void check_cpu_bf16(const char* op, std::initializer_list<const Tensor*> inputs,
                    std::initializer_list<const Tensor*> outputs, const Tensor& lse) {
  const Tensor& q = **inputs.begin();
  TT_CHECK(q.defined() && q.device().is_cpu() && q.dtype() == DType::kBFloat16, "cpu::", op,
           ": expected bfloat16 CPU tensors [B, NH, T, hs], got ",
           q.defined() ? q.describe() : std::string("(undefined)"));
  check_flash_tensors(op, inputs, outputs, lse);
}

}  // namespace

void emulate_bf16_attention_forward(FlashAttentionForwardKernel* forward, const Tensor& out,
                                    const Tensor& lse, const Tensor& q, const Tensor& k,
                                    const Tensor& v) {
  const Tensor out32 = empty(out.shape(), {DType::kFloat32});
  forward(out32, lse, q.to(DType::kFloat32), k.to(DType::kFloat32), v.to(DType::kFloat32));
  out.copy_(out32);  // rounds to bf16
}

void emulate_bf16_attention_backward(FlashAttentionBackwardKernel* backward, const Tensor& dq,
                                     const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                     const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& out, const Tensor& lse) {
  const TensorOptions f32{DType::kFloat32};
  const Tensor dq32 = empty(dq.shape(), f32), dk32 = empty(dk.shape(), f32);
  const Tensor dv32 = empty(dv.shape(), f32);
  auto up = [](const Tensor& t) { return t.to(DType::kFloat32); };
  backward(dq32, dk32, dv32, up(dout), up(q), up(k), up(v), up(out), lse);
  dq.copy_(dq32);  // each rounded to bf16 once
  dk.copy_(dk32);
  dv.copy_(dv32);
}

void flash_attention_bf16_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v) {
  check_cpu_bf16("flash_attention_bf16_forward", {&q, &k, &v}, {&out}, lse);
  emulate_bf16_attention_forward(flash_attention_forward, out, lse, q, k, v);
}

void flash_attention_bf16_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                   const Tensor& dout, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor& out, const Tensor& lse) {
  check_cpu_bf16("flash_attention_bf16_backward", {&q, &k, &v, &dq, &dk, &dv}, {&out, &dout}, lse);
  emulate_bf16_attention_backward(flash_attention_backward, dq, dk, dv, dout, q, k, v, out, lse);
}

TT_REGISTER_KERNEL("flash_attention_bf16_forward", DeviceType::kCPU,
                   cpu::flash_attention_bf16_forward);
TT_REGISTER_KERNEL("flash_attention_bf16_backward", DeviceType::kCPU,
                   cpu::flash_attention_bf16_backward);

}  // namespace cpu

}  // namespace tt
