// Reductions of chapter 04 (given code): dim handling, output allocation and the autograd
// Functions of sum, mean and max. The CPU kernels are exercises ch04.3/ch04.4 (reduce_kernels.cc).
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"

namespace tt {
namespace {

/// Which dims of an n-dim tensor `dims` selects (empty: all), validated for `op`. A 0-d tensor
/// accepts dims 0 and -1 (and has no dim to mark), like PyTorch.
std::vector<bool> reduced_mask(const char* op, const Tensor& x, const std::vector<int64_t>& dims) {
  TT_CHECK(x.defined(), op, ": undefined input");
  std::vector<bool> mask(static_cast<std::size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, x.shape(), op);
    if (x.dim() == 0) continue;
    TT_CHECK(!mask[w], op, ": dim ", d, " appears twice in ", dims, " for ", x.describe());
    mask[w] = true;
  }
  return mask;
}

/// x's shape with the masked dims set to 1 (keepdim) or removed.
Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

/// sum over the masked dims: the kernel writes the keepdim shape, which is then viewed.
class SumFn final : public autograd::Function {
 public:
  SumFn(std::vector<int64_t> dims, bool keepdim) : dims_(std::move(dims)), keepdim_(keepdim) {}
  std::string name() const override { return "SumBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    const std::vector<bool> mask = reduced_mask("sum", x, dims_);
    keep_shape_ = reduced_shape(x.shape(), mask, true);
    Tensor out = empty(keep_shape_, {x.dtype(), x.device()});
    call_kernel<ReduceKernel>("sum", x.device(), out, x);
    return {out.view(reduced_shape(x.shape(), mask, keepdim_))};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    in_shape_ = in[0].shape();
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override {
    // Every summed element receives the output gradient: broadcast it back (materialized, so a
    // leaf's .grad never aliases a stride-0 view).
    return {grad[0].reshape(keep_shape_).expand(in_shape_).contiguous()};
  }

 private:
  std::vector<int64_t> dims_;
  bool keepdim_;
  Shape keep_shape_, in_shape_;
};

/// max over one dim: outputs {values, indices}; only values has a gradient.
class MaxFn final : public autograd::Function {
 public:
  MaxFn(int64_t dim, bool keepdim) : dim_(dim), keepdim_(keepdim) {}
  std::string name() const override { return "MaxBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    dim_ = wrap_dim(dim_, x.shape(), "max");
    TT_CHECK(x.size(dim_) > 0, "max: cannot reduce the empty dim ", dim_, " of ", x.describe());
    Shape keep = x.shape();
    keep[dim_] = 1;
    Tensor values = empty(keep, {x.dtype(), x.device()});
    Tensor indices = empty(keep, {DType::kInt64, x.device()});
    call_kernel<MaxDimKernel>("max_dim", x.device(), values, indices, x, dim_);
    if (keepdim_) return {values, indices};
    return {values.squeeze(dim_), indices.squeeze(dim_)};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>& out) override {
    in_shape_ = in[0].shape();
    save_for_backward({out[1]});
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override {
    Shape keep = in_shape_;
    keep[dim_] = 1;
    const Tensor& g = grad[0];
    Tensor gi = zeros(in_shape_, {g.dtype(), g.device()});
    call_kernel<MaxDimBackwardKernel>("max_dim_backward", g.device(), gi,
                                      g.reshape(keep).contiguous(),
                                      saved_tensors()[0].reshape(keep).contiguous(), dim_);
    return {gi};
  }

 private:
  int64_t dim_;
  bool keepdim_;
  Shape in_shape_;
};

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  TT_CHECK(x.defined(), "sum: undefined input");
  return autograd::Function::apply<SumFn>({x}, dims, keepdim)[0];
}

Tensor sum(const Tensor& x) {
  return sum(x, {}, false);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  TT_CHECK(x.defined() && is_floating(x.dtype()),
           "mean: expected a float32 or float64 tensor, got ", x.describe());
  const std::vector<bool> mask = reduced_mask("mean", x, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) count *= mask[d] ? x.size(d) : 1;
  return mul(sum(x, dims, keepdim), 1.0 / static_cast<double>(count));
}

Tensor mean(const Tensor& x) {
  return mean(x, {}, false);
}

MaxResult max_with_indices(const Tensor& x, int64_t dim, bool keepdim) {
  TT_CHECK(x.defined(), "max: undefined input");
  if (x.dim() == 0) {
    // A 0-d tensor is its own maximum, at index 0 (PyTorch's rule); the results stay 0-d.
    wrap_dim(dim, x.shape(), "max");
    return max_with_indices(reshape(x, {1}), 0, false);
  }
  std::vector<Tensor> out = autograd::Function::apply<MaxFn>({x}, dim, keepdim);
  return {out[0], out[1]};
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return max_with_indices(x, dim, keepdim).values;
}

Tensor max(const Tensor& x) {
  TT_CHECK(x.defined(), "max: undefined input");
  return max(reshape(x, {-1}), 0, false);
}

}  // namespace tt
