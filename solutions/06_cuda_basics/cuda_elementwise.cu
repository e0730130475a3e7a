// Chapter 06 exercise ch06.2: the binary element-wise CUDA kernels ("add", "sub", "mul", "div"),
// a vectorized path for contiguous aligned operands and a strided path for everything else.
#include <cstdint>
#include <type_traits>

#include "tt/cuda_block_reduce.h"  // Pack, aligned16
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/ops.h"
#include "tt/strided_indexer.h"
#include "tt/todo.h"

namespace tt::cuda {

namespace {

struct AddOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return x + y;
  }
};
struct SubOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return x - y;
  }
};
struct MulOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    return x * y;
  }
};
struct DivOp {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      return y == 0 ? T(0) : x / y;  // integer division by zero is undefined behaviour in C++
    } else {
      return x / y;
    }
  }
};

// out[i] = op(a[i], b[i]) over contiguous, 16-byte-aligned operands: thread t of the grid
// handles packs t, t + stride, ... and then at most one of the n % V tail elements.
template <typename T, typename Op>
__global__ void binary_vec16_kernel(T* out, const T* a, const T* b, int64_t n, Op op) {
#if TT_SOLUTION
  constexpr int V = kPackSize<T>;
  const int64_t start = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t n_packs = n / V;
  const auto* pa = reinterpret_cast<const Pack<T>*>(a);
  const auto* pb = reinterpret_cast<const Pack<T>*>(b);
  auto* po = reinterpret_cast<Pack<T>*>(out);
  for (int64_t i = start; i < n_packs; i += stride) {
    const Pack<T> x = pa[i], y = pb[i];
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = op(x.v[k], y.v[k]);
    po[i] = r;
  }
  const int64_t tail = n_packs * V + start;
  if (tail < n) out[tail] = op(a[tail], b[tail]);
#else
  __trap();  // unreachable: the host wrapper throws TODO ch06.2 before launching
#endif
}

// out[i] = op(a[off_a(i)], b[off_b(i)]) for any strides (grid-stride loop; Index is uint32_t
// or int64_t, see dispatch_index_type).
template <typename T, typename Op, typename Index>
__global__ void binary_strided_kernel(T* out, const T* a, const T* b, Index n, StridedIndexer idx,
                                      Op op) {
#if TT_SOLUTION
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const StridedOffsets off = idx.offsets(i);
    out[i] = op(a[off.a], b[off.b]);
  }
#else
  __trap();  // unreachable: the host wrapper throws TODO ch06.2 before launching
#endif
}

// The host wrapper shared by the four ops: checks, device guard, path choice, launch.
template <typename Op>
void launch_binary(const char* name, const Tensor& out, const Tensor& a, const Tensor& b, Op op) {
  for (const Tensor* t : {&out, &a, &b}) {
    TT_CHECK(t->device() == out.device() && out.device().is_cuda() && t->dtype() == out.dtype() &&
                 t->shape() == out.shape(),
             "cuda::", name,
             ": expected out, a and b on one CUDA device with one dtype and shape, "
             "got out ",
             out.describe(), ", a ", a.describe(), ", b ", b.describe());
  }
  TT_CHECK(out.is_contiguous(), "cuda::", name, ": out must be contiguous, got strides ",
           out.strides());
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  dispatch_dtype(out.dtype(), name, [&]<typename T>() {
    T* o = static_cast<T*>(out.data_ptr());
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
#if TT_SOLUTION
    if (a.is_contiguous() && b.is_contiguous() && aligned16(o) && aligned16(pa) && aligned16(pb)) {
      const int64_t packs = n / (16 / static_cast<int64_t>(sizeof(T)));
      // At least one thread per tail element: the tail (< V elements) is handled by threads 0..
      const unsigned grid = grid_size(std::max<int64_t>(packs, 1), kBlockThreads, dev);
      binary_vec16_kernel<<<grid, kBlockThreads, 0, stream(dev)>>>(o, pa, pb, n, op);
      TT_CUDA_CHECK_LAUNCH("binary_vec16_kernel");
      return;
    }
    const StridedIndexer idx = make_strided_indexer(out.shape(), a.strides(), b.strides());
    dispatch_index_type(n, [&]<typename Index>() {
      binary_strided_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
          o, pa, pb, static_cast<Index>(n), idx, op);
      TT_CUDA_CHECK_LAUNCH("binary_strided_kernel");
    });
#else
    (void)o, (void)pa, (void)pb;
    TT_TODO("ch06.2",
            "launch_binary: out (contiguous) = op(a, b) element-wise for every dtype, any n and "
            "any strides of a and b (broadcast, transposed, misaligned views); contiguous "
            "16-byte-aligned operands read 16-byte packs; kernels on stream(dev), every launch "
            "checked");
#endif
  });
}

}  // namespace

void add(const Tensor& out, const Tensor& a, const Tensor& b) {
  launch_binary("add", out, a, b, AddOp{});
}
void sub(const Tensor& out, const Tensor& a, const Tensor& b) {
  launch_binary("sub", out, a, b, SubOp{});
}
void mul(const Tensor& out, const Tensor& a, const Tensor& b) {
  launch_binary("mul", out, a, b, MulOp{});
}
void div(const Tensor& out, const Tensor& a, const Tensor& b) {
  launch_binary("div", out, a, b, DivOp{});
}

TT_REGISTER_KERNEL("add", DeviceType::kCUDA, cuda::add);
TT_REGISTER_KERNEL("sub", DeviceType::kCUDA, cuda::sub);
TT_REGISTER_KERNEL("mul", DeviceType::kCUDA, cuda::mul);
TT_REGISTER_KERNEL("div", DeviceType::kCUDA, cuda::div);

}  // namespace tt::cuda
