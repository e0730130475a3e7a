// The CUDA "cast" kernel: float32 <-> bfloat16 (and bfloat16 -> bfloat16) on one device, any
// strides, one launch. float32 -> bfloat16 is the GPU's own round-to-nearest-even instruction
// (__float2bfloat16_rn: cvt.rn.bf16.f32 on sm_80+); the tests compare it bit for bit with the
// CPU kernel's float_to_bfloat16_rne (exercise ch11.1).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "tt/bfloat16_cast.h"
#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/strided_indexer.h"

namespace tt::cuda {

namespace {

// The three conversions, on the raw 16-bit storage (tt::bfloat16's layout).
struct ToBFloat16 {
  __device__ uint16_t operator()(float v) const {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
struct ToFloat32 {
  __device__ float operator()(uint16_t b) const {
    return __uint_as_float(static_cast<uint32_t>(b) << 16);  // exact
  }
};
struct SameBits {
  __device__ uint16_t operator()(uint16_t b) const { return b; }
};

// dst[off_a(i)] = f(src[off_b(i)]) for every row-major index i (grid-stride loop).
template <typename D, typename S, typename F, typename Index>
__global__ void cast_kernel(D* dst, const S* src, Index n, StridedIndexer idx, F f) {
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const StridedOffsets off = idx.offsets(i);
    dst[off.a] = f(src[off.b]);
  }
}

template <typename D, typename S, typename F>
void launch(const Tensor& dst, const Tensor& src, F f) {
  const int64_t n = dst.numel();
  const int dev = dst.device().index;
  const StridedIndexer idx = make_strided_indexer(dst.shape(), dst.strides(), src.strides());
  dispatch_index_type(n, [&]<typename Index>() {
    cast_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        static_cast<D*>(dst.data_ptr()), static_cast<const S*>(src.data_ptr()),
        static_cast<Index>(n), idx, f);
    TT_CUDA_CHECK_LAUNCH("cast_kernel");
  });
}

}  // namespace

void cast(const Tensor& dst, const Tensor& src) {
  constexpr const char* kOp = "cuda::cast";
  TT_CHECK(dst.shape() == src.shape() && dst.device().is_cuda() && dst.device() == src.device(),
           kOp, ": expected two tensors of one shape on one CUDA device, got dst ", dst.describe(),
           " and src ", src.describe());
  const DType dt = dst.dtype(), st = src.dtype();
  const bool to_bf16 = dt == DType::kBFloat16 && st == DType::kFloat32;
  const bool to_f32 = dt == DType::kFloat32 && st == DType::kBFloat16;
  const bool same = dt == DType::kBFloat16 && st == DType::kBFloat16;
  TT_CHECK(to_bf16 || to_f32 || same, kOp, ": converts between float32 and bfloat16 only, got ",
           dtype_name(st), " -> ", dtype_name(dt), " (dst ", dst.describe(), ", src ",
           src.describe(), ")");
  if (dst.numel() == 0) return;
  DeviceGuard guard(dst.device().index);
  if (to_bf16) {
    launch<uint16_t, float>(dst, src, ToBFloat16{});
  } else if (to_f32) {
    launch<float, uint16_t>(dst, src, ToFloat32{});
  } else {
    launch<uint16_t, uint16_t>(dst, src, SameBits{});
  }
}

TT_REGISTER_KERNEL("cast", DeviceType::kCUDA, cuda::cast);

}  // namespace tt::cuda
