// TEMPORARY stand-in for chapter 06's tt/cuda_device.h until branch ch06 is merged; replaced by
// it then (TT07_* -> TT_*, ch07tmp:: -> nothing). Not part of the chapter.
#pragma once

#include <cuda_runtime_api.h>

#include "tt/error.h"

#define TT07_CUDA_CHECK(expr)                                                                   \
  do {                                                                                          \
    const cudaError_t tt07_status_ = (expr);                                                    \
    if (tt07_status_ != cudaSuccess) {                                                          \
      (void)cudaGetLastError();                                                                 \
      TT_THROW("CUDA error ", cudaGetErrorName(tt07_status_), " (",                             \
               cudaGetErrorString(tt07_status_), ") in ", #expr);                               \
    }                                                                                           \
  } while (0)
#define TT07_CUDA_CHECK_LAUNCH(name) TT07_CUDA_CHECK(cudaGetLastError())

namespace tt::cuda::ch07tmp {
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    TT07_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) TT07_CUDA_CHECK(cudaSetDevice(index));
  }
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};
inline cudaStream_t stream(int) { return cudaStreamLegacy; }
}  // namespace tt::cuda::ch07tmp
