/// @file fused_classifier.h
/// @brief The fused classifier (chapter 10): GPT-2's tied language-model head, softmax and
/// cross-entropy, and their gradients, computed chunk by chunk of rows so that the
/// [B*T, V] logits and their gradient never exist whole.
///
/// **Contract.** For x [B, T, C], the token embedding wte [Vp, C] (Vp >= V rows; rows >= V are
/// padding that is never predicted) and int64 targets [B, T] in [0, V), with N = B*T rows,
/// \f[ z_n = W_{[0,V)}\, x_n, \qquad
///     \ell = \frac1N \sum_n \Big(\log \sum_{v<V} e^{z_{n,v}} - z_{n,t_n}\Big), \f]
/// the mean cross-entropy of the logits z = x wte[0..V)^T: exactly what matmul followed by
/// cross_entropy computes (classifier_loss_unfused), with gradients
/// \f[ \frac{\partial\ell}{\partial z_{n,v}} =
///     \frac1N\big(\mathrm{softmax}(z_n)_v - [v = t_n]\big), \qquad
///     dx_n = \sum_{v<V} \frac{\partial\ell}{\partial z_{n,v}} W_v, \qquad
///     dW_v = \sum_n \frac{\partial\ell}{\partial z_{n,v}} x_n \f]
/// and dW_v = 0 for the padding rows v >= V.
///
/// **Algorithm.** The forward walks the rows in chunks of R rows. For each chunk it (1) computes
/// the logits z [R, G] (G >= V, see Alignment) into one reused buffer (a GEMM), (2) runs one row
/// kernel that computes each row's max, log-sum-exp and loss and then overwrites the row with
/// its gradient (softmax - onehot) / N *in place*, (3) computes dx for the chunk's rows (a GEMM)
/// and (4) accumulates dW += dz^T x_chunk (a GEMM with beta = 1). The loss is the mean of the
/// per-row losses, added in a fixed order (no atomics: bitwise reproducible). Backward only
/// scales the saved dx and dW by the incoming gradient (a 0-d tensor, multiplied on the device:
/// no host synchronization). When no gradient is needed (no_grad, or neither x nor wte requires
/// one), steps 3 and 4 are skipped.
///
/// **Memory.** At GPT-2 124M with B = 8, T = 1024 (N = 8192) and V = 50257, the logits are
/// 8192 x 50257 x 4 bytes = 1.65 GB in float32; the unfused path keeps them for its backward,
/// which then allocates their gradient (another 1.65 GB; 3.3 GB measured at the peak). Here the
/// only logits memory is one chunk buffer of at most FusedClassifierOptions::max_chunk_bytes
/// (512 MiB by default), plus dx [N, C] and dW [Vp, C] (the sizes of x and wte) held from
/// forward to backward.
///
/// **Alignment.** The GEMMs run over G = min(Vp, classifier_padded_stride(V)) columns, not V:
/// the chunk buffer's rows are padded to classifier_padded_stride(V), a multiple of 64 elements
/// (50257 -> 50304), and when wte has that many rows (GPT-2's Vp = 50304) the logits GEMM also
/// computes the padding columns (0.1% more work), the row kernel sets their gradient to 0, and
/// the dx and dW GEMMs use all G columns (adding nothing from them). Every GEMM then sees
/// leading dimensions *and* contiguous extents that are multiples of 64 elements (256 bytes).
/// With V = 50257 in either place cuBLAS must fall back to unaligned kernels: its TF32 GEMMs
/// run at about a quarter of their speed on an H100. Rows >= G of wte are never read; rows
/// [V, G) must be finite (GPT-2 keeps them zero), since dx multiplies them by a zero gradient.
/// With bfloat16 x, whose wte is cast once per call anyway, a wte of fewer rows (an unpadded
/// head such as LLaMA's lm_head [V, C]) is cast into classifier_padded_stride(V) rows, the extra
/// ones zero: its GEMMs are aligned too (unaligned, LLaMA 124M's head GEMMs took 13 ms of a
/// 53 ms traced bf16 step on an H100).
///
/// The GEMMs are the "gemm" kernels (GemmKernel, tt/ops_matmul.h: cuBLAS on CUDA, chapter 04's
/// gemm_fma on the CPU); the row kernel is "classifier_xent_rows" (the CPU one applies classifier_row_xent, the
/// exercise ch10.7, to each row in parallel; the CUDA one is one block per row).
#pragma once

#include <cstdint>
#include <functional>

#include "tt/tensor.h"

namespace tt {

/// Row kernel "classifier_xent_rows": for logits [R, G] (a 2-D view whose rows may be padded:
/// stride(1) == 1, stride(0) >= G) whose first V <= G columns are the logits, contiguous int64
/// targets [R] and a contiguous row_loss [R] of the logits' dtype (float32 for bfloat16 logits,
/// which are read and computed in float32 and written back rounded), writes row_loss[r] =
/// logsumexp(z_r[0, V)) - z_{r, t_r}, overwrites columns [0, V) of each row in place with
/// scale * (softmax(z_r) - onehot(t_r)) and columns [V, G) with 0 (never reading them). The
/// targets must lie in [0, V) (checked by the front-end); the CUDA kernel writes a NaN loss for
/// a target outside it and never reads out of bounds.
using ClassifierXentKernel = void(const Tensor& logits, const Tensor& row_loss,
                                  const Tensor& targets, int64_t vocab_size, double scale);

/// Checks the arguments of a "classifier_xent_rows" kernel (the contract above: 2-D logits with
/// unit column stride and row stride >= G >= vocab_size >= 1, row_loss [R] of their dtype,
/// contiguous int64 targets [R], all on one device); throws tt::Error naming `op` and the
/// tensors (check_classifier_part_args with row_loss as the [R] values, and vocab_size >= 1). The
/// kernels check their device type themselves.
void check_classifier_xent_args(const char* op, const Tensor& logits, const Tensor& row_loss,
                                const Tensor& targets, int64_t vocab_size);

/// Checks the arguments of a "classifier_row_stats" (stats_shape [2, R]) or "classifier_row_grad"
/// (stats = lse, stats_shape [R]) kernel of `device_type`: 2-D logits with unit column stride
/// and row stride >= G >= vocab_size >= 0, contiguous stats of stats_shape and the accumulation
/// dtype, contiguous int64 targets [R], all on one device of that type; throws tt::Error naming
/// `op` and the tensors.
void check_classifier_part_args(const char* op, DeviceType device_type, const Tensor& logits,
                                const Tensor& stats, const Shape& stats_shape,
                                const Tensor& targets, int64_t vocab_size);

/// Row strides of the logits buffer are multiples of this many elements (256 bytes of float32).
inline constexpr int64_t kClassifierRowAlign = 64;

/// Default bound on the bytes of one chunk of logits: at GPT-2 124M, 4 chunks of 2048 rows. On an
/// H100 (TF32) 64 / 256 / 512 / 1024 MiB chunks measured 15.5 / 9.8 / 8.9 / 8.6 ms for the
/// loss forward + backward (bench_classifier): every chunk reads and writes all of dW once, and
/// small chunks make small GEMMs.
inline constexpr int64_t kClassifierChunkBytes = int64_t{512} << 20;

/// Row kernel "classifier_row_stats", the first half of the row kernel for one part of a split
/// vocabulary (ClassifierVocabPart): for logits [R, G] (rows may be padded, as above) whose first
/// V <= G columns are the tokens [first, first + V) of the whole vocabulary, contiguous int64
/// targets [R] (whole-vocabulary ids) and a contiguous stats [2, R] of the accumulation dtype
/// (float32 for bfloat16 logits), writes stats[0][r] = logsumexp(z_r[0, V)) (-inf when V = 0)
/// and stats[1][r] = z_{r, t_r - first} when first <= t_r < first + V, else 0. Reads only.
using ClassifierRowStatsKernel = void(const Tensor& logits, const Tensor& stats,
                                      const Tensor& targets, int64_t first, int64_t vocab_size);

/// Row kernel "classifier_row_grad", the second half: given each row's log-sum-exp over the
/// WHOLE vocabulary, lse [R] (contiguous, the accumulation dtype), overwrites columns [0, V) of
/// each row in place with scale * (exp(z - lse) - [first + v = t_r]) and columns [V, G) with 0.
/// With the whole vocabulary in one part (first = 0) this is classifier_xent_rows's gradient.
using ClassifierRowGradKernel = void(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                     int64_t first, int64_t vocab_size, double scale);

/// One part of a vocabulary split over ranks (chapter 13's vocab-parallel head): wte holds the
/// tokens [first, first + V) of a vocabulary of whole_vocab_size tokens, the targets are
/// whole-vocabulary ids, and every chunk's softmax statistics are made whole by `combine`.
/// The row kernel then runs in two halves around it: "classifier_row_stats", combine,
/// "classifier_row_grad". Active when combine is set.
struct ClassifierVocabPart {
  /// The whole-vocabulary id of wte's row 0.
  int64_t first = 0;
  /// The tokens of the whole vocabulary: the targets must lie in [0, whole_vocab_size).
  int64_t whole_vocab_size = 0;
  /// Called once per chunk, on every part's rank alike (it may be a collective), with stats [2,
  /// R] of the accumulation dtype as "classifier_row_stats" wrote them for this part. Must
  /// replace row 0 by the log-sum-exp over all parts (log sum_p exp(stats_p[0])) and row 1 by the
  /// sum over the parts of row 1 (the target's logit: one part has it).
  std::function<void(const Tensor& stats)> combine;
};

/// Tuning knobs of fused_classifier_loss (the defaults are what training uses).
struct FusedClassifierOptions {
  /// Upper bound on the bytes of the logits chunk buffer (rows x padded stride x element size);
  /// at least one row is always processed.
  int64_t max_chunk_bytes = kClassifierChunkBytes;
  /// When > 0, the exact number of rows per chunk (the last chunk may be shorter); overrides
  /// max_chunk_bytes. For tests of the chunk boundaries.
  int64_t chunk_rows = 0;
  /// Validate the targets (in [0, V)) and throw tt::Error naming the op otherwise. Free on the
  /// CPU; on CUDA it follows cuda::IndexChecks: kHost (the default) copies the targets to the
  /// host (one synchronization, N int64 values), kDevice records a bad target for
  /// cuda::check_index_errors() without waiting. With false (CUDA only), a target out of range
  /// gives a NaN loss instead of an error.
  bool check_targets = true;
  /// A part of a split vocabulary (see ClassifierVocabPart); the whole vocabulary by default.
  ClassifierVocabPart part{};
};

/// V rounded up to a multiple of kClassifierRowAlign: the row stride of the logits buffer.
int64_t classifier_padded_stride(int64_t vocab_size);

/// Rows per chunk for N rows of V logits of `dtype` under `options`: chunk_rows when set, else
/// the most rows whose padded logits fit in max_chunk_bytes, then balanced so that every chunk
/// has nearly the same size (ceil(N / chunks) rows); in [1, max(N, 1)].
int64_t classifier_chunk_rows(int64_t rows, int64_t vocab_size, DType dtype,
                              const FusedClassifierOptions& options);

/// Mean cross-entropy of logits = x wte[0..V)^T against targets, fused and chunked as described
/// above (fastest when Vp is a multiple of 64). x [B, T, C] (or any [..., C]), wte [Vp, C] with
/// Vp >= V >= 1, targets int64 with x's
/// leading shape; x and wte float32 or float64 of one dtype on one device (CPU or CUDA), targets
/// on the same device. Mixed precision (chapter 11, tt/classifier_bf16.h): x bfloat16 with a
/// float32 wte, cast to bfloat16 once per call; the logits chunks are bfloat16 GEMMs with float32
/// accumulation (kernel "matmul_lt_gemm"), the loss, dx and dW are float32, and the gradient of
/// x is returned in bfloat16. Returns a 0-d tensor, differentiable in x and wte (the gradient of wte
/// adds to whatever else uses it, e.g. the token embedding). Throws tt::Error naming
/// "fused_classifier_loss", the shapes, dtypes and devices on bad inputs, and the position and
/// value of a target outside [0, V).
///
/// With options.part.combine set, wte holds one part of a split vocabulary: vocab_size (V >= 0)
/// is this part's tokens, the targets are whole-vocabulary ids, the returned loss is the whole
/// vocabulary's mean cross-entropy (the same on every part), and the gradients are this part's:
/// dwte for its rows, dx = this part's term of the sum over the vocabulary (the parts' dx add up
/// to the whole one: chapter 13's f operator sums them).
Tensor fused_classifier_loss(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                             const Tensor& targets, const FusedClassifierOptions& options = {});

/// The same loss composed from chapter 04's ops: cross_entropy(matmul(x, wte[0..V)^T)). It
/// materializes the [N, V] logits (and, in backward, their gradient): the reference of the
/// tests and the "unfused" of the benchmark.
Tensor classifier_loss_unfused(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                               const Tensor& targets);

namespace cpu {

/// One row of the fused classifier (exercise ch10.7): `row` holds the V logits z of one token
/// and `target` its class in [0, V). Returns the loss \f$ \log\sum_v e^{z_v} - z_{target} \f$
/// and overwrites the row with its gradient \f$ \mathrm{scale}\,(\mathrm{softmax}(z)_v - [v =
/// target]) \f$. Numerically stable for any finite logits (the row maximum is subtracted before
/// exponentiating); sums are accumulated in double.
template <typename T>
T classifier_row_xent(T* row, int64_t vocab_size, int64_t target, T scale);

/// classifier_row_xent for float32 rows (instantiated in fused_classifier_cpu.cc).
extern template float classifier_row_xent<float>(float*, int64_t, int64_t, float);
/// classifier_row_xent for float64 rows (instantiated in fused_classifier_cpu.cc).
extern template double classifier_row_xent<double>(double*, int64_t, int64_t, double);

/// The CPU kernel "classifier_xent_rows": classifier_row_xent on every row, in parallel.
void classifier_xent_rows(const Tensor& logits, const Tensor& row_loss, const Tensor& targets,
                          int64_t vocab_size, double scale);

/// The CPU kernel "classifier_row_stats" (ClassifierRowStatsKernel); sums in double.
void classifier_row_stats(const Tensor& logits, const Tensor& stats, const Tensor& targets,
                          int64_t first, int64_t vocab_size);

/// The CPU kernel "classifier_row_grad" (ClassifierRowGradKernel).
void classifier_row_grad(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                         int64_t first, int64_t vocab_size, double scale);

/// The CPU kernel "gemm" (GemmKernel): chapter 04's gemm_fma (tt/cpu_gemm.h) for alpha = 1 and
/// beta = 0 or 1 on FMA hardware (the classifier's only cases: out = a @ b, out += a @ b, one FMA
/// chain per element continuing from out), otherwise Eigen's GEMM on Eigen::Map views of the
/// operands, with out's row stride as its outer stride.
void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);

}  // namespace cpu

namespace cuda {

/// The CUDA kernel "classifier_xent_rows" (CUDA builds only): one block per row; each thread
/// keeps an online (max, sum of exponentials) over its strided share of the row, the block
/// combines them in a fixed tree, then every thread rewrites its share with the gradient.
/// float32, float64, and bfloat16 logits (computed in float32, float32 row_loss).
void classifier_xent_rows(const Tensor& logits, const Tensor& row_loss, const Tensor& targets,
                          int64_t vocab_size, double scale);

/// The CUDA kernel "classifier_row_stats": classifier_xent_rows's first pass (one block per row,
/// the same fixed tree), writing the row's log-sum-exp and target logit instead of the loss.
void classifier_row_stats(const Tensor& logits, const Tensor& stats, const Tensor& targets,
                          int64_t first, int64_t vocab_size);

/// The CUDA kernel "classifier_row_grad": classifier_xent_rows's second pass, with the given
/// log-sum-exp.
void classifier_row_grad(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                         int64_t first, int64_t vocab_size, double scale);

}  // namespace cuda

}  // namespace tt
