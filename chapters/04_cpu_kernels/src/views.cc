// Differentiable views (chapter 04, given code): one autograd Function, ViewFn, parameterized by
// the forward view and the map that sends the output gradient back to the input's geometry.
#include <functional>
#include <string>
#include <utility>

#include "tt/autograd.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_view.h"

namespace tt {
namespace {

using TensorMap = std::function<Tensor(const Tensor&)>;
/// The backward of a view: the input's gradient from the output's gradient and the input's
/// shape (recorded by forward, so that no front-end reads its input before it is validated).
using GradMap = std::function<Tensor(const Tensor& grad, const Shape& in_shape)>;

/// A view op: forward = fwd(x) (no copy), backward = bwd(grad, x.shape()).
class ViewFn final : public autograd::Function {
 public:
  ViewFn(std::string name, TensorMap fwd, GradMap bwd)
      : name_(std::move(name)), fwd_(std::move(fwd)), bwd_(std::move(bwd)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    in_shape_ = in[0].shape();
    return {fwd_(in[0])};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override {
    return {bwd_(grad[0], in_shape_)};
  }

 private:
  std::string name_;
  TensorMap fwd_;
  GradMap bwd_;
  Shape in_shape_;
};

/// Records view `op` (node name `name`) of x.
Tensor apply_view(const char* op, const char* name, const Tensor& x, TensorMap fwd, GradMap bwd) {
  TT_CHECK(x.defined(), op, ": undefined input");
  return autograd::Function::apply<ViewFn>({x}, name, std::move(fwd), std::move(bwd))[0];
}

/// Backward of the views that only change the shape: reshape the gradient back.
Tensor reshape_back(const Tensor& g, const Shape& in_shape) {
  return g.reshape(in_shape);
}

// Gradient of a view that picked part of x: zeros of x's shape with `part` of it set to grad.
GradMap scatter_into_zeros(TensorMap part) {
  return [part = std::move(part)](const Tensor& g, const Shape& in_shape) {
    Tensor gx = zeros(in_shape, {g.dtype(), g.device()});
    part(gx).copy_(g);
    return gx;
  };
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  return apply_view(
      "view", "ViewBackward", x, [shape](const Tensor& t) { return t.view(shape); }, reshape_back);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  return apply_view(
      "reshape", "ReshapeBackward", x, [shape](const Tensor& t) { return t.reshape(shape); },
      reshape_back);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return apply_view(
      "flatten", "FlattenBackward", x,
      [=](const Tensor& t) { return t.flatten(start_dim, end_dim); }, reshape_back);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  return apply_view(
      "permute", "PermuteBackward", x, [dims](const Tensor& t) { return t.permute(dims); },
      [dims](const Tensor& g, const Shape& in_shape) {
        std::vector<int64_t> inverse(dims.size());
        for (std::size_t i = 0; i < dims.size(); ++i) {
          inverse[wrap_dim(dims[i], in_shape, "permute")] = static_cast<int64_t>(i);
        }
        return g.permute(inverse);
      });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return apply_view(
      "transpose", "TransposeBackward", x, [=](const Tensor& t) { return t.transpose(d0, d1); },
      [=](const Tensor& g, const Shape&) { return g.transpose(d0, d1); });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return apply_view(
      "slice", "SliceBackward", x, [=](const Tensor& t) { return t.slice(dim, start, end, step); },
      scatter_into_zeros([=](const Tensor& gx) { return gx.slice(dim, start, end, step); }));
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return apply_view(
      "select", "SelectBackward", x, [=](const Tensor& t) { return t.select(dim, index); },
      scatter_into_zeros([=](const Tensor& gx) { return gx.select(dim, index); }));
}

Tensor expand(const Tensor& x, const Shape& shape) {
  return apply_view(
      "expand", "ExpandBackward", x, [shape](const Tensor& t) { return t.expand(shape); },
      [](const Tensor& g, const Shape& in_shape) { return sum_to_shape(g, in_shape); });
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  return apply_view(
      "squeeze", "SqueezeBackward", x, [dim](const Tensor& t) { return t.squeeze(dim); },
      reshape_back);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return apply_view(
      "unsqueeze", "UnsqueezeBackward", x, [dim](const Tensor& t) { return t.unsqueeze(dim); },
      reshape_back);
}

Tensor contiguous(const Tensor& x) {
  // Never return the input itself: the output gets its own autograd identity (grad_fn).
  return apply_view(
      "contiguous", "ContiguousBackward", x,
      [](const Tensor& t) { return t.is_contiguous() ? t.view(t.shape()) : t.contiguous(); },
      [](const Tensor& g, const Shape&) { return g; });
}

}  // namespace tt
