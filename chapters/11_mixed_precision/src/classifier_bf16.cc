// The bfloat16 language-model head (tt/classifier_bf16.h): chapter 10's fused classifier, which
// handles bfloat16 x itself, and the CPU "matmul_lt_gemm" its chunk loop calls (the CUDA one is
// chapter 10's cuBLASLt runner).
#include "tt/classifier_bf16.h"

#include "tt/dispatcher.h"
#include "tt/fused_classifier.h"
#include "tt/linear_bf16.h"
#include "tt/lt_gemm.h"

namespace tt {

Tensor classifier_loss_bf16(const Tensor& x, const Tensor& wte, int64_t vocab_size,
                            const Tensor& targets) {
  TT_CHECK(x.defined() && wte.defined() && x.dtype() == DType::kBFloat16 &&
               wte.dtype() == DType::kFloat32,
           "classifier_loss_bf16: expected bfloat16 x and float32 wte, got x ",
           x.defined() ? x.describe() : std::string("undefined"), ", wte ",
           wte.defined() ? wte.describe() : std::string("undefined"));
  return fused_classifier_loss(x, wte, vocab_size, targets);
}

namespace cpu {

void matmul_lt_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                    double beta) {
  TT_CHECK(out.device().is_cpu(), "cpu::matmul_lt_gemm: expected CPU tensors, got ",
           out.describe());
  TT_CHECK(alpha == 1.0, "cpu::matmul_lt_gemm: alpha must be 1, got ", alpha);
  const LtGemm g = lt_rowmajor_gemm(out, a, b, beta);
  if (out.numel() == 0) return;
  TT_CHECK(run_lt(g), "cpu::matmul_lt_gemm: no algorithm for out ", out.describe(), " = a ",
           a.describe(), " b ", b.describe());
}

}  // namespace cpu

TT_REGISTER_KERNEL("matmul_lt_gemm", DeviceType::kCPU, cpu::matmul_lt_gemm);

}  // namespace tt
