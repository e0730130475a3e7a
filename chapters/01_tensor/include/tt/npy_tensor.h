/// @file npy_tensor.h
/// @brief Conversions between tensors and .npy arrays (reference data, debugging dumps).
///
/// **bfloat16 convention.** numpy has no bfloat16 dtype, so a bfloat16 tensor is written as
/// '<f4' (float32) holding its exact values (bfloat16_to_float of each element): numpy and
/// PyTorch read the true numbers, and `load_npy(path).to(DType::kBFloat16)` gives back the same
/// bits (every value is a bfloat16 already, so rounding does not change it; the conversion is
/// chapter 11's cast). The file does not record that the values came from bfloat16; a reader
/// that needs bfloat16 says so with that `.to()`.
#pragma once

#include <string>

#include "tt/npy.h"
#include "tt/tensor.h"

namespace tt {

/// A CPU tensor with the array's dtype, shape and values.
Tensor tensor_from_npy(const NpyArray& array);
/// Reads a .npy file into a CPU tensor (see read_npy for what is rejected).
Tensor load_npy(const std::string& path);
/// The tensor's values (any device, any strides) as a C-ordered array; bfloat16 as float32.
NpyArray tensor_to_npy(const Tensor& t);
/// Writes the tensor as a .npy file.
void save_npy(const std::string& path, const Tensor& t);

}  // namespace tt
