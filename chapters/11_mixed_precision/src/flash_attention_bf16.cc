// The host part of the bf16 FlashAttention (tt/flash_attention_bf16.h): the head sizes of its
// CUDA kernels (flash_attention_bf16.cu), the Hopper forward's setting, the full mode composed from tensor operations, and the
// CPU kernels, an emulation: bf16 in and out, fp32 in between (chapter 10's CPU kernels for the
// causal mode, full_attention_composed for the full one; the reference path of CPU-only builds).
#include <atomic>
#include <cmath>
#include <string>

#include "tt/autograd.h"
#include "tt/flash_attention_bf16.h"
#include "tt/functional.h"

namespace tt {

bool flash_attention_bf16_supports(int64_t hs) {
  return hs == 32 || hs == 64 || hs == 128;
}

namespace {
std::atomic<bool>& hopper_setting() {
  static std::atomic<bool> on{false};  // see set_flash_attention_bf16_hopper
  return on;
}
}  // namespace

void set_flash_attention_bf16_hopper(bool on) {
  hopper_setting().store(on);
}

bool flash_attention_bf16_hopper_enabled() {
  return hopper_setting().load();
}

FlashKernels flash_attention_bf16_full_kernels() {
  return {"flash_attention_bf16_full_forward", "flash_attention_bf16_full_backward",
          DType::kFloat32};
}

namespace {

double scale_of(const Tensor& q) {
  return 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

}  // namespace

std::array<Tensor, 2> full_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v) {
  autograd::NoGradGuard no_grad;
  const Tensor s = mul(matmul(q, transpose(k, 2, 3)), scale_of(q));  // [B, NH, m, n]
  const Tensor row_max = max(s, 3, /*keepdim=*/true);
  const Tensor e = exp(sub(s, row_max));
  const Tensor row_sum = sum(e, {3}, /*keepdim=*/true);
  return {div(matmul(e, v), row_sum), squeeze(add(row_max, log(row_sum)), 3)};
}

std::array<Tensor, 3> full_attention_composed_backward(const Tensor& dout, const Tensor& q,
                                                       const Tensor& k, const Tensor& v,
                                                       const Tensor& out, const Tensor& lse) {
  autograd::NoGradGuard no_grad;
  const double scale = scale_of(q);
  const Tensor s = mul(matmul(q, transpose(k, 2, 3)), scale);
  const Tensor p = exp(sub(s, unsqueeze(lse, 3)));              // P with the given lse
  const Tensor d = sum(mul(dout, out), {3}, /*keepdim=*/true);  // D_i = dO_i . O_i
  const Tensor dp = matmul(dout, transpose(v, 2, 3));
  const Tensor ds = mul(mul(p, sub(dp, d)), scale);
  return {matmul(ds, k), matmul(transpose(ds, 2, 3), q), matmul(transpose(p, 2, 3), dout)};
}

namespace cpu {

namespace {

// Checks the tensors (bfloat16 on the CPU, then chapter 10's rules, with k, v, dk, dv of their
// own rows as `kv_inputs` under FlashMask::kFull) for the op `op`.
void check_cpu_bf16(const char* op, std::initializer_list<const Tensor*> inputs,
                    std::initializer_list<const Tensor*> outputs, const Tensor& lse,
                    std::initializer_list<const Tensor*> kv_inputs = {},
                    FlashMask mask = FlashMask::kCausal) {
  const Tensor& q = **inputs.begin();
  TT_CHECK(q.defined() && q.device().is_cpu() && q.dtype() == DType::kBFloat16, "cpu::", op,
           ": expected bfloat16 CPU tensors [B, NH, T, hs], got ",
           q.defined() ? q.describe() : std::string("(undefined)"));
  check_flash_tensors(op, inputs, outputs, lse, kv_inputs, mask);
}

// The full mode in fp32 with the kernel signatures, for the emulations.
void full_forward_fp32(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v) {
  const std::array<Tensor, 2> r = full_attention_composed(q, k, v);
  out.copy_(r[0]);
  lse.copy_(r[1]);
}
void full_backward_fp32(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse) {
  const std::array<Tensor, 3> g = full_attention_composed_backward(dout, q, k, v, out, lse);
  dq.copy_(g[0]);
  dk.copy_(g[1]);
  dv.copy_(g[2]);
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

void flash_attention_bf16_full_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                       const Tensor& k, const Tensor& v) {
  check_cpu_bf16("flash_attention_bf16_full_forward", {&q}, {&out}, lse, {&k, &v},
                 FlashMask::kFull);
  if (q.numel() == 0) return;
  emulate_bf16_attention_forward(full_forward_fp32, out, lse, q, k, v);
}

void flash_attention_bf16_full_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                        const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& out, const Tensor& lse) {
  check_cpu_bf16("flash_attention_bf16_full_backward", {&q, &dq}, {&out, &dout}, lse,
                 {&k, &v, &dk, &dv}, FlashMask::kFull);
  emulate_bf16_attention_backward(full_backward_fp32, dq, dk, dv, dout, q, k, v, out, lse);
}

TT_REGISTER_KERNEL("flash_attention_bf16_forward", DeviceType::kCPU,
                   cpu::flash_attention_bf16_forward);
TT_REGISTER_KERNEL("flash_attention_bf16_backward", DeviceType::kCPU,
                   cpu::flash_attention_bf16_backward);
TT_REGISTER_KERNEL("flash_attention_bf16_full_forward", DeviceType::kCPU,
                   cpu::flash_attention_bf16_full_forward);
TT_REGISTER_KERNEL("flash_attention_bf16_full_backward", DeviceType::kCPU,
                   cpu::flash_attention_bf16_full_backward);

}  // namespace cpu

}  // namespace tt
