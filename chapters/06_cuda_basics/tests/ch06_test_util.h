// Helpers shared by the chapter 06 tests: seeded inputs, CPU<->CUDA parity checks, and the
// fixture every CUDA test derives from.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/testing.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#endif

namespace tt::test06 {

/// Counts the dispatched kernels of one op whose first tensor has a given shape, while installed
/// as the kernel observer (e.g. the engine's "add" of a gradient into a weight's .grad). The
/// observer installed before it still sees every call, so counters nest.
class KernelCallCounter : public KernelObserver {
 public:
  KernelCallCounter(std::string op, Shape shape)
      : op_(std::move(op)), shape_(std::move(shape)), prev_(set_kernel_observer(this)) {}
  ~KernelCallCounter() override { set_kernel_observer(prev_); }
  KernelCallCounter(const KernelCallCounter&) = delete;
  KernelCallCounter& operator=(const KernelCallCounter&) = delete;
  std::uint64_t on_kernel_begin(const KernelCall& call) override {
    if (call.op == op_ && !call.tensors.empty() && call.tensors[0].shape == shape_) ++count;
    return prev_ != nullptr ? prev_->on_kernel_begin(call) : 0;
  }
  void on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept override {
    if (prev_ != nullptr) prev_->on_kernel_end(call, token);
  }
  int count = 0;  ///< matching calls so far

 private:
  std::string op_;
  Shape shape_;
  KernelObserver* prev_;
};

/// The sizes every element-wise test runs: one element, a warp multiple and its neighbours, more
/// than a block, and enough for several grid-stride iterations.
inline const std::vector<int64_t> kOddSizes = {1, 127, 128, 129, 4097, (1 << 20) + 3};

/// Seeded values of `shape` and `dtype`: N(0, 1) for floats, integers in [-100, 100] for
/// int64 (with `nonzero`, never 0: divisors). CPU, contiguous, built with given code only.
inline Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, bool nonzero = false) {
  Generator gen(seed);
  const int64_t n = shape_numel(shape);
  if (dtype == DType::kInt64) {
    std::vector<int64_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) {
      do {
        x = static_cast<int64_t>(gen.next_u64() % 201) - 100;
      } while (nonzero && x == 0);
    }
    return from_vector(v, shape);
  }
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    x = gen.next_normal();
    if (nonzero && std::abs(x) < 1e-3) x = 1.0;  // keep divisions well conditioned
  }
  Tensor t = from_vector(v, shape);
  return dtype == DType::kFloat64 ? t : t.to(dtype);
}

/// A view of `t` with the given geometry, sharing its storage (given code only: no view
/// exercises of chapter 01 are needed to build it).
inline Tensor strided_view(const Tensor& t, Shape shape, Strides strides, int64_t offset = 0) {
  return Tensor(t.storage(), std::move(shape), std::move(strides), t.offset() + offset, t.dtype());
}

/// `t` on the CPU (the comparison helpers convert dtypes, which must not run a CUDA kernel).
inline Tensor cpu(const Tensor& t) {
  return t.to(Device::cpu());
}

/// Exact equality of two tensors (shape, dtype and every element), with the first difference
/// in the message.
inline ::testing::AssertionResult same_values(const Tensor& actual, const Tensor& expected) {
  return ::tt::testing::tensor_near("actual", "expected", "0", "0", cpu(actual), cpu(expected), 0.0,
                                    0.0);
}

/// A named way of making an operand from a contiguous base tensor (on either device).
struct Layout {
  std::string name;                           ///< for failure messages
  Shape base_shape;                           ///< shape of the contiguous base
  std::function<Tensor(const Tensor&)> view;  ///< base -> the operand (a view)
};

/// Fixture of every test that needs a GPU: skips without one; kernel tests run with the caching
/// allocator off, so that they do not depend on exercise ch06.4 and compute-sanitizer sees the
/// exact bounds of every tensor.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TT_SKIP_IF_NO_CUDA();
#if TT_WITH_CUDA
    was_caching_ = cuda::caching_enabled();
    cuda::set_caching_enabled(use_caching());
#endif
  }
  void TearDown() override {
#if TT_WITH_CUDA
    if (cuda_device_count() > 0) {
      cuda::synchronize(0);  // surface asynchronous kernel errors inside the test that caused them
      cuda::set_caching_enabled(was_caching_);
    }
#endif
  }
  /// Whether this fixture's tests allocate through the caching allocator.
  virtual bool use_caching() const {
    return false;
  }

 private:
#if TT_WITH_CUDA
  bool was_caching_ = true;
#endif
};

}  // namespace tt::test06
