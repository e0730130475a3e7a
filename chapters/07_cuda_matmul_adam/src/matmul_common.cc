// The parts of chapter 07's matmul that every build has (no CUDA needed): the TF32 switch and
// the helpers around the GEMM plan of exercise ch07.1.
#include <atomic>

#include "tt/cuda_matmul.h"

namespace tt::cuda {
namespace {
std::atomic<bool>& tf32_flag() {
  static std::atomic<bool> flag{false};  // PyTorch's default for matmul since 1.12
  return flag;
}
const char* op_name(GemmOp op) {
  return op == GemmOp::kN ? "N" : "T";
}
}  // namespace

void set_allow_tf32(bool allow) {
  tf32_flag().store(allow);
}

bool allow_tf32() {
  return tf32_flag().load();
}

MatrixLayout matrix_layout(const Tensor& t) {
  TT_CHECK(t.dim() >= 2, "matrix_layout: expected at least 2 dims, got ", t.describe());
  return {t.size(-2), t.size(-1), t.stride(-2), t.stride(-1)};
}

std::string to_string(const GemmPlan& p) {
  return tt::detail::str("transa=", op_name(p.transa), " transb=", op_name(p.transb), " m=", p.m,
                         " n=", p.n, " k=", p.k, " lda=", p.lda, " ldb=", p.ldb, " ldc=", p.ldc);
}

}  // namespace tt::cuda
