/// @file npy.h
/// @brief Reader and writer for NumPy's .npy format (versions 1.0-3.0, little-endian,
/// C order; float32, float64 and int64).
///
/// The format: 6 magic bytes "\x93NUMPY", major and minor version bytes, a little-endian
/// header length (2 bytes in version 1, 4 bytes in versions 2 and 3), an ASCII Python dict
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces and a
/// newline, then the raw array data. Anything else is rejected with a tt::Error naming the file
/// and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tt {

/// Element types the .npy reader and writer support.
enum class NpyDType { kFloat32, kFloat64, kInt64 };

/// Size in bytes of one element of `dtype`.
std::size_t npy_itemsize(NpyDType dtype);

/// An array as stored in a .npy file: dtype, shape and C-ordered bytes.
struct NpyArray {
  NpyDType dtype = NpyDType::kFloat32;  ///< element type
  std::vector<int64_t> shape;           ///< dimensions (empty for a 0-d scalar)
  std::vector<std::byte> data;          ///< numel * itemsize bytes, C order

  /// Number of elements (product of the shape; 1 for a 0-d array).
  int64_t numel() const;
};

/// Parses the bytes of a .npy file. `name` is used in error messages.
/// Throws tt::Error on bad magic, unsupported version/dtype, Fortran order, a malformed header,
/// or a data section that is shorter or longer than the shape requires.
NpyArray parse_npy(const std::vector<std::byte>& bytes, const std::string& name = "<memory>");

/// Reads and parses a .npy file (see parse_npy). Throws tt::Error if the file cannot be read.
NpyArray read_npy(const std::string& path);

/// Serializes an array as .npy version 1.0 bytes (header padded to a multiple of 64 bytes).
/// Throws tt::Error if data.size() does not equal numel * itemsize.
std::vector<std::byte> serialize_npy(const NpyArray& array);

/// Writes an array as a .npy file. Throws tt::Error if the file cannot be written.
void write_npy(const std::string& path, const NpyArray& array);

}  // namespace tt
