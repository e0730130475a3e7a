// The CUDA kernel "matmul_lt_dgrad" (tt/linear_bf16.h): the descriptor of exercise ch11.2 run
// through chapter 10's cuBLASLt runner. Host code only, compiled in CUDA builds.
#if TT_WITH_CUDA
#include "tt/dispatcher.h"
#include "tt/linear_bf16.h"

namespace tt::cuda {

bool matmul_lt_dgrad(const Tensor& dx, const Tensor& dy, const Tensor& w) {
  TT_CHECK(dx.device().is_cuda(), "cuda::matmul_lt_dgrad: expected CUDA tensors, got ",
           dx.describe());
  return run_lt(checked_lt_linear_dgrad_gemm("cuda::matmul_lt_dgrad", dx, dy, w),
                dx.device().index);
}

TT_REGISTER_KERNEL("matmul_lt_dgrad", DeviceType::kCUDA, matmul_lt_dgrad);

}  // namespace tt::cuda

#endif  // TT_WITH_CUDA
