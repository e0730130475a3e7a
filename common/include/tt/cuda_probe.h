/// @file cuda_probe.h
/// @brief Asks, without failing, whether a CUDA device can be used.
#pragma once

namespace tt {

/// True when the build includes CUDA (nvcc was found at configure time).
bool built_with_cuda();

/// Number of usable CUDA devices: 0 in a CPU-only build, with no driver, or with no GPU.
int cuda_device_count();

/// Compute capability of CUDA device `device` as 10 major + minor (90 for an H100 or H200): 0 in
/// a CPU-only build or when the device cannot be queried. Every device is queried once, at the
/// first call; later calls read the stored answers.
int cuda_compute_capability(int device);

}  // namespace tt
