// Chapter 02 exercises ch02.3 and ch02.4: the first CPU kernels and the op front-end.
#include <cstdint>
#include <type_traits>

#include "tt/cpu_loops.h"
#include "tt/ops.h"
#include "tt/todo.h"

namespace tt {

namespace cpu {

namespace {
// The body shared by every binary kernel: pick the element type, then loop. `f` is a generic
// lambda applied to two elements of type T.
template <typename F>
void binary_kernel(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, F f) {
#if TT_SOLUTION
  dispatch_dtype(out.dtype(), op, [&]<typename T>() {
    cpu_binary_loop<T>(out, a, b, [&](T x, T y) { return static_cast<T>(f(x, y)); });
  });
#else
  TT_TODO(
      "ch02.3",
      "binary_kernel: out[i] = f(a[i], b[i]) for every element, for float32, float64 and int64, with a and b of out's shape in any layout (contiguous, transposed, sliced, stride 0)");
#endif
}
}  // namespace

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  binary_kernel("add", out, a, b, [](auto x, auto y) { return x + y; });
}

void sub(const Tensor& out, const Tensor& a, const Tensor& b) {
  binary_kernel("sub", out, a, b, [](auto x, auto y) { return x - y; });
}

void mul(const Tensor& out, const Tensor& a, const Tensor& b) {
  binary_kernel("mul", out, a, b, [](auto x, auto y) { return x * y; });
}

void div(const Tensor& out, const Tensor& a, const Tensor& b) {
  binary_kernel("div", out, a, b, [](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(y)>) {
      TT_CHECK(y != 0, "div: integer division by zero (int64)");
    }
    return x / y;
  });
}

}  // namespace cpu

TT_REGISTER_KERNEL("add", DeviceType::kCPU, cpu::add);
TT_REGISTER_KERNEL("sub", DeviceType::kCPU, cpu::sub);
TT_REGISTER_KERNEL("mul", DeviceType::kCPU, cpu::mul);
TT_REGISTER_KERNEL("div", DeviceType::kCPU, cpu::div);

Tensor binary_op(const std::string& op, const Tensor& a, const Tensor& b) {
#if TT_SOLUTION
  TT_CHECK(a.defined() && b.defined(), op, ": undefined input");
  TT_CHECK(a.device() == b.device(), op, ": inputs are on different devices: ", a.describe(),
           " and ", b.describe());
  TT_CHECK(a.dtype() == b.dtype(), op, ": inputs have different dtypes: ", a.describe(), " and ",
           b.describe());
  TT_CHECK(a.shape() == b.shape(), op, ": shapes ", a.shape(), " and ", b.shape(),
           " differ (chapter 04 adds broadcasting)");
  Tensor out = empty(a.shape(), {a.dtype(), a.device()});
  call_kernel<BinaryKernel>(op, a.device(), out, a, b);
  return out;
#else
  TT_TODO(
      "ch02.4",
      "binary_op: a new tensor op(a, b) computed by the kernel registered for (op, a's device); throws naming op and both tensors when an input is undefined or they differ in device, dtype or shape");
#endif
}

}  // namespace tt
