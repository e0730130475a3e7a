/// @file flash_attention_bf16.h
/// @brief Causal FlashAttention in bf16 on tensor cores (chapter 11): chapter 10's FlashAttention
/// (tt/flash_attention.h) with bf16 q, k, v, out and gradients, mma.sync m16n8k16 bf16 products
/// accumulated in fp32, and the softmax statistics in fp32.
///
/// The kernels are registered as "flash_attention_bf16_forward" and
/// "flash_attention_bf16_backward" with chapter 10's signatures (FlashAttentionForwardKernel,
/// FlashAttentionBackwardKernel) and strided views (FlashGeometry), so the packed qkv [B, T, 3C]
/// of GPT-2 is read and dqkv written in place, as in chapter 10. Chapter 10's front-ends
/// (flash_attention(), flash_attention_qkv()) send bfloat16 tensors to them; there the
/// log-sum-exp is float32 (flash_lse_dtype()).
///
/// Precision: q, k, v, dout are bf16 (8 significant bits, relative rounding error up to
/// \f$ 2^{-9} \f$); S = Q K^T, dP = dO V^T and the four other products accumulate in fp32; the
/// online softmax (running max and sum), lse and \f$ D_i = \sum_c dO_{ic} O_{ic} \f$ are fp32;
/// P and dS are rounded to bf16 only as operands of P V, P^T dO, dS K and dS^T Q; O, dQ, dK, dV
/// are accumulated in fp32 registers and rounded to bf16 once. The backward computes dK, dV per
/// 64-key tile and dQ per 64-query tile in two kernels (no atomics): results are deterministic.
/// Key tiles above the diagonal are skipped.
///
/// A second mode, the full (non-causal) rectangular block, is registered as
/// "flash_attention_bf16_full_forward" and "flash_attention_bf16_full_backward" (same
/// signatures): q [B, NH, m, hs] against k, v [B, NH, n, hs] with any m, n >= 1, every query
/// seeing every key (FlashMask::kFull). These are the blocks of chapter 16's ring attention that
/// lie off the diagonal. The same kernels run it, with the causal mask and the diagonal's loop
/// bounds replaced (a template flag, so the causal code is unchanged): every key tile is visited,
/// the zero rows of the last key tile past n are masked, query rows past m are not written.
#pragma once

#include <array>
#include <cstdint>

#include "tt/flash_attention.h"

namespace tt {

/// Whether the CUDA bf16 FlashAttention kernels take head size `hs`: 32, 64 or 128 (the
/// register fragments of the warp's 16 rows are sized by hs; at 128 the backward kernels are
/// compiled for 2 blocks per multiprocessor, 255 registers, and the tiles take 104 KB of shared
/// memory, which GPUs with less than that per block refuse with a tt::Error).
bool flash_attention_bf16_supports(int64_t hs);

/// Whether the CUDA kernels (forward and backward, causal and full mode) run as the Hopper
/// kernels on devices of compute capability 9.0 (H100, H200): warpgroup MMA (wgmma, sm_90a) with
/// the tiles in shared memory read by the tensor cores through matrix descriptors, 64 rows per
/// warpgroup, the same algorithm and the same no-atomics backward; other GPUs always run the
/// portable mma.sync kernels. Off by default: on an H200 they are not faster yet (B8, T = 4096:
/// forward 0.85 ms against the portable 0.86 at hs 64, 0.87 against 0.79 at hs 128; backward 10%
/// slower at hs 64, 10% faster at hs 128; chapter 11's README). Both compute the same attention
/// within the bf16 tolerances (their fp32 sums are ordered differently); each is deterministic.
/// The tests run both; `bench_attention` compares them (`cuda_bf16_sm90a` rows beside `cuda_bf16`).
void set_flash_attention_bf16_hopper(bool on);
/// The setting of set_flash_attention_bf16_hopper.
bool flash_attention_bf16_hopper_enabled();

/// The names of the bf16 kernels of the full (non-causal, rectangular) mode:
/// "flash_attention_bf16_full_forward" / "flash_attention_bf16_full_backward", lse float32.
FlashKernels flash_attention_bf16_full_kernels();

/// Full (non-causal) attention of q [B, NH, m, hs] with k, v [B, NH, n, hs] composed from
/// tensor operations (float32 or float64, any device; materializes the [m, n] scores):
/// {out, lse} with \f$ L_i = \log \sum_j e^{S_{ij}} \f$, \f$ S = Q K^T / \sqrt{hs} \f$, and
/// \f$ O = e^{S - L} V \f$. No autograd history. The reference of the full mode (its CPU
/// kernels) and chapter 16's fully visible blocks in float32 and float64.
std::array<Tensor, 2> full_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v);

/// The gradients {dq, dk, dv} of full_attention_composed's attention given the gradient `dout`
/// of `out` [B, NH, m, hs] and the log-sum-exp `lse` [B, NH, m] to use (which may cover more
/// keys than k, e.g. a ring's final one): \f$ P = e^{S - L} \f$, \f$ D_i = \sum_c dO_{ic}
/// O_{ic} \f$, dV = P^T dO, dS = P (dO V^T - D) / sqrt(hs), dQ = dS K, dK = dS^T Q.
std::array<Tensor, 3> full_attention_composed_backward(const Tensor& dout, const Tensor& q,
                                                       const Tensor& k, const Tensor& v,
                                                       const Tensor& out, const Tensor& lse);

namespace cpu {

/// Runs the float32 attention kernel `forward` on bfloat16 q, k, v as the CPU emulations of
/// bf16 attention do: the inputs widened to float32 (exact), out rounded to bfloat16 once (lse
/// float32, written by `forward`). k and v keep their own shapes (grouped K/V when `forward`
/// takes them, e.g. chapter 15's gqa_attention_forward).
void emulate_bf16_attention_forward(FlashAttentionForwardKernel* forward, const Tensor& out,
                                    const Tensor& lse, const Tensor& q, const Tensor& k,
                                    const Tensor& v);
/// The same for the backward: dout, q, k, v, out widened, `backward` into float32 gradients of
/// dq's, dk's and dv's shapes, each rounded to bfloat16 once.
void emulate_bf16_attention_backward(FlashAttentionBackwardKernel* backward, const Tensor& dq,
                                     const Tensor& dk, const Tensor& dv, const Tensor& dout,
                                     const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& out, const Tensor& lse);

/// The CPU kernel "flash_attention_bf16_forward": an emulation for CPU-only builds and as a
/// reference, bf16 inputs widened to fp32, chapter 10's cpu::flash_attention_forward, out rounded
/// to bf16 (lse stays float32). Any hs.
void flash_attention_bf16_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v);
/// The CPU kernel "flash_attention_bf16_backward": chapter 10's cpu::flash_attention_backward on
/// the fp32 values of the bf16 tensors, gradients rounded to bf16.
void flash_attention_bf16_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                   const Tensor& dout, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor& out, const Tensor& lse);

/// The CPU kernel "flash_attention_bf16_full_forward": the full mode's emulation, bf16 q
/// [B, NH, m, hs], k, v [B, NH, n, hs] widened to fp32, full_attention_composed, out rounded to
/// bf16 (lse float32 [B, NH, m]). Any hs, m >= 0, n >= 1.
void flash_attention_bf16_full_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                       const Tensor& k, const Tensor& v);
/// The CPU kernel "flash_attention_bf16_full_backward": full_attention_composed_backward on the
/// fp32 values of the bf16 tensors, dq, dk, dv rounded to bf16.
void flash_attention_bf16_full_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                        const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& out, const Tensor& lse);

}  // namespace cpu

namespace cuda {

/// The CUDA kernel "flash_attention_bf16_forward" (CUDA builds only): writes out (bfloat16
/// [B, NH, T, hs]) and lse (float32 [B, NH, T], natural log) from bfloat16 q, k, v. Every data
/// address and stride a multiple of 16 bytes (8 bf16); hs as flash_attention_bf16_supports().
/// Throws tt::Error naming the op and the tensors otherwise. k and v may have NKV heads dividing
/// NH (grouped-query attention, read in place; then dk, dv of the backward are [B, NKV, T, hs],
/// each the sum over its group's query heads in a fixed order).
void flash_attention_bf16_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v);

/// The CUDA kernel "flash_attention_bf16_backward" (CUDA builds only): writes bfloat16 dq, dk, dv
/// (not accumulated) from dout and the forward's q, k, v, out (bfloat16) and lse (float32),
/// recomputing P from q, k and lse.
void flash_attention_bf16_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                   const Tensor& dout, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor& out, const Tensor& lse);

/// The CUDA kernel "flash_attention_bf16_full_forward" (CUDA builds only): the full mode, out
/// (bfloat16 [B, NH, m, hs]) and lse (float32 [B, NH, m]) from q [B, NH, m, hs] and k, v
/// [B, NH, n, hs] (n >= 1, NH heads: no grouping; their own strides), every query seeing every
/// key. Other rules as flash_attention_bf16_forward.
void flash_attention_bf16_full_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                       const Tensor& k, const Tensor& v);

/// The CUDA kernel "flash_attention_bf16_full_backward" (CUDA builds only): bfloat16 dq
/// [B, NH, m, hs] and dk, dv [B, NH, n, hs] of the full mode from dout and the out, lse given
/// (e.g. a ring's final ones: P is recomputed as exp(S - lse)).
void flash_attention_bf16_full_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                        const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& out, const Tensor& lse);

}  // namespace cuda

}  // namespace tt
