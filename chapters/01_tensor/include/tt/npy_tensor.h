/// @file npy_tensor.h
/// @brief Conversions between tensors and .npy arrays (reference data, debugging dumps).
#pragma once

#include <string>

#include "tt/npy.h"
#include "tt/tensor.h"

namespace tt {

/// A CPU tensor with the array's dtype, shape and values.
Tensor tensor_from_npy(const NpyArray& array);
/// Reads a .npy file into a CPU tensor (see read_npy for what is rejected).
Tensor load_npy(const std::string& path);
/// The tensor's values (any device, any strides) as a C-ordered array.
NpyArray tensor_to_npy(const Tensor& t);
/// Writes the tensor as a .npy file.
void save_npy(const std::string& path, const Tensor& t);

}  // namespace tt
