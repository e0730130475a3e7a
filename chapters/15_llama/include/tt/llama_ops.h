/// @file llama_ops.h
/// @brief The operations a LLaMA-family block adds to GPT-2's (chapter 15): RMSNorm, rotary
/// position embeddings (RoPE, rotate-half convention of Hugging Face), SwiGLU, and causal
/// grouped-query attention (GQA) through chapter 10's FlashAttention.
///
/// Each op has the three layers of every op of this project: kernels registered per device
/// (CPU here and in solutions/15_llama, CUDA in llama_cuda.cu), an autograd Function whose
/// backward calls kernels, and a front-end that validates its inputs (tt::Error naming the op,
/// shapes, dtypes, devices).
///
/// | op | forward | backward |
/// |---|---|---|
/// | rms_norm | \f$ y = x \cdot r \cdot w,\ r = 1/\sqrt{\overline{x^2} + \epsilon} \f$ | \f$ dx = r\,(g - \hat x\, \overline{g \hat x}),\ g = dy \cdot w,\ \hat x = x r;\ dw = \sum_{rows} dy\, \hat x \f$ |
/// | rope | rotate pairs (i, i + hs/2) by angle \f$ p\, \theta^{-2i/hs} \f$ | rotate back (angle \f$ -p\,\theta^{-2i/hs} \f$) |
/// | swiglu | \f$ \mathrm{silu}(a) \cdot b = a\, \sigma(a)\, b \f$ | \f$ da = dy\, b\, \sigma(a)(1 + a(1 - \sigma(a))),\ db = dy\, \mathrm{silu}(a) \f$ |
/// | gqa_attention | causal softmax attention, query head h reads key/value head \f$ h / (NH / NKV) \f$ | dK, dV summed over the query heads of a group |
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tt/layers.h"
#include "tt/tensor.h"

namespace tt {

// ----- kernel signatures --------------------------------------------------------------------

/// "rms_norm_forward": out [rows, C] and rstd [rows] from x [rows, C] and weight [C]
/// (contiguous, one dtype: float32 or float64; bfloat16 on CUDA with float32 rstd).
using RmsNormForwardKernel = void(const Tensor& out, const Tensor& rstd, const Tensor& x,
                                  const Tensor& weight, double eps);
/// "rms_norm_backward": dx [rows, C] and dweight [C] (written, not accumulated) from dout, x,
/// weight and the forward's rstd.
using RmsNormBackwardKernel = void(const Tensor& dx, const Tensor& dweight, const Tensor& dout,
                                   const Tensor& x, const Tensor& weight, const Tensor& rstd);
/// "rope_forward": out [B, H, T, hs] (contiguous) = x [B, H, T, hs] (any strides with a unit
/// stride along hs) with the pairs (i, i + hs/2) of the row of batch b and time t rotated by the
/// angle whose cosine and sine are cos[p, i], sin[p, i] (tables [P, hs/2], x's dtype; float32
/// for bfloat16 x, on CUDA), p =
/// positions[b, t] (int64 [B, T], contiguous, 0 <= p < P); `inverse` rotates by the opposite
/// angle (the backward).
using RopeKernel = void(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
                        const Tensor& positions, bool inverse);
/// "swiglu_forward": out = silu(gate) * up (contiguous, same shape and dtype; bfloat16 computed
/// in float32 and rounded once per element, on CUDA and the CPU). On CUDA gate and up may also be 2-D [rows, F] views with a unit column
/// stride and one row stride: the two halves of a [rows, 2F] GEMM output, read in place.
using SwigluForwardKernel = void(const Tensor& out, const Tensor& gate, const Tensor& up);
/// "swiglu_backward": dgate, dup from dout, gate, up (bfloat16 as swiglu_forward: each result
/// computed in float32 from the widened inputs and rounded once).
using SwigluBackwardKernel = void(const Tensor& dgate, const Tensor& dup, const Tensor& dout,
                                  const Tensor& gate, const Tensor& up);
/// "gqa_attention_forward": out [B, NH, T, hs] and lse [B, NH, T] (flash_kernels(dtype).lse_dtype:
/// q's, float32 for bfloat16) from q [B, NH, T, hs] and k, v [B, NKV, T, hs] (all contiguous,
/// one dtype), NKV dividing NH: causal attention of query head h over key/value head
/// h / (NH / NKV), scale 1/sqrt(hs). On CUDA (float32, bfloat16) these are chapter 10's and 11's
/// FlashAttention kernels, which take grouped k, v.
using GqaForwardKernel = void(const Tensor& out, const Tensor& lse, const Tensor& q,
                              const Tensor& k, const Tensor& v);
/// "gqa_attention_backward": dq [B, NH, T, hs], dk, dv [B, NKV, T, hs] (written, dk and dv
/// summed over the NH / NKV query heads of each key/value head).
using GqaBackwardKernel = void(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                               const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& out, const Tensor& lse);

namespace cpu {
/// CPU "rms_norm_forward" (exercise ch15.1): per row, rstd = 1 / sqrt(mean(x^2) + eps) (sum in
/// double), out = x * rstd * weight.
void rms_norm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                      double eps);
/// CPU "rms_norm_backward" (exercise ch15.1): the formulas of the table in this file's comment.
void rms_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd);
/// CPU "rope_forward" (exercise ch15.2): float32 and float64, tables of x's dtype.
void rope(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
          const Tensor& positions, bool inverse);
/// The CPU kernel registered as "rope_forward": rope for float32 and float64; for bfloat16 x
/// and out (float32 tables, as on CUDA), rope on x's exact float32 values, out rounded to
/// bfloat16 once per element (what the CUDA kernel computes in float32 registers).
void rope_any(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
              const Tensor& positions, bool inverse);
/// CPU "gqa_attention_forward" (exercise ch15.3): chapter 10's flash_attention_forward_head on
/// every query head, reading its key/value head in place (no copy of K or V). Float32 and
/// float64; the registered kernel is gqa_attention_forward_any.
void gqa_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                           const Tensor& v);
/// CPU "gqa_attention_backward" (exercise ch15.3): chapter 10's flash_attention_backward_head
/// per query head, into a per-head scratch for dk, dv that is added into its key/value head.
/// Float32 and float64; the registered kernel is gqa_attention_backward_any.
void gqa_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                            const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse);
/// The CPU kernel registered as "gqa_attention_forward": gqa_attention_forward for float32 and
/// float64; bfloat16 q, k, v (lse float32) as chapter 11's CPU FlashAttention emulation does
/// (cpu::flash_attention_bf16_forward): gqa_attention_forward on their exact float32 values,
/// out rounded to bfloat16 once. What bf16 mixed-precision training runs on the CPU.
void gqa_attention_forward_any(const Tensor& out, const Tensor& lse, const Tensor& q,
                               const Tensor& k, const Tensor& v);
/// The CPU kernel registered as "gqa_attention_backward": gqa_attention_backward for float32
/// and float64; for bfloat16, on the float32 values, dq, dk, dv rounded to bfloat16 once.
void gqa_attention_backward_any(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                const Tensor& dout, const Tensor& q, const Tensor& k,
                                const Tensor& v, const Tensor& out, const Tensor& lse);
}  // namespace cpu

/// The key/value head read by query head `h` of `n_heads` when there are `n_kv_heads`
/// (which must divide n_heads): h / (n_heads / n_kv_heads). Multi-head attention is
/// n_kv_heads == n_heads, multi-query attention n_kv_heads == 1.
inline int64_t kv_head_of(int64_t h, int64_t n_heads, int64_t n_kv_heads) {
  return h / (n_heads / n_kv_heads);
}

// ----- front-ends (differentiable) ----------------------------------------------------------

/// RMSNorm over the last dim of x [..., C] with weight [C]: \f$ y = x / \sqrt{\mathrm{mean}(x^2)
/// + \epsilon} \cdot w \f$ (as Hugging Face's LlamaRMSNorm). Differentiable in x and weight.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);

/// How the inverse frequencies of RoPE are scaled for long contexts (Hugging Face's
/// config.json "rope_scaling"; type "default" is none).
struct RopeScaling {
  std::string type = "default";   ///< "default", "linear" or "llama3"
  double factor = 1.0;            ///< linear and llama3: the context extension factor
  double low_freq_factor = 1.0;   ///< llama3 only
  double high_freq_factor = 4.0;  ///< llama3 only
  int64_t original_max_position_embeddings = 8192;  ///< llama3 only
};

/// The inverse frequencies \f$ \theta^{-2i/hs} \f$, i < hs/2, computed in float32 as Hugging
/// Face does (or in double when `in_float32` is false), then scaled per `scaling`, returned as
/// doubles.
std::vector<double> rope_inv_freq(int64_t head_dim, double theta, const RopeScaling& scaling,
                                  bool in_float32 = true);

/// The cos and sin of RoPE's angles for positions [0, P): what rope() reads.
struct RopeTables {
  Tensor cos;  ///< [P, hs/2]
  Tensor sin;  ///< [P, hs/2]
};

/// The cos and sin tables [max_positions, head_dim/2] of RoPE in `options` (dtype float32 or
/// float64): angle(p, i) = p * inv_freq[i], computed in float32 for float32 tables (Hugging
/// Face's rounding) and in double for float64 ones. Throws for an odd head_dim.
RopeTables rope_tables(int64_t max_positions, int64_t head_dim, double theta,
                       const RopeScaling& scaling, TensorOptions options = {});

/// Rotary position embedding of x [B, H, T, hs] (a unit stride along hs is the only layout
/// requirement, so the [B, T, H, hs] output of a projection transposed to [B, H, T, hs] is
/// read in place) at positions [B, T] (int64, on x's device) with `tables` (x's dtype, float32
/// for bfloat16 x; x's device). Result contiguous [B, H, T, hs] of x's dtype; differentiable in
/// x. bfloat16 x (CPU and CUDA) is rotated in float32 and rounded once per element, forward and
/// backward (the gradient of a bfloat16 x is bfloat16).
Tensor rope(const Tensor& x, const RopeTables& tables, const Tensor& positions);

/// silu(gate) * up, elementwise (same shape): the gated activation of LLaMA's MLP.
/// Differentiable in both. bfloat16 gate and up give a bfloat16 result (and gradients), each
/// computed in float32 and rounded once per element.
Tensor swiglu(const Tensor& gate, const Tensor& up);

/// The projections x W_i^T of several bias-free linear layers reading one input, under the
/// bfloat16 mixed-precision policy of chapter 11's linear_bf16 (float32 master weights read as
/// their bfloat16 copies, bf16_weight(); bfloat16 GEMM operands, float32 accumulation): LLaMA's
/// q/k/v and gate/up projections. x [..., in] float32 or bfloat16 on the layers' device; returns
/// y_i [..., out_i] of `out_dtype` (bfloat16: rounded once; float32: the GEMM's float32 result,
/// not rounded, e.g. o_proj and down_proj writing the float32 residual stream).
///
/// Rounding: a float32 x is cast to bfloat16 ONCE for all the GEMMs (one cast where one
/// linear_bf16 per layer casts it per layer). Backward: each dy_i is rounded to bfloat16 (a
/// no-op for bfloat16 outputs), dW_i = dy_i^T x in float32 ("matmul_lt_wgrad"), and
/// dx = sum_i dy_i W_i accumulated in ONE float32 buffer by the GEMMs themselves
/// ("matmul_lt_gemm" with beta = 1 after the first): the dgrads are summed in float32 and never
/// rounded to bfloat16 on their own (dx is rounded once when x is bfloat16; with one layer the
/// GEMM writes dx in x's dtype directly, as linear_bf16's "matmul_lt_dgrad"). Throws tt::Error
/// naming the shapes, dtypes and devices when `layers` is empty, a layer has a bias or another
/// in_features, the weights are not float32 on x's device, x is not float32 or bfloat16, or
/// out_dtype is not float32 or bfloat16.
std::vector<Tensor> linears_bf16(const Tensor& x, const std::vector<nn::Linear*>& layers,
                                 DType out_dtype = DType::kBFloat16);

/// Causal grouped-query attention: q [B, NH, T, hs], k and v [B, NKV, T, hs] with NKV dividing
/// NH, scale 1/sqrt(hs). Result [B, NH, T, hs]; differentiable in q, k, v. NKV == NH is chapter
/// 10's flash_attention(). Otherwise the "gqa_attention_*" kernels of the device run when
/// registered: on the CPU exercise ch15.3's, on CUDA chapter 10's float32 and chapter 11's
/// bfloat16 FlashAttention kernels, which read the key/value head of each query head in place
/// (no copy of K or V to NH heads; non-contiguous k, v, e.g. slices of a KV cache, are made
/// contiguous first, at NKV heads). On a device without them K and V are expanded to NH heads (a
/// copy) and chapter 10's kernels run. A head size the device's FlashAttention kernels lack
/// (flash_attention_supports) runs gqa_attention_naive.
Tensor gqa_attention(const Tensor& q, const Tensor& k, const Tensor& v);

/// k [B, NKV, T, hs] -> [B, NKV * g, T, hs]: head j of the result is head j / g of k (a copy
/// for g > 1, k itself for g == 1; differentiable: the backward sums the g copies). What
/// gqa_attention does on a device without "gqa_attention_*" kernels.
Tensor repeat_kv(const Tensor& k, int64_t g);

/// The same function composed from chapter 04's ops (K and V repeated to NH heads, then
/// causal_attention_naive): the reference of the tests.
Tensor gqa_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace tt
