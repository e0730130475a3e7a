/// @file ops_nn.h
/// @brief Neural-network ops of chapter 04: softmax, log_softmax, layernorm, GELU (tanh),
/// embedding, cross-entropy (fused log-softmax + NLL), causal mask and masked fill.
///
/// Each op has three layers:
///  - CPU kernels in namespace tt::cpu (`softmax_forward`, `softmax_backward`, ...): plain
///    functions registered with TT_REGISTER_KERNEL under the same names, writing into outputs
///    the caller allocated. Chapter 06 registers CUDA kernels under the same names and
///    signatures.
///  - autograd Functions (in ops_nn.cc) whose forward/backward call the kernels through the
///    dispatcher.
///  - the front-ends below (namespace tt), which validate their inputs, throwing tt::Error naming
///    the op, shapes and dtypes, and record the op in the autograd graph.
///
/// Parallelism: every kernel splits its work into fixed blocks (rows, or columns for the
/// scatter-add of embedding) with OpenMP `schedule(static)`. Each output element is computed by
/// one thread in a fixed order, and reductions across rows (layernorm's weight/bias gradients,
/// the cross-entropy mean) add per-block partial sums in block order, so results are bitwise
/// identical for any OMP_NUM_THREADS.
///
/// Edge cases (tested in test_api_misuse.cc): tensors with no rows give empty results and,
/// in backward, zero weight gradients (layernorm, embedding); a softmax over an empty dim gives
/// an empty result; cross_entropy over N = 0 rows (or with every row ignored) is the mean of
/// nothing, NaN, like PyTorch; V = 0 classes and layernorm's C = 0 are errors. NaN and Inf
/// propagate per row and never throw: a NaN logit makes its softmax row / loss NaN, a row that
/// is all -inf or holds +inf gives a NaN softmax row (inf - inf, as in PyTorch), -inf next to
/// finite logits is probability 0, a -inf target logit gives loss +inf, and layernorm of a row
/// holding an Inf is NaN. gelu(+inf) = +inf.
///
/// Accumulation: row sums (softmax denominators, layernorm mean/variance, dot products of
/// backward passes, the cross-entropy mean) are accumulated in double for both float32 and
/// float64 inputs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "tt/dispatcher.h"
#include "tt/tensor.h"

namespace tt {

// ----- kernel signatures (one per kernel family) -----------------------------------------------

/// "softmax_forward" / "log_softmax_forward": out = op(x) along `dim` (x, out contiguous).
using SoftmaxForwardKernel = void(const Tensor& out, const Tensor& x, int64_t dim);
/// "softmax_backward" / "log_softmax_backward": dx from dout and the forward output `out`.
using SoftmaxBackwardKernel = void(const Tensor& dx, const Tensor& dout, const Tensor& out,
                                   int64_t dim);
/// "layernorm_forward": normalizes the last dim of x (rows = numel / C); writes out, and the
/// per-row mean and rstd (shape x.shape[:-1]) that backward reuses.
using LayerNormForwardKernel = void(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                    const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    double eps);
/// "layernorm_backward": dx, dweight, dbias (all written, not accumulated) from dout.
using LayerNormBackwardKernel = void(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                     const Tensor& dout, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd);
/// "gelu_forward": out = gelu(x), elementwise (x, out contiguous on the CPU).
using UnaryForwardKernel = void(const Tensor& out, const Tensor& x);
/// "gelu_backward": dx = dout * gelu'(x), elementwise.
using UnaryBackwardKernel = void(const Tensor& dx, const Tensor& dout, const Tensor& x);
/// "embedding_forward": out[i, :] = weight[indices[i], :] (indices int64, any shape).
using EmbeddingForwardKernel = void(const Tensor& out, const Tensor& weight, const Tensor& indices);
/// "embedding_backward": dweight = 0, then dweight[indices[i], :] += dout[i, :].
/// "embedding_backward_accumulate" (the same type; registered on CUDA by chapter 06): the same
/// additions into dweight as it is, with no zeroing: the embedding's backward calls it with the
/// weight's .grad when gradient-accumulation fusion allows (Function::accumulation_target).
using EmbeddingBackwardKernel = void(const Tensor& dweight, const Tensor& dout,
                                     const Tensor& indices);
/// "cross_entropy_forward": loss (0-d) and the per-row log-sum-exp `lse` ([N]) of logits [N, V].
using CrossEntropyForwardKernel = void(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                                       const Tensor& targets, int64_t ignore_index);
/// "cross_entropy_backward": dlogits [N, V] from the 0-d dloss, reusing `lse`.
using CrossEntropyBackwardKernel = void(const Tensor& dlogits, const Tensor& dloss,
                                        const Tensor& logits, const Tensor& targets,
                                        const Tensor& lse, int64_t ignore_index);
/// "masked_fill_forward": out = mask != 0 ? value : x (mask int64, x's shape, any strides).
using MaskedFillForwardKernel = void(const Tensor& out, const Tensor& x, const Tensor& mask,
                                     double value);
/// "masked_fill_backward": dx = mask != 0 ? 0 : dout.
using MaskedFillBackwardKernel = void(const Tensor& dx, const Tensor& dout, const Tensor& mask);

/// Default ignore index of cross_entropy (PyTorch's).
inline constexpr int64_t kIgnoreIndex = -100;

namespace cpu {

/// Softmax along `dim`:
/// \f$ y_i = e^{x_i - m} / \sum_j e^{x_j - m} \f$ with \f$ m = \max_j x_j \f$ (exercise ch04.10).
void softmax_forward(const Tensor& out, const Tensor& x, int64_t dim);
/// Log-softmax along `dim`: \f$ y_i = x_i - m - \log \sum_j e^{x_j - m} \f$ (exercise ch04.10).
void log_softmax_forward(const Tensor& out, const Tensor& x, int64_t dim);
/// Softmax backward: \f$ dx_i = y_i (dy_i - \sum_j dy_j y_j) \f$ (exercise ch04.11).
void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim);
/// Log-softmax backward: \f$ dx_i = dy_i - e^{y_i} \sum_j dy_j \f$ (exercise ch04.11).
void log_softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim);

/// LayerNorm over the last dim C of each row (exercise ch04.12):
/// \f$ \mu = \frac1C\sum_i x_i,\ \sigma^2 = \frac1C\sum_i (x_i-\mu)^2, \f$
/// \f$ r = 1/\sqrt{\sigma^2+\epsilon},\ y_i = (x_i-\mu)\, r\, w_i + b_i \f$.
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, double eps);
/// LayerNorm backward with \f$ \hat x_i = (x_i-\mu) r,\ g_i = dy_i w_i \f$ (exercise ch04.13):
/// \f$ dx_i = r\,(g_i - \overline{g} - \hat x_i\, \overline{g \hat x}) \f$ (bars: row means),
/// \f$ dw = \sum_{rows} dy\,\hat x,\ db = \sum_{rows} dy \f$.
void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd);

/// GELU, tanh approximation (exercise ch04.14):
/// \f$ y = \tfrac12 x (1 + \tanh u),\ u = \sqrt{2/\pi}\,(x + 0.044715 x^3) \f$.
void gelu_forward(const Tensor& out, const Tensor& x);
/// GELU backward (exercise ch04.14):
/// \f$ dx = dy\,[\tfrac12(1+\tanh u) + \tfrac12 x (1-\tanh^2 u) \sqrt{2/\pi}(1 + 3\cdot0.044715
/// x^2)] \f$.
void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x);

/// Embedding lookup: row indices[i] of weight [V, C] into out[i, :]; throws tt::Error for an
/// index outside [0, V).
void embedding_forward(const Tensor& out, const Tensor& weight, const Tensor& indices);
/// Embedding backward, a scatter-add (exercise ch04.15): rows that occur several times in
/// `indices` receive the sum of their gradients, added in token order.
void embedding_backward(const Tensor& dweight, const Tensor& dout, const Tensor& indices);

/// Cross-entropy forward, fused log-softmax + NLL, mean over non-ignored rows (exercise
/// ch04.16): \f$ \ell = \frac1{|K|}\sum_{n\in K} (\mathrm{lse}_n - x_{n,t_n}) \f$, K = rows with
/// \f$ t_n \ne \f$ ignore_index (NaN when K is empty, like PyTorch). Throws tt::Error for a
/// target outside [0, V) that is not ignore_index.
void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index);
/// Cross-entropy backward (exercise ch04.16): \f$ dx_{n,v} = \frac{d\ell}{|K|}
/// (e^{x_{n,v} - \mathrm{lse}_n} - [v = t_n]) \f$ for n in K, 0 for ignored rows.
void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                            const Tensor& targets, const Tensor& lse, int64_t ignore_index);

/// out = mask != 0 ? value : x. `mask` is int64 with x's shape (broadcast views allowed).
void masked_fill_forward(const Tensor& out, const Tensor& x, const Tensor& mask, double value);
/// dx = mask != 0 ? 0 : dout.
void masked_fill_backward(const Tensor& dx, const Tensor& dout, const Tensor& mask);

}  // namespace cpu

/// Checks the tensors of a row-wise normalization kernel (layernorm, its fused variants): every
/// tensor of `rows_like` has the shape [..., C] of the first one, every one of `vectors` [C],
/// every one of `stats` [...] (the rows); all contiguous, of the first one's dtype and device,
/// C > 0. Returns C. Throws tt::Error naming `op`, the expected and the actual tensor.
int64_t check_row_tensors(const std::string& op, std::initializer_list<const Tensor*> rows_like,
                          std::initializer_list<const Tensor*> vectors,
                          std::initializer_list<const Tensor*> stats);

// ----- front-ends (autograd) ------------------------------------------------------------------

/// Softmax of a float tensor along `dim` (negative counts from the end).
Tensor softmax(const Tensor& x, int64_t dim = -1);
/// Log-softmax of a float tensor along `dim`.
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
/// LayerNorm over the last dim: x [..., C], weight and bias [C], same float dtype.
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
/// GELU with the tanh approximation (PyTorch's `F.gelu(x, approximate="tanh")`).
Tensor gelu(const Tensor& x);
/// Rows of `weight` [V, C] selected by int64 `indices` of any shape: result indices.shape + [C].
Tensor embedding(const Tensor& weight, const Tensor& indices);
/// Mean cross-entropy of float `logits` [N, V] against int64 `targets` [N]; rows whose target
/// equals `ignore_index` are left out of the sum and the count. Returns a 0-d tensor.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     int64_t ignore_index = kIgnoreIndex);
/// The causal mask of a length-T sequence: int64 [T, T], 1 where key j > query i (future
/// positions, to be hidden), 0 elsewhere.
Tensor causal_mask(int64_t T, Device device = Device::cpu());
/// x with `value` wherever `mask` (int64, broadcastable to x's shape) is nonzero.
/// Attention: `masked_fill(scores, causal_mask(T), -inf)` before softmax.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace tt
