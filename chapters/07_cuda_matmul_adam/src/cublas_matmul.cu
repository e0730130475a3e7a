// Chapter 07: the CUDA "matmul" kernel on cuBLAS. The row-major trick (which operand goes
// first, op flags, leading dimensions) is planned by plan_row_major_gemm (exercise ch07.1);
// this file owns the cuBLAS handles, the TF32 switch's effect and the batch loop. "gemm" is the
// same call with BLAS's alpha and beta and an out whose rows may be padded (chapter 10).
#include <dlfcn.h>

#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "tt/cuda_blas.h"
#include "tt/cuda_device.h"
#include "tt/cuda_matmul.h"
#include "tt/dispatcher.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"

namespace tt::cuda {

// ----- the libraries, opened on first use -------------------------------------------------------

namespace {

// A library opened once with dlopen and never closed (its functions may be called until exit).
// TT_CUBLAS_SONAME etc. come from chapters/CMakeLists.txt: the soname of the toolkit the build
// was configured with, and the same file in that toolkit's library directory.
struct BlasLibraryFiles {
  const char* what;
  const char* soname;
  const char* path;
};

void* open_blas_library(BlasLibrary library) {
  const BlasLibraryFiles files =
      library == BlasLibrary::kCublas
          ? BlasLibraryFiles{"cuBLAS", TT_CUBLAS_SONAME, TT_CUBLAS_PATH}
          : BlasLibraryFiles{"cuBLASLt", TT_CUBLASLT_SONAME, TT_CUBLASLT_PATH};
  std::string tried;
  for (const char* file : {files.soname, files.path}) {
    if (void* handle = dlopen(file, RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* why = dlerror();
    tried += tt::detail::str("\n  ", file, ": ", why != nullptr ? why : "unknown error");
  }
  throw Error(tt::detail::str("cuda: cannot open ", files.what,
                              " (the CUDA GEMMs need it; is the CUDA toolkit's library directory "
                              "on the loader's path?). Tried:",
                              tried));
}

}  // namespace

void* blas_symbol(BlasLibrary library, const char* name) {
  // Function-local statics: opened on the first call, thread-safe; an exception leaves the
  // static uninitialized, so a later call tries again.
  static void* const cublas = open_blas_library(BlasLibrary::kCublas);
  void* handle = cublas;
  if (library == BlasLibrary::kCublasLt) {
    static void* const cublaslt = open_blas_library(BlasLibrary::kCublasLt);
    handle = cublaslt;
  }
  (void)dlerror();
  void* fn = dlsym(handle, name);
  if (fn == nullptr) {
    const char* why = dlerror();
    throw Error(tt::detail::str(
        "cuda: ", library == BlasLibrary::kCublas ? TT_CUBLAS_SONAME : TT_CUBLASLT_SONAME,
        " has no function ", name, ": ", why != nullptr ? why : "null"));
  }
  return fn;
}

// ----- errors and handles ----------------------------------------------------------------------

std::string cublas_error_message(cublasStatus_t status, const char* expr, const char* file,
                                 int line) {
  return tt::detail::str("cuBLAS error ", TT_CUBLAS(cublasGetStatusName)(status), " (",
                         TT_CUBLAS(cublasGetStatusString)(status), ") in ", expr, " at ", file, ":",
                         line);
}

namespace detail {
void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  throw Error(cublas_error_message(status, expr, file, line));
}
}  // namespace detail

namespace {

// One handle per device, created lazily. Destroyed by the destructor of the function-local
// static below, which is constructed only after the CUDA runtime is initialized (cublas_handle
// switches devices first), so it is destroyed before the runtime's own exit handler runs.
class HandlePool {
 public:
  HandlePool() : handles_(static_cast<std::size_t>(device_count()), nullptr) {}
  ~HandlePool() {
    int device = 0;
    // If the runtime is already unloading, the driver frees everything with the process.
    if (cudaGetDevice(&device) != cudaSuccess) return;
    for (std::size_t i = 0; i < handles_.size(); ++i) {
      if (handles_[i] == nullptr) continue;
      (void)cudaSetDevice(static_cast<int>(i));
      (void)TT_CUBLAS(cublasDestroy)(handles_[i]);
    }
    (void)cudaSetDevice(device);
  }
  HandlePool(const HandlePool&) = delete;
  HandlePool& operator=(const HandlePool&) = delete;

  cublasHandle_t get(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    cublasHandle_t& h = handles_[static_cast<std::size_t>(index)];
    if (h == nullptr) TT_CUBLAS_CHECK(TT_CUBLAS(cublasCreate)(&h));
    return h;
  }

 private:
  std::mutex mutex_;
  std::vector<cublasHandle_t> handles_;
};

}  // namespace

cublasHandle_t cublas_handle(int index) {
  DeviceGuard guard(index);  // checks the index; initializes the runtime before the pool exists
  static HandlePool pool;
  cublasHandle_t h = pool.get(index);
  TT_CUBLAS_CHECK(TT_CUBLAS(cublasSetStream)(h, stream(index)));
  return h;
}

// ----- the "matmul" and "gemm" kernels ------------------------------------------------------

namespace {

// The exported cublasGemmStridedBatchedEx (cublas_api.h also declares a C++ overload taking the
// compute type as a cudaDataType, which forwards to this one).
using GemmStridedBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k, const void* alpha,
    const void* a, cudaDataType, int lda, long long stride_a, const void* b, cudaDataType, int ldb,
    long long stride_b, const void* beta, void* c, cudaDataType, int ldc, long long stride_c,
    int count, cublasComputeType_t, cublasGemmAlgo_t);

cublasOperation_t to_cublas(GemmOp op) {
  return op == GemmOp::kN ? CUBLAS_OP_N : CUBLAS_OP_T;
}

int checked_int(int64_t v, const char* what, const Tensor& out) {
  TT_CHECK(v <= INT_MAX, "matmul (cuBLAS): ", what, " = ", v,
           " exceeds the 32-bit cuBLAS API, out ", out.describe());
  return static_cast<int>(v);
}

/// A group of batch dims that walks a, b and out with one stride each (in elements).
struct BatchGroup {
  int64_t size = 1;
  int64_t sa = 0, sb = 0, sc = 0;
};

/// The batch dims of out and a, b (any strides, 0 where broadcast), outermost
/// first, size-1 dims dropped and neighbours merged when all three tensors step through them
/// with one stride. A plain batch [B, H] or a broadcast one ([1, H] against [B, H]) becomes one
/// group, i.e. one strided-batched call.
std::vector<BatchGroup> batch_groups(const Tensor& out, const Tensor& a, const Tensor& b) {
  std::vector<BatchGroup> groups;
  for (int64_t d = 0; d < out.dim() - 2; ++d) {
    const int64_t n = out.size(d);
    if (n == 1) continue;
    const BatchGroup g{n, a.stride(d), b.stride(d), out.stride(d)};
    BatchGroup* prev = groups.empty() ? nullptr : &groups.back();
    if (prev != nullptr && prev->sa == g.sa * n && prev->sb == g.sb * n && prev->sc == g.sc * n) {
      *prev = {prev->size * n, g.sa, g.sb, g.sc};
    } else {
      groups.push_back(g);
    }
  }
  if (groups.empty()) groups.push_back({});
  return groups;
}

// out = alpha * (a @ b) + beta * out for the operands of MatmulKernel, except that out's matrices
// need only be row-major (row stride >= columns), not contiguous. `op` names the caller.
void gemm_cublas_impl(const char* op, const Tensor& out, const Tensor& a, const Tensor& b,
                      double alpha_v, double beta_v) {
  TT_CHECK(out.device().is_cuda() && a.device() == out.device() && b.device() == out.device(), op,
           " (cuBLAS): expected out, a and b on one CUDA device, got ", out.describe(), ", ",
           a.describe(), ", ", b.describe());
  const DType dt = out.dtype();
  TT_CHECK((dt == DType::kFloat32 || dt == DType::kFloat64) && a.dtype() == dt && b.dtype() == dt,
           op, " (cuBLAS): expected float32 or float64 operands of one dtype, got ", out.describe(),
           ", ", a.describe(), ", ", b.describe());
  TT_CHECK(out.dim() >= 2 && a.dim() == out.dim() && b.dim() == out.dim(), op,
           " (cuBLAS): expected operands with out's batch dims, got ", out.describe(), ", ",
           a.describe(), ", ", b.describe());
  for (int64_t d = 0; d < out.dim() - 2; ++d) {
    TT_CHECK(a.size(d) == out.size(d) && b.size(d) == out.size(d), op,
             " (cuBLAS): batch dims of a ", a.shape(), " and b ", b.shape(),
             " must equal those of out ", out.shape(), " (expand them first)");
  }
  if (out.numel() == 0) return;
  const int64_t K = a.size(-1);
  if (K == 0) {  // an empty sum; cuBLAS rejects k = 0 with some layouts
    if (beta_v == 0.0) {
      out.fill_(0.0);
    } else if (beta_v != 1.0) {
      out.copy_(mul(out, beta_v));
    }
    return;
  }
  const GemmPlan p = plan_row_major_gemm(matrix_layout(a), matrix_layout(b), matrix_layout(out));
  const int m = checked_int(p.m, "N", out), n = checked_int(p.n, "M", out);
  const int k = checked_int(p.k, "K", out);
  const int lda = checked_int(p.lda, "lda", out), ldb = checked_int(p.ldb, "ldb", out);
  const int ldc = checked_int(p.ldc, "ldc", out);

  const int index = out.device().index;
  DeviceGuard guard(index);
  cublasHandle_t handle = cublas_handle(index);
  const bool f32 = dt == DType::kFloat32;
  const bool tf32 = f32 && allow_tf32();
  // Both knobs say the same thing: the compute type of this call, and the handle's math mode
  // (which the legacy cublasSgemm-style entry points read).
  TT_CUBLAS_CHECK(TT_CUBLAS(cublasSetMathMode)(
      handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const cudaDataType_t type = f32 ? CUDA_R_32F : CUDA_R_64F;
  const cublasComputeType_t compute =
      f32 ? (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F) : CUBLAS_COMPUTE_64F;
  // alpha and beta are read from host memory (the handle's default pointer mode) when the call
  // is issued, so locals are fine.
  const float alpha_f = static_cast<float>(alpha_v), beta_f = static_cast<float>(beta_v);
  const double alpha_d = alpha_v, beta_d = beta_v;
  const void* alpha = f32 ? static_cast<const void*>(&alpha_f) : &alpha_d;
  const void* beta = f32 ? static_cast<const void*>(&beta_f) : &beta_d;
  const std::size_t elem = dtype_size(dt);

  // The innermost batch group is one strided-batched call (stride 0 = broadcast operand); any
  // outer groups (e.g. [2, 1] x [3] broadcast against each other) are looped over here.
  const std::vector<BatchGroup> groups = batch_groups(out, a, b);
  const BatchGroup& inner = groups.back();
  const int count = checked_int(inner.size, "batch count", out);
  int64_t outer = 1;
  for (std::size_t g = 0; g + 1 < groups.size(); ++g) outer *= groups[g].size;
  std::vector<int64_t> idx(groups.size(), 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off_a = 0, off_b = 0, off_c = 0;
    for (std::size_t g = 0; g + 1 < groups.size(); ++g) {
      off_a += idx[g] * groups[g].sa;
      off_b += idx[g] * groups[g].sb;
      off_c += idx[g] * groups[g].sc;
    }
    const char* pa = static_cast<const char*>(a.data_ptr()) + off_a * static_cast<int64_t>(elem);
    const char* pb = static_cast<const char*>(b.data_ptr()) + off_b * static_cast<int64_t>(elem);
    char* pc = static_cast<char*>(out.data_ptr()) + off_c * static_cast<int64_t>(elem);
    // C^T = B^T A^T: cuBLAS's first operand is our b, its second our a (see the plan).
    TT_CUBLAS_CHECK(TT_CUBLAS_TYPED(cublasGemmStridedBatchedEx, GemmStridedBatchedEx)(
        handle, to_cublas(p.transa), to_cublas(p.transb), m, n, k, alpha, pb, type, lda, inner.sb,
        pa, type, ldb, inner.sa, beta, pc, type, ldc, inner.sc, count, compute,
        CUBLAS_GEMM_DEFAULT));
    for (std::size_t g = groups.size() - 1; g-- > 0;) {  // odometer over the outer groups
      if (++idx[g] < groups[g].size) break;
      idx[g] = 0;
    }
  }
}

}  // namespace

void matmul_cublas(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_CHECK(out.is_contiguous(), "matmul (cuBLAS): expected a contiguous out, got ", out.describe());
  gemm_cublas_impl("matmul", out, a, b, 1.0, 0.0);
}

void gemm_cublas(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  TT_CHECK(out.dim() == 2, "gemm (cuBLAS): expected 2-D out, a and b, got ", out.describe(), ", ",
           a.describe(), ", ", b.describe());
  gemm_cublas_impl("gemm", out, a, b, alpha, beta);
}

TT_REGISTER_KERNEL("matmul", DeviceType::kCUDA, matmul_cublas);
TT_REGISTER_KERNEL("matmul_cublas", DeviceType::kCUDA, matmul_cublas);
TT_REGISTER_KERNEL("gemm", DeviceType::kCUDA, gemm_cublas);

}  // namespace tt::cuda
