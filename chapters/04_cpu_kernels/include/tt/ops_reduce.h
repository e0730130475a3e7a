/// @file ops_reduce.h
/// @brief Differentiable reductions: sum and mean over any set of dims, max over one dim (with
/// the index of the maximum), each with keepdim.
///
/// Reducing dims \f$ R \f$ of x gives, for every index \f$ j \f$ of the kept dims,
/// \f$ \text{out}[j] = \sum_{r \in R\text{-indices}} x[j, r] \f$. With keepdim the reduced dims
/// stay as size 1, so the result broadcasts against x. The backward of sum copies the output
/// gradient to every element that was summed (expand); the backward of max sends it only to the
/// element that was the maximum.
///
/// Edge cases: the sum over no elements is 0 (also for int64) and the mean over no elements is
/// 0/0 = NaN (PyTorch's convention); max over an empty dim throws tt::Error (there is no
/// maximum), while max over a non-empty dim of a tensor with no rows gives empty results. A 0-d
/// tensor accepts dim 0 and -1. NaN and Inf follow IEEE arithmetic: a NaN anywhere in a sum
/// makes it NaN, +Inf + -Inf is NaN, and max returns the first NaN (NaN beats every number).
/// Nothing here throws on non-finite values.
///
/// Determinism: the CPU kernels sum in blocks of kReduceBlock consecutive elements (in the
/// row-major order of the reduced dims), accumulate in double (int64 for int64), and add the
/// block sums in block order. Blocks never depend on the thread count, so results are bitwise
/// identical for any number of threads.
#pragma once

#include <cstdint>
#include <vector>

#include "tt/tensor.h"

namespace tt {

/// Signature of a sum kernel. `out` is contiguous and has in's number of dims with size 1 on
/// the reduced dims (the keepdim shape); those are the dims where out.size(d) != in.size(d).
/// `in` may have any strides.
using ReduceKernel = void(const Tensor& out, const Tensor& in);
/// Signature of a max-over-one-dim kernel: `values` (in's dtype) and `indices` (int64) are
/// contiguous with in's shape except size 1 at `dim`; NaN wins, ties go to the first index.
using MaxDimKernel = void(const Tensor& values, const Tensor& indices, const Tensor& in,
                          int64_t dim);
/// Signature of the max backward kernel: grad_in (contiguous, zero-filled by the caller, the
/// input's shape) receives grad_values[j] at the position indices[j] along `dim`.
using MaxDimBackwardKernel = void(const Tensor& grad_in, const Tensor& grad_values,
                                  const Tensor& indices, int64_t dim);

/// Number of consecutive elements each sum block adds before block sums are combined.
inline constexpr int64_t kReduceBlock = 4096;

/// Sum over `dims` (negative dims count from the end; an empty list reduces every dim).
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
/// Sum of all elements (a 0-d tensor).
Tensor sum(const Tensor& x);
/// Mean over `dims` (float32/float64): sum divided by the number of elements summed.
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
/// Mean of all elements (a 0-d tensor).
Tensor mean(const Tensor& x);

/// Values and int64 indices of a max over one dim.
struct MaxResult {
  Tensor values;   ///< the maxima (differentiable)
  Tensor indices;  ///< position of each maximum along the reduced dim (int64)
};
/// Max over `dim` with the index of the maximum (first one on ties; NaN propagates).
MaxResult max_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
/// Max over `dim` (the values of max_with_indices).
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Max of all elements (a 0-d tensor).
Tensor max(const Tensor& x);

namespace cpu {
/// CPU kernel "sum" (exercise ch04.3), see ReduceKernel.
void sum(const Tensor& out, const Tensor& in);
/// CPU kernel "max_dim" (exercise ch04.4), see MaxDimKernel.
void max_dim(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim);
/// CPU kernel "max_dim_backward", see MaxDimBackwardKernel.
void max_dim_backward(const Tensor& grad_in, const Tensor& grad_values, const Tensor& indices,
                      int64_t dim);
}  // namespace cpu

}  // namespace tt
