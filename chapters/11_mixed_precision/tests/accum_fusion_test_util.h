// Gradient-accumulation fusion of chapter 11's bfloat16 linear layers (CPU and CUDA): several
// backwards accumulate W's gradient; with fusion on, the weight-gradient GEMM adds into W's
// .grad (beta = 1) and the engine adds nothing of W's shape; the accumulated gradients must
// equal those of fusion off bit for bit (the epilogue rounds acc + .grad once, as the separate
// add does, with the same GEMM algorithm, run in one pass).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "../../06_cuda_basics/tests/ch06_test_util.h"
#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/layers.h"
#include "tt/testing.h"

namespace tt::test11 {

/// Counts the dispatched "add" kernels whose output has a given shape (the engine's in-place
/// accumulation of a gradient of that shape into .grad) while installed.
class AddCounter final : public test06::KernelCallCounter {
 public:
  explicit AddCounter(Shape shape) : KernelCallCounter("add", std::move(shape)) {}
};

/// A linear layer's forward, e.g. linear_bf16.
using LinearForward = std::function<Tensor(const Tensor& x, nn::Linear& layer)>;

/// What accumulate_linear leaves: the accumulated gradients and the engine's adds into W.grad.
struct AccumulatedLinear {
  Tensor w_grad;    ///< W's .grad after every backward
  Tensor b_grad;    ///< b's .grad after every backward
  int weight_adds;  ///< "add" kernels of W's shape [N, K] during the backwards
};

/// `micro` forwards and backwards of `forward` on a seeded Linear(K, N) on `device`, inputs x
/// [M, K] float32 and output gradients of y's dtype, with gradient-accumulation fusion on or off.
inline AccumulatedLinear accumulate_linear(const LinearForward& forward, Device device, int64_t M,
                                           int64_t K, int64_t N, int micro, bool fusion,
                                           uint64_t seed) {
  autograd::GradAccumulationFusionGuard guard(fusion);
  Generator gen(seed);
  nn::Linear layer(K, N, true, gen);
  layer.to(device);
  AddCounter adds({N, K});
  for (int m = 0; m < micro; ++m) {
    Generator gx(seed + 1 + 2 * m), gy(seed + 2 + 2 * m);
    const Tensor x = randn({M, K}, gx).to(device);
    const Tensor y = forward(x, layer);
    autograd::backward(y, randn({M, N}, gy).to(y.dtype()).to(device));
  }
  return {layer.weight.grad(), layer.bias.grad(), adds.count};
}

/// a and b hold the same float32 bits (first difference and the largest |a - b| otherwise).
inline ::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "undefined or different shapes";
  }
  const std::vector<float> va = a.to(Device::cpu()).contiguous().to_vector<float>();
  const std::vector<float> vb = b.to(Device::cpu()).contiguous().to_vector<float>();
  int64_t first = -1, n = 0;
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    if (std::memcmp(&va[i], &vb[i], sizeof(float)) == 0) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++n;
    worst = std::max(worst, std::fabs(static_cast<double>(va[i]) - vb[i]));
  }
  if (n == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << n << " of " << va.size() << " elements of " << a.describe() << " differ; first at "
         << first << ": " << va[first] << " vs " << vb[first] << "; max |diff| " << worst;
}

/// Fused and unfused accumulation of `micro` backwards give the same W and b gradients bit for
/// bit; unfused, the engine adds micro - 1 times into W.grad (the first gradient is stored as a
/// copy); fused, with `must_fuse`, never (the GEMM did; without it the GEMM may decline a
/// problem its algorithm would split, see LtGemm::one_pass_only).
inline void check_accumulation_fusion(const LinearForward& forward, Device device, int64_t M,
                                      int64_t K, int64_t N, uint64_t seed, bool must_fuse = true,
                                      int micro = 3) {
  SCOPED_TRACE(::testing::Message()
               << "M " << M << " K " << K << " N " << N << " on " << device.str());
  const AccumulatedLinear off = accumulate_linear(forward, device, M, K, N, micro, false, seed);
  const AccumulatedLinear on = accumulate_linear(forward, device, M, K, N, micro, true, seed);
  EXPECT_EQ(off.weight_adds, micro - 1);
  if (must_fuse) {
    EXPECT_EQ(on.weight_adds, 0) << "the weight-gradient GEMM should accumulate into .grad";
  }
  std::printf("[ fusion ] M %lld K %lld N %lld on %s: engine adds into W.grad %d fused, %d not\n",
              static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N),
              device.str().c_str(), on.weight_adds, off.weight_adds);
  EXPECT_TRUE(same_bits(on.w_grad, off.w_grad)) << "W.grad";
  EXPECT_TRUE(same_bits(on.b_grad, off.b_grad)) << "b.grad";
}

}  // namespace tt::test11
