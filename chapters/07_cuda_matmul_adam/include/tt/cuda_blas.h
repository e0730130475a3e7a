/// @file cuda_blas.h
/// @brief cuBLAS as this project uses it: one handle per device, created on first use and bound
/// to the device's stream, and an error check that names the failing call.
///
/// CUDA builds only (includes cublas_v2.h). Other code multiplies through `tt::matmul` or the
/// registry name "matmul".
#pragma once

#include <cublas_v2.h>

#include <string>

namespace tt::cuda {

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

/// Evaluates a cuBLAS call and throws tt::Error naming the status, the call, the file and line
/// when it does not return CUBLAS_STATUS_SUCCESS: `TT_CUBLAS_CHECK(cublasCreate(&h));`
#define TT_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                      \
    const cublasStatus_t tt_cublas_status_ = (expr);                                        \
    if (tt_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {                          \
      ::tt::cuda::detail::throw_cublas_error(tt_cublas_status_, #expr, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
