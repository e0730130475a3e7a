// ============================================================================================
// YOUR EXERCISE FILE for chapter 04_cpu_kernels. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch04
// Generated from solutions/04_cpu_kernels/matmul.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  TT_TODO(
      "ch04.8",
      "matmul_forward: [..., M, K] @ [..., K, N] -> new contiguous [..., M, N] with the batch dims broadcast, by the kernel of algo; throws naming both shapes and the dtype for fewer than 2 dims, a K mismatch, unbroadcastable batch dims, mixed dtypes or devices");
}

std::pair<Tensor, Tensor> matmul_backward(const Tensor& grad, const Tensor& a, const Tensor& b,
                                          MatmulAlgo algo, bool need_a, bool need_b) {
  TT_TODO(
      "ch04.9",
      "matmul_backward: {dL/da, dL/db} for C = a @ b (matmul_forward) and grad = dL/dC, each of its input's shape (summed over the batch dims it was broadcast along), computed only when need_a / need_b; a 2-D b stored transposed (a linear layer's W^T) gets its gradient in that layout");
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
