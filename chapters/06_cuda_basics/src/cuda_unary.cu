// Element-wise CUDA kernels of chapter 04's ops (given code): the unary kernels ("neg", "exp",
// "log", "sqrt", "tanh"), the tensor-scalar kernels ("add_scalar", "mul_scalar", "pow_scalar"),
// GELU ("gelu_forward", "gelu_backward") and masked fill ("masked_fill_forward",
// "masked_fill_backward"), under the same names and signatures as the CPU kernels.
//
// Two launch paths, as for the binary kernels of exercise ch06.2: contiguous 16-byte-aligned
// unary operands are read and written as Pack<T>; everything else goes through a
// StridedIndexer (two operands: the second may have another dtype, e.g. the int64 mask).
#include <cmath>
#include <cstdint>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/cuda_gelu.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/strided_indexer.h"

namespace tt::cuda {

namespace {

// ----- element functions ---------------------------------------------------------------------

enum class Math { kNeg, kExp, kLog, kSqrt, kTanh };

// The unary function K of one element.
template <Math K>
struct MathFn {
  template <typename T>
  __device__ T operator()(T x) const {
    if constexpr (K == Math::kNeg) {
      return -x;
    } else if constexpr (K == Math::kExp) {
      return std::exp(x);
    } else if constexpr (K == Math::kLog) {
      return std::log(x);
    } else if constexpr (K == Math::kSqrt) {
      return std::sqrt(x);
    } else {
      return std::tanh(x);
    }
  }
};
template <typename T>
struct AddScalarFn {
  T s;
  __device__ T operator()(T x) const { return x + s; }
};
template <typename T>
struct MulScalarFn {
  T s;
  __device__ T operator()(T x) const { return x * s; }
};
template <typename T>
struct PowScalarFn {
  T s;
  __device__ T operator()(T x) const { return std::pow(x, s); }
};
struct SquareFn {  // pow_scalar with s == 2, as the CPU kernel: one multiply, exact
  template <typename T>
  __device__ T operator()(T x) const {
    return x * x;
  }
};

// out = mask != 0 ? value : x.
template <typename T>
struct MaskedFillFn {
  T value;
  __device__ T operator()(T x, int64_t mask) const { return mask != 0 ? value : x; }
};

// ----- kernels ---------------------------------------------------------------------------------

// out[i] = f(a[i]) over contiguous, 16-byte-aligned operands: packs in a grid-stride loop, then
// at most one of the n % V tail elements per thread.
template <typename T, typename F>
__global__ void unary_vec16_kernel(T* out, const T* a, int64_t n, F f) {
  constexpr int V = kPackSize<T>;
  const int64_t start = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const auto* pa = reinterpret_cast<const Pack<T>*>(a);
  auto* po = reinterpret_cast<Pack<T>*>(out);
  for (int64_t q = start; q < n / V; q += stride) {
    Pack<T> p = pa[q];
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = f(p.v[k]);
    po[q] = p;
  }
  const int64_t tail = n / V * V + start;
  if (tail < n) out[tail] = f(a[tail]);
}

// out[i] = f(a[off_a(i)]), or f(a[off_a(i)], b[off_b(i)]) when B is not void; `out` contiguous.
template <typename T, typename B, typename F, typename Index>
__global__ void map_strided_kernel(T* out, const T* a, const B* b, Index n, StridedIndexer idx,
                                   F f) {
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const StridedOffsets off = idx.offsets(i);
    if constexpr (std::is_void_v<B>) {
      out[i] = f(a[off.a]);
    } else {
      out[i] = f(a[off.a], b[off.b]);
    }
  }
}

// ----- host side -------------------------------------------------------------------------------

// Checks that `out` is contiguous and that every operand has its shape and device (and, for
// `same_dtype`, its dtype).
void check_map(const char* op, const Tensor& out, std::initializer_list<const Tensor*> same_dtype,
               const Tensor* other = nullptr) {
  TT_CHECK(out.device().is_cuda() && out.is_contiguous(), "cuda::", op,
           ": out must be a contiguous CUDA tensor, got ", out.describe());
  for (const Tensor* t : same_dtype) {
    TT_CHECK(t->device() == out.device() && t->dtype() == out.dtype() && t->shape() == out.shape(),
             "cuda::", op, ": expected an operand like out ", out.describe(), ", got ",
             t->describe());
  }
  if (other != nullptr) {
    TT_CHECK(other->device() == out.device() && other->shape() == out.shape(), "cuda::", op,
             ": expected an operand of out's shape and device ", out.describe(), ", got ",
             other->describe());
  }
}

// out = f(a) elementwise (T the dtype of both).
template <typename T, typename F>
void unary_map(const char* op, const Tensor& out, const Tensor& a, F f) {
  check_map(op, out, {&a});
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  T* o = out.data<T>();
  const T* pa = static_cast<const T*>(a.data_ptr());
  if (a.is_contiguous() && aligned16(o) && aligned16(pa)) {
    const int64_t packs = std::max<int64_t>(1, n / kPackSize<T>);
    unary_vec16_kernel<<<grid_size(packs, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        o, pa, n, f);
    TT_CUDA_CHECK_LAUNCH("unary_vec16_kernel");
    return;
  }
  const StridedIndexer idx = make_strided_indexer(out.shape(), a.strides(), a.strides());
  dispatch_index_type(n, [&]<typename Index>() {
    map_strided_kernel<T, void>
        <<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
            o, pa, nullptr, static_cast<Index>(n), idx, f);
    TT_CUDA_CHECK_LAUNCH("map_strided_kernel");
  });
}

// out = f(a, b) elementwise: a of out's dtype, b of dtype B; any strides.
template <typename T, typename B, typename F>
void binary_map(const char* op, const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  check_map(op, out, {&a}, &b);
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  const StridedIndexer idx = make_strided_indexer(out.shape(), a.strides(), b.strides());
  dispatch_index_type(n, [&]<typename Index>() {
    map_strided_kernel<<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        out.data<T>(), static_cast<const T*>(a.data_ptr()), static_cast<const B*>(b.data_ptr()),
        static_cast<Index>(n), idx, f);
    TT_CUDA_CHECK_LAUNCH("map_strided_kernel");
  });
}

template <typename F>
void floating_unary(const char* op, const Tensor& out, const Tensor& a, F f) {
  dispatch_floating(a.dtype(), op, [&]<typename T>() { unary_map<T>(op, out, a, f); });
}

}  // namespace

void neg(const Tensor& out, const Tensor& a) {
  dispatch_dtype(a.dtype(), "neg",
                 [&]<typename T>() { unary_map<T>("neg", out, a, MathFn<Math::kNeg>{}); });
}
void exp(const Tensor& out, const Tensor& a) {
  floating_unary("exp", out, a, MathFn<Math::kExp>{});
}
void log(const Tensor& out, const Tensor& a) {
  floating_unary("log", out, a, MathFn<Math::kLog>{});
}
void sqrt(const Tensor& out, const Tensor& a) {
  floating_unary("sqrt", out, a, MathFn<Math::kSqrt>{});
}
void tanh(const Tensor& out, const Tensor& a) {
  floating_unary("tanh", out, a, MathFn<Math::kTanh>{});
}

void add_scalar(const Tensor& out, const Tensor& a, double s) {
  dispatch_floating(a.dtype(), "add_scalar", [&]<typename T>() {
    unary_map<T>("add_scalar", out, a, AddScalarFn<T>{static_cast<T>(s)});
  });
}
void mul_scalar(const Tensor& out, const Tensor& a, double s) {
  dispatch_floating(a.dtype(), "mul_scalar", [&]<typename T>() {
    unary_map<T>("mul_scalar", out, a, MulScalarFn<T>{static_cast<T>(s)});
  });
}
void pow_scalar(const Tensor& out, const Tensor& a, double s) {
  dispatch_floating(a.dtype(), "pow_scalar", [&]<typename T>() {
    if (s == 2.0) {
      unary_map<T>("pow_scalar", out, a, SquareFn{});
    } else {
      unary_map<T>("pow_scalar", out, a, PowScalarFn<T>{static_cast<T>(s)});
    }
  });
}

void gelu_forward(const Tensor& out, const Tensor& x) {
  floating_unary("gelu_forward", out, x, GeluFn{});
}
void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
  dispatch_floating(x.dtype(), "gelu_backward", [&]<typename T>() {
    check_map("gelu_backward", dx, {&x});
    binary_map<T, T>("gelu_backward", dx, dout, x, GeluBackwardFn{});
  });
}

void masked_fill_forward(const Tensor& out, const Tensor& x, const Tensor& mask, double value) {
  TT_CHECK(mask.dtype() == DType::kInt64, "cuda::masked_fill_forward: mask must be int64, got ",
           mask.describe());
  dispatch_floating(x.dtype(), "masked_fill_forward", [&]<typename T>() {
    binary_map<T, int64_t>("masked_fill_forward", out, x, mask,
                           MaskedFillFn<T>{static_cast<T>(value)});
  });
}
void masked_fill_backward(const Tensor& dx, const Tensor& dout, const Tensor& mask) {
  TT_CHECK(mask.dtype() == DType::kInt64, "cuda::masked_fill_backward: mask must be int64, got ",
           mask.describe());
  dispatch_floating(dout.dtype(), "masked_fill_backward", [&]<typename T>() {
    binary_map<T, int64_t>("masked_fill_backward", dx, dout, mask, MaskedFillFn<T>{T(0)});
  });
}

TT_REGISTER_KERNEL("neg", DeviceType::kCUDA, cuda::neg);
TT_REGISTER_KERNEL("exp", DeviceType::kCUDA, cuda::exp);
TT_REGISTER_KERNEL("log", DeviceType::kCUDA, cuda::log);
TT_REGISTER_KERNEL("sqrt", DeviceType::kCUDA, cuda::sqrt);
TT_REGISTER_KERNEL("tanh", DeviceType::kCUDA, cuda::tanh);
TT_REGISTER_KERNEL("add_scalar", DeviceType::kCUDA, cuda::add_scalar);
TT_REGISTER_KERNEL("mul_scalar", DeviceType::kCUDA, cuda::mul_scalar);
TT_REGISTER_KERNEL("pow_scalar", DeviceType::kCUDA, cuda::pow_scalar);
TT_REGISTER_KERNEL("gelu_forward", DeviceType::kCUDA, cuda::gelu_forward);
TT_REGISTER_KERNEL("gelu_backward", DeviceType::kCUDA, cuda::gelu_backward);
TT_REGISTER_KERNEL("masked_fill_forward", DeviceType::kCUDA, cuda::masked_fill_forward);
TT_REGISTER_KERNEL("masked_fill_backward", DeviceType::kCUDA, cuda::masked_fill_backward);

}  // namespace tt::cuda
