#include "tt/cuda_probe.h"

#include <cstddef>
#include <vector>

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
  // Queried once for every device at the first call: a kernel launcher may ask on every launch.
  static const std::vector<int> capabilities = [] {
    std::vector<int> out(static_cast<std::size_t>(cuda_device_count()), 0);
    for (std::size_t d = 0; d < out.size(); ++d) {
      int major = 0, minor = 0;
      const int dev = static_cast<int>(d);
      if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      out[d] = 10 * major + minor;
    }
    return out;
  }();
  return device >= 0 && static_cast<std::size_t>(device) < capabilities.size()
             ? capabilities[static_cast<std::size_t>(device)]
             : 0;
#else
  (void)device;
  return 0;
#endif
}

}  // namespace tt
