// ============================================================================================
// YOUR EXERCISE FILE for chapter 02_dispatcher. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch02
// Generated from solutions/02_dispatcher/binary_ops.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 02 exercises ch02.3 and ch02.4: the first CPU kernels and the op front-end.
#include <cstdint>

#include "tt/cpu_loops.h"
#include "tt/ops.h"
#include "tt/todo.h"

namespace tt {

namespace cpu {

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO("ch02.3", "cpu::add: dispatch_dtype on out.dtype(), then cpu_binary_loop<T> with a lambda x + y");
}

void sub(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO("ch02.3", "cpu::sub: like cpu::add with x - y");
}

void mul(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO("ch02.3", "cpu::mul: like cpu::add with x * y");
}

void div(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO("ch02.3", "cpu::div: like cpu::add with x / y; for int64 throw on division by zero");
}

}  // namespace cpu

TT_REGISTER_KERNEL("add", DeviceType::kCPU, cpu::add);
TT_REGISTER_KERNEL("sub", DeviceType::kCPU, cpu::sub);
TT_REGISTER_KERNEL("mul", DeviceType::kCPU, cpu::mul);
TT_REGISTER_KERNEL("div", DeviceType::kCPU, cpu::div);

Tensor binary_op(const std::string& op, const Tensor& a, const Tensor& b) {
  TT_TODO("ch02.4", "binary_op: check device, dtype and shape (name them in the error), allocate out, call_kernel<BinaryKernel>");
}

}  // namespace tt
