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

/// A view op: forward = fwd(x) (no copy), backward = bwd(grad).
class ViewFn final : public autograd::Function {
 public:
  ViewFn(std::string name, TensorMap fwd, TensorMap bwd)
      : name_(std::move(name)), fwd_(std::move(fwd)), bwd_(std::move(bwd)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override { return {fwd_(in[0])}; }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override { return {bwd_(grad[0])}; }

 private:
  std::string name_;
  TensorMap fwd_;
  TensorMap bwd_;
};

Tensor apply_view(const char* name, const Tensor& x, TensorMap fwd, TensorMap bwd) {
  TT_CHECK(x.defined(), name, ": undefined input");
  return autograd::Function::apply<ViewFn>({x}, name, std::move(fwd), std::move(bwd))[0];
}

// Gradient of a view that picked part of x: zeros of x's shape with `part` of it set to grad.
TensorMap scatter_into_zeros(Shape shape, std::function<Tensor(const Tensor&)> part) {
  return [shape = std::move(shape), part = std::move(part)](const Tensor& g) {
    Tensor gx = zeros(shape, {g.dtype(), g.device()});
    part(gx).copy_(g);
    return gx;
  };
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  return apply_view(
      "ViewBackward", x, [shape](const Tensor& t) { return t.view(shape); },
      [s = x.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  return apply_view(
      "ReshapeBackward", x, [shape](const Tensor& t) { return t.reshape(shape); },
      [s = x.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return apply_view(
      "FlattenBackward", x, [=](const Tensor& t) { return t.flatten(start_dim, end_dim); },
      [s = x.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  return apply_view(
      "PermuteBackward", x, [dims](const Tensor& t) { return t.permute(dims); },
      [dims, n = x.dim()](const Tensor& g) {
        std::vector<int64_t> inverse(dims.size());
        for (std::size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim(dims[i], n, "permute")] = i;
        return g.permute(inverse);
      });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return apply_view(
      "TransposeBackward", x, [=](const Tensor& t) { return t.transpose(d0, d1); },
      [=](const Tensor& g) { return g.transpose(d0, d1); });
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return apply_view(
      "SliceBackward", x, [=](const Tensor& t) { return t.slice(dim, start, end, step); },
      scatter_into_zeros(x.shape(),
                         [=](const Tensor& gx) { return gx.slice(dim, start, end, step); }));
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return apply_view(
      "SelectBackward", x, [=](const Tensor& t) { return t.select(dim, index); },
      scatter_into_zeros(x.shape(), [=](const Tensor& gx) { return gx.select(dim, index); }));
}

Tensor expand(const Tensor& x, const Shape& shape) {
  return apply_view(
      "ExpandBackward", x, [shape](const Tensor& t) { return t.expand(shape); },
      [s = x.shape()](const Tensor& g) { return sum_to_shape(g, s); });
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  return apply_view(
      "SqueezeBackward", x, [dim](const Tensor& t) { return t.squeeze(dim); },
      [s = x.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return apply_view(
      "UnsqueezeBackward", x, [dim](const Tensor& t) { return t.unsqueeze(dim); },
      [s = x.shape()](const Tensor& g) { return g.reshape(s); });
}

Tensor contiguous(const Tensor& x) {
  // Never return the input itself: the output gets its own autograd identity (grad_fn).
  return apply_view(
      "ContiguousBackward", x,
      [](const Tensor& t) { return t.is_contiguous() ? t.view(t.shape()) : t.contiguous(); },
      [](const Tensor& g) { return g; });
}

}  // namespace tt
