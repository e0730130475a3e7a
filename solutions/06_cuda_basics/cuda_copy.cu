// Chapter 06 exercise ch06.5: the strided, dtype-converting copy kernel behind Tensor::copy_,
// contiguous(), to(dtype) and to(device) on CUDA tensors. fill is given.
#include <cmath>
#include <cstdint>

#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/strided_indexer.h"
#include "tt/todo.h"

namespace tt::cuda {

namespace {

// dst[off_dst(i)] = D(src[off_src(i)]) for every row-major index i: the indexer's operand a is
// dst, operand b is src (grid-stride loop; Index from dispatch_index_type).
template <typename D, typename S, typename Index>
__global__ void copy_strided_kernel(D* dst, const S* src, Index n, StridedIndexer idx) {
#if TT_SOLUTION
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const StridedOffsets off = idx.offsets(i);
    dst[off.a] = static_cast<D>(src[off.b]);
  }
#else
  __trap();  // unreachable: cuda::copy throws TODO ch06.5 before launching
#endif
}

// p[off(i)] = value (the indexer's operand a; contiguous tensors use a 1-d indexer).
template <typename T, typename Index>
__global__ void fill_kernel(T* p, Index n, StridedIndexer idx, T value) {
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    p[idx.offsets(i).a] = value;
  }
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  TT_CHECK(dst.shape() == src.shape(), "cuda::copy: shape mismatch, dst ", dst.shape(), " vs src ",
           src.shape());
  TT_CHECK(dst.device().is_cuda() && dst.device() == src.device(),
           "cuda::copy: expected two tensors on one CUDA device, got dst on ", dst.device(),
           " and src on ", src.device());
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    TT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(),
                                  static_cast<std::size_t>(n) * dtype_size(dst.dtype()),
                                  cudaMemcpyDeviceToDevice, stream(dev)));
    return;
  }
#if TT_SOLUTION
  const StridedIndexer idx = make_strided_indexer(dst.shape(), dst.strides(), src.strides());
  dispatch_dtype(dst.dtype(), "cuda::copy", [&]<typename D>() {
    dispatch_dtype(src.dtype(), "cuda::copy", [&]<typename S>() {
      dispatch_index_type(n, [&]<typename Index>() {
        copy_strided_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
            static_cast<D*>(dst.data_ptr()), static_cast<const S*>(src.data_ptr()),
            static_cast<Index>(n), idx);
        TT_CUDA_CHECK_LAUNCH("copy_strided_kernel");
      });
    });
  });
#else
  TT_TODO("ch06.5",
          "cuda::copy: dst[i] = src[i] converted to dst's dtype for every element, any dtype "
          "pair, any strides of dst and src (broadcast src included), any n; one kernel launch "
          "on stream(dev), checked");
#endif
}

void fill(const Tensor& dst, double value) {
  TT_CHECK(dst.device().is_cuda(), "cuda::fill: expected a CUDA tensor, got ", dst.describe());
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  if (value == 0.0 && !std::signbit(value) && dst.is_contiguous()) {  // all-zero bytes
    TT_CUDA_CHECK(cudaMemsetAsync(
        dst.data_ptr(), 0, static_cast<std::size_t>(n) * dtype_size(dst.dtype()), stream(dev)));
    return;
  }
  // A contiguous tensor gets a 1-d indexer (no divisions); a view its own strides.
  const StridedIndexer idx = dst.is_contiguous()
                                 ? contiguous_indexer(n)
                                 : make_strided_indexer(dst.shape(), dst.strides(), dst.strides());
  dispatch_dtype(dst.dtype(), "cuda::fill", [&]<typename T>() {
    dispatch_index_type(n, [&]<typename Index>() {
      fill_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
          static_cast<T*>(dst.data_ptr()), static_cast<Index>(n), idx, static_cast<T>(value));
      TT_CUDA_CHECK_LAUNCH("fill_kernel");
    });
  });
}

}  // namespace tt::cuda
