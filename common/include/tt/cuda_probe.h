/// @file cuda_probe.h
/// @brief Asks, without failing, whether a CUDA device can be used.
#pragma once

namespace tt {

/// True when the build includes CUDA (nvcc was found at configure time).
bool built_with_cuda();

/// Number of usable CUDA devices: 0 in a CPU-only build, with no driver, or with no GPU.
int cuda_device_count();

}  // namespace tt
