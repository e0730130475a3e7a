/// @file dtype.h
/// @brief Element types (float32, float64, int64) and the dtype dispatch helper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "tt/error.h"

namespace tt {

/// The element type of a tensor.
enum class DType : uint8_t {
  kFloat32,  ///< 32-bit IEEE float (the default)
  kFloat64,  ///< 64-bit IEEE float (gradcheck, references)
  kInt64,    ///< 64-bit signed integer (indices, token ids)
};

/// Size in bytes of one element of `dtype`.
constexpr std::size_t dtype_size(DType dtype) {
  return dtype == DType::kFloat32 ? 4 : 8;
}

/// The PyTorch-style name of `dtype`: "float32", "float64" or "int64".
const char* dtype_name(DType dtype);

/// True for float32 and float64.
constexpr bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

/// Prints dtype_name(dtype).
std::ostream& operator<<(std::ostream& os, DType dtype);

/// Trait mapping a C++ element type to its DType (specialized for float, double, int64_t only).
template <typename T>
struct DTypeOf;
/// float is float32.
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;  ///< the DType of float
};
/// double is float64.
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;  ///< the DType of double
};
/// int64_t is int64.
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;  ///< the DType of int64_t
};

/// Maps a C++ element type to its DType: `dtype_of<float>` is DType::kFloat32.
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

/// Calls `f.template operator()<T>()` with T the C++ type of `dtype` and returns its result.
///
/// This is how one kernel body serves every dtype:
/// @code
/// dispatch_dtype(x.dtype(), "sum", [&]<typename T>() { ... x.data<T>() ... });
/// @endcode
/// `op` names the caller in the error thrown for an unsupported dtype.
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f.template operator()<float>();
    case DType::kFloat64: return f.template operator()<double>();
    case DType::kInt64: return f.template operator()<int64_t>();
  }
  TT_THROW(op, ": unsupported dtype ", static_cast<int>(dtype));
}

/// Like dispatch_dtype but only for float32/float64; int64 throws a tt::Error naming `op`.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f.template operator()<float>();
    case DType::kFloat64: return f.template operator()<double>();
    default: break;
  }
  TT_THROW(op, ": expected a floating dtype (float32 or float64), got ", dtype_name(dtype));
}

}  // namespace tt
