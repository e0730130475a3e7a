#include "tt/cuda_probe.h"

#if TT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tt {

bool built_with_cuda() {
#if TT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#if TT_WITH_CUDA
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky "no device / no driver" error
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

int cuda_compute_capability(int device) {
#if TT_WITH_CUDA
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return 10 * major + minor;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace tt
