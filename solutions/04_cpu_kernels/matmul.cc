// Chapter 04 exercises ch04.8 and ch04.9: the matmul front-end (validation, batch
// broadcasting, layout) and its backward. The autograd Function and the 1-D promotion of
// matmul() are given below them.
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"
#include "tt/ops_view.h"
#include "tt/todo.h"

namespace tt {

const char* matmul_kernel_name(MatmulAlgo algo) {
  switch (algo) {
    case MatmulAlgo::kDefault:
      return "matmul";
    case MatmulAlgo::kNaive:
      return "matmul_naive";
    case MatmulAlgo::kBlocked:
      return "matmul_blocked";
    case MatmulAlgo::kEigen:
      return "matmul_eigen";
    case MatmulAlgo::kFma:
      return "matmul_fma";
  }
  return "matmul";
}

namespace {

/// x itself when each of its matrices is row-major or column-major (the MatmulKernel
/// contract), otherwise a contiguous copy.
[[maybe_unused]] Tensor gemm_operand(const Tensor& x) {
  const bool row_major = x.stride(-1) == 1 && x.stride(-2) >= x.size(-1);
  const bool col_major = x.stride(-2) == 1 && x.stride(-1) >= x.size(-2);
  return row_major || col_major ? x : x.contiguous();
}

}  // namespace

Tensor matmul_forward(const Tensor& a, const Tensor& b, MatmulAlgo algo) {
#if TT_SOLUTION
  TT_CHECK(a.defined() && b.defined(), "matmul: undefined input");
  TT_CHECK(a.dim() >= 2 && b.dim() >= 2,
           "matmul_forward: expected operands with at least 2 dims, got ", a.describe(), " and ",
           b.describe());
  TT_CHECK(is_floating(a.dtype()) && a.dtype() == b.dtype() && a.device() == b.device(),
           "matmul: expected two float32 or two float64 tensors on one device, got ", a.describe(),
           " and ", b.describe());
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  TT_CHECK(b.size(-2) == K, "matmul: cannot multiply shapes ", a.shape(), " and ", b.shape(),
           ": a.size(-1) = ", K, " differs from b.size(-2) = ", b.size(-2), " (",
           dtype_name(a.dtype()), ")");
  if (b.dim() == 2 && a.dim() > 2) {
    // b is shared by every batch: fold a's batch dims into its rows, one [batch*M, K] GEMM.
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(N);
    return matmul_forward(a.reshape({-1, K}), b, algo).view(out_shape);
  }
  // The op label names both full shapes, so a batch mismatch says which product failed.
  const std::string op = detail::str("matmul of ", a.shape(), " and ", b.shape(), " (batch dims)");
  const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2), op.c_str());
  Shape a_shape = batch, b_shape = batch, out_shape = batch;
  a_shape.insert(a_shape.end(), {M, K});
  b_shape.insert(b_shape.end(), {K, N});
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = empty(out_shape, {a.dtype(), a.device()});
  call_kernel<MatmulKernel>(matmul_kernel_name(algo), a.device(), out,
                            gemm_operand(a).expand(a_shape), gemm_operand(b).expand(b_shape));
  return out;
#else
  TT_TODO(
      "ch04.8",
      "matmul_forward: [..., M, K] @ [..., K, N] -> new contiguous [..., M, N] with the batch dims broadcast, by the kernel of algo; throws naming both shapes and the dtype for fewer than 2 dims, a K mismatch, unbroadcastable batch dims, mixed dtypes or devices");
#endif
}

std::pair<Tensor, Tensor> matmul_backward(const Tensor& grad, const Tensor& a, const Tensor& b,
                                          MatmulAlgo algo, bool need_a, bool need_b) {
#if TT_SOLUTION
  Tensor ga, gb;
  if (need_a) {
    // dA = dC @ B^T: [batch, M, N] @ [.., N, K]; sum over the batch dims a was broadcast along.
    ga = sum_to_shape(matmul_forward(grad, b.transpose(-1, -2), algo), a.shape());
  }
  if (need_b) {
    const int64_t K = a.size(-1), N = b.size(-1);
    if (b.dim() == 2) {
      // A 2-D b is shared by a's batch: the sum over it is part of one GEMM, [K, batch*M] @
      // [batch*M, N].
      int64_t rows = 1;  // batch*M, counted: reshape cannot infer -1 when K or N is 0
      for (int64_t d = 0; d + 1 < a.dim(); ++d) rows *= a.size(d);
      const Tensor a2 = a.reshape({rows, K}), g2 = grad.reshape({rows, N});
      // A b stored transposed (a linear layer's W^T, W [N, K]) gets its gradient in the same
      // layout, as the transpose of (dC^T A) [N, K]: then W's gradient is contiguous and storing
      // it as .grad is a plain copy, not a transposing one (PyTorch's mm backward does the same).
      // Each element sums the same products over the same k order either way.
      const bool b_transposed = b.stride(0) == 1 && b.stride(1) >= K && N > 1;
      gb = b_transposed ? matmul_forward(g2.transpose(0, 1), a2, algo).transpose(0, 1)
                        : matmul_forward(a2.transpose(0, 1), g2, algo);
    } else {
      // dB = A^T @ dC, then sum over the batch dims b was broadcast along.
      gb = sum_to_shape(matmul_forward(a.transpose(-1, -2), grad, algo), b.shape());
    }
  }
  return {ga, gb};
#else
  TT_TODO(
      "ch04.9",
      "matmul_backward: {dL/da, dL/db} for C = a @ b (matmul_forward) and grad = dL/dC, each of its input's shape (summed over the batch dims it was broadcast along), computed only when need_a / need_b; a 2-D b stored transposed (a linear layer's W^T) gets its gradient in that layout");
#endif
}

namespace {

/// C = A @ B for operands with at least 2 dims.
class MatmulFn final : public autograd::Function {
 public:
  explicit MatmulFn(MatmulAlgo algo) : algo_(algo) {}
  std::string name() const override { return "MatmulBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    return {matmul_forward(in[0], in[1], algo_)};
  }
  void setup_context(const std::vector<Tensor>& in, const std::vector<Tensor>&) override {
    save_for_backward(in);
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& grad) override {
    auto [ga, gb] = matmul_backward(grad[0], saved_tensors()[0], saved_tensors()[1], algo_,
                                    needs_input_grad(0), needs_input_grad(1));
    return {ga, gb};
  }

 private:
  MatmulAlgo algo_;
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, MatmulAlgo algo) {
  TT_CHECK(a.defined() && b.defined(), "matmul: undefined input");
  TT_CHECK(a.dim() >= 1 && b.dim() >= 1,
           "matmul: 0-d operands cannot be multiplied: ", a.describe(), " and ", b.describe());
  // NumPy promotion of vectors: [K] @ [.., K, N] is a row vector, [.., M, K] @ [K] a column.
  if (a.dim() == 1 && b.dim() == 1) return reshape(matmul(unsqueeze(a, 0), b, algo), {});
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b, algo), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1), algo), -1);
  return autograd::Function::apply<MatmulFn>({a, b}, algo)[0];
}

}  // namespace tt
