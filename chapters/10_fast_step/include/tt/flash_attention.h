/// @file flash_attention.h
/// @brief Causal FlashAttention (chapter 10): attention of q, k, v [B, NH, T, hs] computed tile
/// by tile with an online softmax, so that no [B, NH, T, T] tensor ever exists.
///
/// The op is \f$ O = \mathrm{softmax}(Q K^T / \sqrt{hs} + M)\, V \f$ with the causal mask M
/// (query i sees keys j <= i), per (batch, head). Its forward also returns, per query row, the
/// log-sum-exp of the scaled, masked scores, \f$ L_i = \log \sum_{j \le i} e^{S_{ij}} \f$
/// ([B, NH, T]); the backward recomputes \f$ P_{ij} = e^{S_{ij} - L_i} \f$ from Q, K and L instead
/// of storing P, with \f$ D_i = \sum_c dO_{ic} O_{ic} \f$:
/// \f$ dV = P^T dO,\ dP = dO\, V^T,\ dS = P \circ (dP - D),\ dQ = dS\, K / \sqrt{hs},\ dK = dS^T
/// Q / \sqrt{hs} \f$.
///
/// Three layers, as for every op of this project:
///  - kernels registered as "flash_attention_forward" / "flash_attention_backward": the CPU ones
///    below (namespace tt::cpu; float32 and float64), and the CUDA ones of
///    flash_attention_cuda.cu (float32, tensor cores in TF32, or 3xTF32 when
///    cuda::allow_tf32() is false; hs in {32, 64, 128});
///  - an autograd Function whose forward saves O and L, and whose backward calls the backward
///    kernel;
///  - the front-end flash_attention(), which validates its inputs (tt::Error naming the op, the
///    shapes, dtypes and devices).
/// causal_attention_naive() is the same function composed from chapter 04's ops (matmul,
/// masked_fill, softmax): the reference of the tests, and the "naive" of the benchmark.
///
/// The kernels read and write strided views: each [B, NH, T, hs] tensor only needs a unit stride
/// along hs. flash_attention_qkv() uses this for GPT-2: its q, k, v are views into the packed
/// qkv [B, T, 3C] that c_attn writes (row stride 3C), its output is written straight into
/// [B, T, C] (row stride C), and its backward writes dqkv [B, T, 3C] directly, so no head is
/// ever permuted or copied.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>

#include "tt/dispatcher.h"
#include "tt/strided_indexer.h"  // TT_HOST_DEVICE
#include "tt/tensor.h"

namespace tt {

/// "flash_attention_forward": writes out [B, NH, T, hs] and lse [B, NH, T] (q's dtype) from
/// q, k, v [B, NH, T, hs]. q, k, v and out may be strided views (see FlashGeometry): q, k and v
/// share one set of strides, out has its own; lse is contiguous.
using FlashAttentionForwardKernel = void(const Tensor& out, const Tensor& lse, const Tensor& q,
                                         const Tensor& k, const Tensor& v);
/// "flash_attention_backward": writes dq, dk, dv (not accumulated) from dout and the forward's
/// q, k, v, out and lse. dq, dk, dv have the strides of q, k, v; dout those of out.
using FlashAttentionBackwardKernel = void(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                          const Tensor& dout, const Tensor& q, const Tensor& k,
                                          const Tensor& v, const Tensor& out, const Tensor& lse);

/// Where the rows of every (batch, head) of a [B, NH, T, hs] view lie, in elements: element
/// (b, h, t, c) is at data + b * batch + h * head + t * row + c.
///
/// Grouped-query attention (GQA): k and v (and dk, dv) may have NKV = NH / group heads; query
/// head h then reads key/value head h / group in place (no copy of K or V). Their layout has
/// that `group`; every other layout has group 1.
struct FlashLayout {
  int64_t batch = 0;  ///< stride of dim 0 (b)
  int64_t head = 0;   ///< stride of dim 1 (h)
  int64_t row = 0;    ///< stride of dim 2 (t): the distance between two rows of one head
  int64_t group = 1;  ///< query heads per head of this view (NH / NKV; 1 but for GQA's k, v)
  /// Offset of the first row of the head that query head bh = b * NH + h reads: head h / group
  /// of batch b.
  TT_HOST_DEVICE int64_t offset(int64_t bh, int64_t nh) const {
    return bh / nh * batch + bh % nh / group * head;
  }
};

/// Which keys the query rows of a FlashAttention call see.
enum class FlashMask {
  kCausal,  ///< q, k, v of one length T; query i sees keys j <= i (this chapter's kernels)
  kFull,    ///< q has T rows, k and v Tk rows (any Tk >= 1); every query sees every key
};

/// The geometry of one call of a FlashAttention kernel.
struct FlashGeometry {
  int64_t B = 0;    ///< batch
  int64_t NH = 0;   ///< heads
  int64_t T = 0;    ///< sequence length (query rows)
  int64_t hs = 0;   ///< head size
  FlashLayout qkv;  ///< layout of q, k, v (and of dq, dk, dv)
  FlashLayout out;  ///< layout of out (and of dout)
  /// Layout of k, v (and of dk, dv): qkv, or for grouped k, v (check_flash_tensors' kv_inputs)
  /// their own, with group = NH / NKV.
  FlashLayout kv;
  int64_t Tk = 0;                       ///< key rows of k, v: T under FlashMask::kCausal
  FlashMask mask = FlashMask::kCausal;  ///< which keys a query row sees
};

/// The registered kernels that compute FlashAttention on tensors of one dtype, and the dtype of
/// their log-sum-exp.
struct FlashKernels {
  const char* forward;   ///< name of the FlashAttentionForwardKernel
  const char* backward;  ///< name of the FlashAttentionBackwardKernel
  DType lse_dtype;       ///< dtype of lse: the dtype of the softmax statistics
};

/// The kernels of `dtype`: "flash_attention_forward" / "flash_attention_backward" (this chapter)
/// with lse of the same dtype for float32 and float64; for bfloat16, chapter 11's
/// "flash_attention_bf16_forward" / "flash_attention_bf16_backward" (tt/flash_attention_bf16.h)
/// with a float32 lse (softmax statistics stay fp32). The front-ends below call these.
FlashKernels flash_kernels(DType dtype);

/// Checks the tensors of a FlashAttention kernel call (`op` names it in errors) and returns
/// their geometry: every tensor of `inputs` (q, k, v, ...) and `outputs` (out, ...) defined,
/// [B, NH, T, hs] with q's shape, dtype and device and a unit stride along hs; the `inputs`
/// share one set of strides and the `outputs` another; lse a contiguous [B, NH, T] of
/// flash_kernels(q's dtype).lse_dtype on q's device. The device and dtype rules of each backend are checked by its kernels.
///
/// `kv_inputs` (k, v, dk, dv of a kernel that takes grouped-query attention; empty: k and v are
/// among `inputs`): [B, NKV, T, hs] with NKV dividing NH, q's dtype and device, one set of
/// strides with a unit stride along hs; FlashGeometry::kv gets their layout with group NH / NKV.
///
/// `mask` FlashMask::kFull (a rectangular block, e.g. chapter 11's
/// "flash_attention_bf16_full_forward"): `kv_inputs` must hold k, v (and dk, dv), of NH heads
/// (no grouping) and Tk >= 1 rows of their own, FlashGeometry::Tk; q, out and lse keep T rows.
FlashGeometry check_flash_tensors(const char* op, std::initializer_list<const Tensor*> inputs,
                                  std::initializer_list<const Tensor*> outputs, const Tensor& lse,
                                  std::initializer_list<const Tensor*> kv_inputs = {},
                                  FlashMask mask = FlashMask::kCausal);

/// check_flash_tensors() and what the CUDA FlashAttention kernels (chapter 10's float32 ones,
/// chapter 11's bfloat16 ones) need: q of `dtype` on a CUDA device, a head size that
/// `supports_hs` accepts (`head_sizes` lists them for the error, e.g. "32, 64 or 128"), every
/// data address and stride a multiple of 16 bytes (their 16-byte loads), at most 65535 heads
/// B * NH and 2^24 positions (query and key rows). Throws tt::Error naming "cuda::" `op`
/// otherwise. `kv_inputs`: grouped k, v, dk, dv as in check_flash_tensors(), held to the same
/// CUDA rules; `mask` as there.
FlashGeometry check_flash_cuda_tensors(const char* op, DType dtype, bool (*supports_hs)(int64_t),
                                       const char* head_sizes,
                                       std::initializer_list<const Tensor*> inputs,
                                       std::initializer_list<const Tensor*> outputs,
                                       const Tensor& lse,
                                       std::initializer_list<const Tensor*> kv_inputs = {},
                                       FlashMask mask = FlashMask::kCausal);

namespace cpu {

/// Query rows per tile of the CPU kernels (a tile of K and V is reused by that many rows).
inline constexpr int64_t kFlashBlockQ = 64;
/// Keys per tile of the CPU kernels (the scores of one row and one key tile: kFlashBlockK values).
inline constexpr int64_t kFlashBlockK = 64;

/// The running state of a softmax over a row that arrives in blocks (exercise ch10.2): the
/// largest score seen so far and the sum of \f$ e^{x_j - \mathrm{max}} \f$ over the scores seen.
///
/// After merging blocks \f$ x^{(1)}, \dots, x^{(b)} \f$ (in any sizes), `max` is the maximum of
/// all their elements and \f$ \mathrm{sum} = \sum_j e^{x_j - \mathrm{max}} \f$ over all of them,
/// so \f$ \mathrm{softmax}(x)_j = e^{x_j - \mathrm{max}} / \mathrm{sum} \f$ and
/// \f$ \log\sum_j e^{x_j} = \mathrm{max} + \log \mathrm{sum} \f$. Scores of -inf (masked) count
/// as probability 0; a row of only -inf so far has max = -inf and sum = 0.
template <typename T>
struct OnlineSoftmax {
  T max = -std::numeric_limits<T>::infinity();  ///< largest score merged so far
  T sum = 0;  ///< sum of exp(x - max) over the scores merged so far

  /// Merges the block x[0, n) (n >= 0): updates max and sum, overwrites each x[j] with
  /// \f$ e^{x_j - \mathrm{max}_{new}} \f$ (0 for -inf), and returns the factor
  /// \f$ \alpha = e^{\mathrm{max}_{old} - \mathrm{max}_{new}} \f$ (in [0, 1]; 1 while the
  /// maximum is still -inf) by which anything accumulated with weights \f$ e^{x -
  /// \mathrm{max}_{old}} \f$ must be multiplied to be relative to the new maximum.
  T merge(T* x, int64_t n);

  /// \f$ \log \sum_j e^{x_j} \f$ over everything merged: max + log(sum) (-inf for an empty or
  /// fully masked row).
  T logsumexp() const;
};

extern template struct OnlineSoftmax<float>;
extern template struct OnlineSoftmax<double>;

/// FlashAttention forward of one head (exercise ch10.3): q, k, v, o hold n rows of hs values,
/// row i of q, k and v at i * ld_qkv, row i of o at i * ld_o (both hs when the head is a
/// contiguous [n, hs] matrix); lse is [n]. Tiles of kFlashBlockQ query rows and kFlashBlockK
/// keys, an OnlineSoftmax per row, key tiles entirely above the diagonal skipped; memory beyond
/// the outputs is O(tile).
template <typename T>
void flash_attention_forward_head(const T* q, const T* k, const T* v, T* o, T* lse, int64_t n,
                                  int64_t hs, int64_t ld_qkv, int64_t ld_o);

/// FlashAttention backward of one head (exercise ch10.4): writes dq, dk, dv (rows ld_qkv apart,
/// like q, k, v) from dout (rows ld_o apart, like o), and the forward's q, k, v, o and lse,
/// recomputing P tile by tile from q, k and lse.
template <typename T>
void flash_attention_backward_head(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k,
                                   const T* v, const T* o, const T* lse, int64_t n, int64_t hs,
                                   int64_t ld_qkv, int64_t ld_o);

/// The CPU kernel "flash_attention_forward": flash_attention_forward_head on every (b, h), in
/// parallel over the B * NH heads.
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v);
/// The CPU kernel "flash_attention_backward": flash_attention_backward_head on every (b, h), in
/// parallel over the B * NH heads.
void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse);

}  // namespace cpu

namespace cuda {

/// The CUDA kernel "flash_attention_forward" (CUDA builds only; exercise ch10.5): float32,
/// hs in {32, 64, 128}, tensor cores in TF32 (3xTF32 when cuda::allow_tf32() is false); every
/// stride and data address a multiple of 16 bytes (whole float4 loads). k and v may have
/// NKV heads dividing NH (grouped-query attention, read in place; chapter 15's
/// "gqa_attention_forward" on CUDA), with strides of their own.
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v);
/// The CUDA kernel "flash_attention_backward" (CUDA builds only; exercise ch10.6). With grouped
/// k, v (NKV heads), dk and dv are [B, NKV, T, hs] like them: the sum over the NH / NKV query
/// heads of each group, added in a fixed order by the block of a key tile (deterministic).
void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse);

}  // namespace cuda

/// Causal attention of q, k, v [B, NH, T, hs] (same shape, dtype and device; float32 or float64,
/// float32 only on CUDA; bfloat16 through chapter 11's kernels, see flash_kernels()) through the
/// FlashAttention kernels, scale \f$ 1/\sqrt{hs} \f$. Result [B, NH, T, hs]; differentiable in
/// q, k and v.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v);

/// Whether the FlashAttention kernels of `device` take head size `hs`: any hs >= 1 on the CPU;
/// 32, 64 or 128 on CUDA (the tile shapes of the tensor-core kernels).
bool flash_attention_supports(DeviceType device, int64_t hs);

/// Causal self-attention of GPT-2's packed projection qkv [B, T, 3C] (q | k | v along the last
/// dim, each C split into n_head heads of hs = C / n_head) -> y [B, T, C], through the
/// FlashAttention kernels on strided views: no permute, no copy of q, k, v or y. Differentiable
/// in qkv; the backward writes dqkv [B, T, 3C] in place of the three head gradients. Equals
/// gpt2::causal_self_attention (chapter 09) up to rounding. Throws tt::Error naming the shapes
/// when qkv is not [B, T, 3C] with C divisible by n_head (and, on CUDA, hs in {32, 64, 128};
/// for a bfloat16 qkv, chapter 11's kernels: hs in {32, 64}).
Tensor flash_attention_qkv(const Tensor& qkv, int64_t n_head);

/// The same function composed from chapter 04's ops: softmax(masked_fill(q k^T / sqrt(hs),
/// causal_mask(T), -inf)) v. Materializes the [B, NH, T, T] scores (and their softmax).
Tensor causal_attention_naive(const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace tt
