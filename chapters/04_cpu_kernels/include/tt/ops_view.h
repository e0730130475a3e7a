/// @file ops_view.h
/// @brief Differentiable views: the chapter 01 Tensor view methods wrapped as autograd
/// Functions, so that attention's reshapes, transposes and slices carry gradients.
///
/// A view's forward copies nothing (it shares the input's storage). Its backward maps the
/// output gradient back to the input's geometry: reshape back, permute by the inverse
/// permutation, scatter into zeros for slice/select, and sum_to_shape for expand.
#pragma once

#include <vector>

#include "tt/tensor.h"

namespace tt {

/// x.view(shape), differentiable (throws when the strides do not allow a view).
Tensor view(const Tensor& x, const Shape& shape);
/// x.reshape(shape) (a view when possible, else a copy), differentiable.
Tensor reshape(const Tensor& x, const Shape& shape);
/// x.flatten(start_dim, end_dim), differentiable.
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
/// x.permute(dims), differentiable: the gradient is permuted by the inverse permutation.
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
/// x.transpose(d0, d1), differentiable.
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
/// x.slice(dim, start, end, step), differentiable: the gradient is scattered into zeros.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// x.select(dim, index), differentiable.
Tensor select(const Tensor& x, int64_t dim, int64_t index);
/// x.expand(shape) (stride-0 broadcast), differentiable: the gradient is sum_to_shape'd.
Tensor expand(const Tensor& x, const Shape& shape);
/// x.squeeze(dim), differentiable.
Tensor squeeze(const Tensor& x, int64_t dim);
/// x.unsqueeze(dim), differentiable.
Tensor unsqueeze(const Tensor& x, int64_t dim);
/// A contiguous copy of x (a new view of x when it is already contiguous), differentiable.
Tensor contiguous(const Tensor& x);

}  // namespace tt
