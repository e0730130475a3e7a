// ============================================================================================
// YOUR EXERCISE FILE for chapter 15_llama. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch15
// Generated from solutions/15_llama/llama_kernels.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The CPU kernels of chapter 15 that are exercises: RMSNorm forward and backward (ch15.1),
// rotate-half RoPE (ch15.2), and grouped-query attention through chapter 10's per-head
// FlashAttention (ch15.3). Their front-ends and autograd Functions are in llama_ops.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/flash_attention.h"
#include "tt/llama_ops.h"
#include "tt/parallel.h"
#include "tt/todo.h"

namespace tt::cpu {

namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

/// Checks the tensors of an RMSNorm kernel (CPU, contiguous, x's dtype; rows x C) and returns C.
int64_t check_rms(const char* op, const Tensor& x, std::initializer_list<const Tensor*> rows_like,
                  std::initializer_list<const Tensor*> vectors, const Tensor& rstd) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.device().is_cpu() && x.is_contiguous(), op,
           ": x must be a contiguous CPU tensor [..., C], got ", describe(x));
  const int64_t C = x.size(-1);
  for (const Tensor* t : rows_like) {
    TT_CHECK(t->defined() && t->shape() == x.shape() && t->dtype() == x.dtype() &&
                 t->is_contiguous() && t->device().is_cpu(),
             op, ": expected a contiguous CPU tensor like x ", x.describe(), ", got ",
             describe(*t));
  }
  for (const Tensor* t : vectors) {
    TT_CHECK(t->defined() && t->dim() == 1 && t->size(0) == C && t->dtype() == x.dtype() &&
                 t->is_contiguous() && t->device().is_cpu(),
             op, ": expected a contiguous CPU vector [", C, "] of x's dtype, got ", describe(*t));
  }
  TT_CHECK(rstd.defined() && rstd.numel() * C == x.numel() && rstd.dtype() == x.dtype() &&
               rstd.is_contiguous() && rstd.device().is_cpu(),
           op, ": expected rstd with one value per row of x ", x.describe(), ", got ",
           describe(rstd));
  return C;
}

}  // namespace

void rms_norm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                      double eps) {
  const int64_t C = check_rms("rms_norm_forward", x, {&out}, {&weight}, rstd);
  const int64_t rows = C == 0 ? 0 : x.numel() / C;
  dispatch_floating(x.dtype(), "rms_norm_forward", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* w = weight.data<T>();
    T* y = out.data<T>();
    T* r = rstd.data<T>();
    (void)px, (void)w, (void)y, (void)r, (void)rows, (void)eps;
    TT_TODO("ch15.1",
            "rms_norm_forward: per row of C values, rstd = 1 / sqrt(mean(x^2) + eps) (the "
            "sum of squares in double) stored in rstd[row], out = x * rstd * weight");
  });
}

void rms_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd) {
  const int64_t C = check_rms("rms_norm_backward", x, {&dx, &dout}, {&weight, &dweight}, rstd);
  const int64_t rows = C == 0 ? 0 : x.numel() / C;
  dispatch_floating(x.dtype(), "rms_norm_backward", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* w = weight.data<T>();
    const T* dy = dout.data<T>();
    const T* r = rstd.data<T>();
    T* g = dx.data<T>();
    T* dw = dweight.data<T>();
    (void)px, (void)w, (void)dy, (void)r, (void)g, (void)dw, (void)rows;
    TT_TODO("ch15.1",
            "rms_norm_backward: with xhat = x * rstd and g = dout * weight, dx = rstd * (g - "
            "xhat * mean(g * xhat)) per row, dweight = sum over rows of dout * xhat (written, "
            "not accumulated; 0 for no rows)");
  });
}

void rope(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
          const Tensor& positions, bool inverse) {
  TT_CHECK(x.defined() && x.dim() == 4 && x.stride(3) == 1 && x.size(3) % 2 == 0 &&
               x.device().is_cpu() && out.defined() && out.shape() == x.shape() &&
               out.dtype() == x.dtype() && out.is_contiguous() && out.device().is_cpu(),
           "rope_forward: expected CPU x [B, H, T, hs] (hs even, unit stride along hs) and a "
           "contiguous out of its shape and dtype, got x ",
           describe(x), " and out ", describe(out));
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), hs = x.size(3), half = hs / 2;
  TT_CHECK(cos.defined() && cos.dim() == 2 && cos.size(1) == half && cos.dtype() == x.dtype() &&
               cos.is_contiguous() && sin.defined() && sin.shape() == cos.shape() &&
               sin.dtype() == x.dtype() && sin.is_contiguous() && positions.defined() &&
               positions.dtype() == DType::kInt64 && positions.dim() == 2 &&
               positions.size(0) == B && positions.size(1) == T && positions.is_contiguous(),
           "rope_forward: expected cos, sin [P, ", half, "] of x's dtype and positions int64 [", B,
           ", ", T, "], got cos ", describe(cos), ", sin ", describe(sin), ", positions ",
           describe(positions));
  const int64_t P = cos.size(0);
  dispatch_floating(x.dtype(), "rope_forward", [&]<typename T_>() {
    const T_* px = x.data<T_>();
    T_* y = out.data<T_>();
    const T_* ct = cos.data<T_>();
    const T_* st = sin.data<T_>();
    const int64_t* pos = positions.data<int64_t>();
    const int64_t sb = x.stride(0), sh = x.stride(1), st_ = x.stride(2);
    (void)px, (void)y, (void)ct, (void)st, (void)pos, (void)sb, (void)sh, (void)st_, (void)P,
        (void)inverse, (void)H;
    TT_TODO("ch15.2",
            "rope: for each (b, h, t) with p = positions[b, t] (checked < P) and i < hs/2, "
            "(y_i, y_{i+hs/2}) = (x_i cos - x_{i+hs/2} sin, x_{i+hs/2} cos + x_i sin) with "
            "cos[p, i], sin[p, i] (sin negated when inverse); x strided, out contiguous");
  });
}

namespace {

/// Checks the tensors of a GQA kernel: contiguous CPU tensors of q's dtype, q/out/dq/dout
/// [B, NH, T, hs], k/v/dk/dv [B, NKV, T, hs] with NKV dividing NH, lse [B, NH, T].
void check_gqa_kernel(const char* op, std::initializer_list<const Tensor*> q_like,
                      std::initializer_list<const Tensor*> kv_like, const Tensor& lse) {
  const Tensor& q = **q_like.begin();
  const Tensor& k = **kv_like.begin();
  TT_CHECK(q.defined() && q.dim() == 4 && k.defined() && k.dim() == 4 && k.size(1) > 0 &&
               q.size(1) % k.size(1) == 0 && q.size(0) == k.size(0) && q.size(2) == k.size(2) &&
               q.size(3) == k.size(3),
           op, ": expected q [B, NH, T, hs] and k [B, NKV, T, hs] with NKV dividing NH, got q ",
           describe(q), " and k ", describe(k));
  auto check = [&](const Tensor* t, const Tensor& like) {
    TT_CHECK(t->defined() && t->shape() == like.shape() && t->dtype() == q.dtype() &&
                 t->is_contiguous() && t->device().is_cpu(),
             op, ": expected a contiguous CPU tensor like ", like.describe(), ", got ",
             describe(*t));
  };
  for (const Tensor* t : q_like) check(t, q);
  for (const Tensor* t : kv_like) check(t, k);
  TT_CHECK(lse.defined() && lse.shape() == Shape({q.size(0), q.size(1), q.size(2)}) &&
               lse.dtype() == q.dtype() && lse.is_contiguous() && lse.device().is_cpu(),
           op, ": expected lse [B, NH, T] of q's dtype, got ", describe(lse));
}

}  // namespace

void gqa_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                           const Tensor& v) {
  check_gqa_kernel("gqa_attention_forward", {&q, &out}, {&k, &v}, lse);
  const int64_t B = q.size(0), NH = q.size(1), NKV = k.size(1), T = q.size(2), hs = q.size(3);
  dispatch_floating(q.dtype(), "gqa_attention_forward", [&]<typename T_>() {
    (void)B, (void)NH, (void)NKV, (void)T, (void)hs;
    TT_TODO("ch15.3",
            "gqa_attention_forward: for each (b, h), flash_attention_forward_head on query head "
            "h and key/value head kv_head_of(h, NH, NKV) of batch b, read in place (no copy of "
            "K or V); out [B, NH, T, hs], lse [B, NH, T]");
  });
}

void gqa_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                            const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse) {
  check_gqa_kernel("gqa_attention_backward", {&q, &dq, &dout, &out}, {&k, &v, &dk, &dv}, lse);
  const int64_t B = q.size(0), NH = q.size(1), NKV = k.size(1), T = q.size(2), hs = q.size(3);
  dispatch_floating(q.dtype(), "gqa_attention_backward", [&]<typename T_>() {
    (void)B, (void)NH, (void)NKV, (void)T, (void)hs;
    TT_TODO("ch15.3",
            "gqa_attention_backward: flash_attention_backward_head per query head; dq written "
            "per head, dk and dv of a key/value head the sum over its NH / NKV query heads "
            "(scratch per head, added in a fixed order; no race)");
  });
}

}  // namespace tt::cpu

TT_REGISTER_KERNEL("rms_norm_forward", tt::DeviceType::kCPU, tt::cpu::rms_norm_forward);
TT_REGISTER_KERNEL("rms_norm_backward", tt::DeviceType::kCPU, tt::cpu::rms_norm_backward);
// "rope_forward" is registered by llama_ops.cc (cpu::rope_any: also bfloat16, through rope),
// "gqa_attention_forward" and "gqa_attention_backward" by gqa_cpu_kernels.cc, whose kernels
// also take bfloat16 (widened to float32 for these).
