/// @file cuda_blas.h
/// @brief cuBLAS as this project uses it: opened on first use, one handle per device bound to
/// the device's stream, and an error check that names the failing call.
///
/// cuBLAS and cuBLASLt are not linked: the first call of a cuBLAS function opens the library with
/// `dlopen`, and `TT_CUBLAS(fn)` / `TT_CUBLASLT(fn)` name the function to call. Linking them would
/// run their static constructors in every process at start-up, about 0.5 s of CPU time (82% of a
/// chapter-07 test binary's start, measured with perf), paid by every test of chapters 07-16 even
/// on a machine without a GPU, and by every rank of an MPI job.
///
/// CUDA builds only (includes cublas_v2.h). Other code multiplies through `tt::matmul` or the
/// registry name "matmul".
#pragma once

#include <cublas_v2.h>

#include <string>

namespace tt::cuda {

/// The two libraries of cuBLAS: the classic API (cublas_v2.h) and cuBLASLt (cublasLt.h).
enum class BlasLibrary { kCublas, kCublasLt };

/// The address of the function `name` (its exported name, e.g. "cublasSgemm_v2") in `library`,
/// which is opened with dlopen on the first call (by its soname, then in the CUDA toolkit's
/// library directory of the build) and stays loaded. Throws tt::Error naming the library, the
/// paths tried and dlerror()'s reason when it cannot be opened or lacks the function.
/// Thread-safe. Call sites use TT_CUBLAS / TT_CUBLASLT, which look the address up once per site.
void* blas_symbol(BlasLibrary library, const char* name);

/// "cuBLAS error <name> (<description>) in <expr> at <file>:<line>".
std::string cublas_error_message(cublasStatus_t status, const char* expr, const char* file,
                                 int line);

namespace detail {
/// Throws tt::Error with cublas_error_message(...). Never returns.
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file,
                                     int line);
}  // namespace detail

/// The cuBLAS handle of CUDA device `index`, bound to that device's stream (tt::cuda::stream).
/// Created on the first call for the device and cached: creating a handle costs milliseconds
/// and allocates a workspace, so one per call would dominate small GEMMs. The handles are
/// destroyed at exit, before the CUDA runtime shuts down. A handle must not be used by two host
/// threads at once; this project issues all GEMMs of a device from one thread (PyTorch keeps one
/// handle per thread and device). Call it with the device current (under a DeviceGuard).
cublasHandle_t cublas_handle(int index);

}  // namespace tt::cuda

/// @cond
#define TT_BLAS_STRINGIFY_(x) #x
// fn arrives macro-expanded (cublas_v2.h maps cublasSgemm to cublasSgemm_v2), so the exported
// name looked up is the one whose type the caller sees.
#define TT_BLAS_FUNCTION_(library, type, fn)                                                \
  ([]() {                                                                                   \
    static const auto tt_blas_fn_ = reinterpret_cast<type>(                                 \
        ::tt::cuda::blas_symbol(::tt::cuda::BlasLibrary::library, TT_BLAS_STRINGIFY_(fn))); \
    return tt_blas_fn_;                                                                     \
  }())
/// @endcond

/// The cuBLAS function `fn` as declared in cublas_v2.h, from the library opened on first use
/// (looked up once per call site): `TT_CUBLAS_CHECK(TT_CUBLAS(cublasCreate)(&h));`
#define TT_CUBLAS(fn) TT_BLAS_FUNCTION_(kCublas, decltype(&::fn), fn)

/// TT_CUBLAS for a name that cublas_v2.h overloads in C++ (e.g. cublasGemmStridedBatchedEx also
/// takes its compute type as a cudaDataType): `type` is the exported C function's pointer type.
#define TT_CUBLAS_TYPED(fn, type) TT_BLAS_FUNCTION_(kCublas, type, fn)

/// The cuBLASLt function `fn` as declared in cublasLt.h (include it first), from the library
/// opened on first use: `TT_CUBLAS_CHECK(TT_CUBLASLT(cublasLtCreate)(&h));`
#define TT_CUBLASLT(fn) TT_BLAS_FUNCTION_(kCublasLt, decltype(&::fn), fn)

/// Evaluates a cuBLAS call and throws tt::Error naming the status, the call, the file and line
/// when it does not return CUBLAS_STATUS_SUCCESS: `TT_CUBLAS_CHECK(cublasCreate(&h));`
#define TT_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                      \
    const cublasStatus_t tt_cublas_status_ = (expr);                                        \
    if (tt_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                          \
      ::tt::cuda::detail::throw_cublas_error(tt_cublas_status_, #expr, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
