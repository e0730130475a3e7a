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
#if TT_SOLUTION
    parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const T* xr = px + row * C;
        double ss = 0;
        for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
        const T rs = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(C) + eps));
        r[row] = rs;
        for (int64_t c = 0; c < C; ++c) y[row * C + c] = xr[c] * rs * w[c];
      }
    });
#else
    (void)px, (void)w, (void)y, (void)r, (void)rows, (void)eps;
    TT_TODO("ch15.1",
            "rms_norm_forward: per row of C values, rstd = 1 / sqrt(mean(x^2) + eps) (the "
            "sum of squares in double) stored in rstd[row], out = x * rstd * weight");
#endif
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
#if TT_SOLUTION
    // dx per row (in parallel); dweight as a column sum in row order (deterministic).
    parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const T* xr = px + row * C;
        const T* dyr = dy + row * C;
        double dot = 0;  // sum over c of (dy w)_c xhat_c
        for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(dyr[c]) * w[c] * xr[c] * r[row];
        const T m = static_cast<T>(dot / static_cast<double>(C));
        for (int64_t c = 0; c < C; ++c) {
          const T xhat = xr[c] * r[row];
          g[row * C + c] = r[row] * (dyr[c] * w[c] - xhat * m);
        }
      }
    });
    std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < C; ++c) {
        acc[c] += static_cast<double>(dy[row * C + c]) * px[row * C + c] * r[row];
      }
    }
    for (int64_t c = 0; c < C; ++c) dw[c] = static_cast<T>(acc[c]);
#else
    (void)px, (void)w, (void)dy, (void)r, (void)g, (void)dw, (void)rows;
    TT_TODO("ch15.1",
            "rms_norm_backward: with xhat = x * rstd and g = dout * weight, dx = rstd * (g - "
            "xhat * mean(g * xhat)) per row, dweight = sum over rows of dout * xhat (written, "
            "not accumulated; 0 for no rows)");
#endif
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
#if TT_SOLUTION
    const T_ sign = inverse ? T_(-1) : T_(1);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t t = 0; t < T; ++t) {
          const int64_t p = pos[b * T + t];
          TT_CHECK(p >= 0 && p < P, "rope_forward: position ", p, " of (b=", b, ", t=", t,
                   ") is outside the table of ", P, " positions");
          const T_* xr = px + b * sb + h * sh + t * st_;
          T_* yr = y + ((b * H + h) * T + t) * hs;
          for (int64_t i = 0; i < half; ++i) {
            const T_ c = ct[p * half + i], s = sign * st[p * half + i];
            const T_ x1 = xr[i], x2 = xr[i + half];
            yr[i] = x1 * c - x2 * s;
            yr[i + half] = x2 * c + x1 * s;
          }
        }
      }
    }
#else
    (void)px, (void)y, (void)ct, (void)st, (void)pos, (void)sb, (void)sh, (void)st_, (void)P,
        (void)inverse, (void)H;
    TT_TODO("ch15.2",
            "rope: for each (b, h, t) with p = positions[b, t] (checked < P) and i < hs/2, "
            "(y_i, y_{i+hs/2}) = (x_i cos - x_{i+hs/2} sin, x_{i+hs/2} cos + x_i sin) with "
            "cos[p, i], sin[p, i] (sin negated when inverse); x strided, out contiguous");
#endif
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
#if TT_SOLUTION
    parallel_for(0, B * NH, 1, [&](int64_t bh0, int64_t bh1) {
      for (int64_t bh = bh0; bh < bh1; ++bh) {
        const int64_t b = bh / NH, h = bh % NH;
        const int64_t kvh = b * NKV + kv_head_of(h, NH, NKV);
        flash_attention_forward_head<T_>(q.data<T_>() + bh * T * hs, k.data<T_>() + kvh * T * hs,
                                         v.data<T_>() + kvh * T * hs, out.data<T_>() + bh * T * hs,
                                         lse.data<T_>() + bh * T, T, hs, hs, hs);
      }
    });
#else
    (void)B, (void)NH, (void)NKV, (void)T, (void)hs;
    TT_TODO("ch15.3",
            "gqa_attention_forward: for each (b, h), flash_attention_forward_head on query head "
            "h and key/value head kv_head_of(h, NH, NKV) of batch b, read in place (no copy of "
            "K or V); out [B, NH, T, hs], lse [B, NH, T]");
#endif
  });
}

void gqa_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                            const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse) {
  check_gqa_kernel("gqa_attention_backward", {&q, &dq, &dout, &out}, {&k, &v, &dk, &dv}, lse);
  const int64_t B = q.size(0), NH = q.size(1), NKV = k.size(1), T = q.size(2), hs = q.size(3);
  dispatch_floating(q.dtype(), "gqa_attention_backward", [&]<typename T_>() {
#if TT_SOLUTION
    const int64_t group = NH / NKV;
    // One task per key/value head: its `group` query heads run one after the other into a
    // scratch head, added into dk and dv in a fixed order (no race, deterministic).
    parallel_for(0, B * NKV, 1, [&](int64_t j0, int64_t j1) {
      std::vector<T_> sk(static_cast<std::size_t>(T * hs)), sv(sk.size());
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t b = j / NKV, kvh = j % NKV;
        T_* dkj = dk.data<T_>() + j * T * hs;
        T_* dvj = dv.data<T_>() + j * T * hs;
        std::fill(dkj, dkj + T * hs, T_(0));
        std::fill(dvj, dvj + T * hs, T_(0));
        for (int64_t r = 0; r < group; ++r) {
          const int64_t bh = b * NH + kvh * group + r;
          flash_attention_backward_head<T_>(
              dq.data<T_>() + bh * T * hs, sk.data(), sv.data(), dout.data<T_>() + bh * T * hs,
              q.data<T_>() + bh * T * hs, k.data<T_>() + j * T * hs, v.data<T_>() + j * T * hs,
              out.data<T_>() + bh * T * hs, lse.data<T_>() + bh * T, T, hs, hs, hs);
          for (int64_t i = 0; i < T * hs; ++i) {
            dkj[i] += sk[i];
            dvj[i] += sv[i];
          }
        }
      }
    });
#else
    (void)B, (void)NH, (void)NKV, (void)T, (void)hs;
    TT_TODO("ch15.3",
            "gqa_attention_backward: flash_attention_backward_head per query head; dq written "
            "per head, dk and dv of a key/value head the sum over its NH / NKV query heads "
            "(scratch per head, added in a fixed order; no race)");
#endif
  });
}

}  // namespace tt::cpu

TT_REGISTER_KERNEL("rms_norm_forward", tt::DeviceType::kCPU, tt::cpu::rms_norm_forward);
TT_REGISTER_KERNEL("rms_norm_backward", tt::DeviceType::kCPU, tt::cpu::rms_norm_backward);
// "rope_forward" is registered by llama_ops.cc (cpu::rope_any: also bfloat16, through rope),
// "gqa_attention_forward" and "gqa_attention_backward" by gqa_cpu_kernels.cc, whose kernels
// also take bfloat16 (widened to float32 for these).
