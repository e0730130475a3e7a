/// @file dtype.h
/// @brief Element types (float32, float64, int64, bfloat16), the bfloat16 storage type and the
/// dtype dispatch helpers.
///
/// **bfloat16** (DType::kBFloat16) is the 16-bit "brain float" of mixed-precision training
/// (chapter 11): the upper half of a float32 (1 sign, 8 exponent, 7 mantissa bits). Chapter 01
/// stores it and reads it; it does not compute with it:
/// - tt::bfloat16 is a storage type (the 16 bits), with no arithmetic: conversions are explicit.
/// - Reading one value is exact and given here: bfloat16_to_float() (a shift by 16 bits).
/// - Converting a tensor to or from bfloat16 (Tensor::to, copy_, fill_, full) rounds to nearest
///   even, which is chapter 11's exercise ch11.1: chapter 11 installs that "cast" with
///   set_bfloat16_cast() (tt/backend.h). Without chapter 11 those calls throw a tt::Error that
///   says so.
/// - dispatch_dtype() and dispatch_floating() never instantiate a kernel body on bfloat16: they
///   throw a tt::Error naming the op and "bfloat16". A kernel supports bfloat16 by handling
///   DType::kBFloat16 itself, before dispatching.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "tt/error.h"

namespace tt {

/// The element type of a tensor.
enum class DType : uint8_t {
  kFloat32,   ///< 32-bit IEEE float (the default)
  kFloat64,   ///< 64-bit IEEE float (gradcheck, references)
  kInt64,     ///< 64-bit signed integer (indices, token ids)
  kBFloat16,  ///< 16-bit brain float: float32's sign, exponent and top 7 mantissa bits
};

/// Size in bytes of one element of `dtype`.
constexpr std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kInt64:
      return 8;
    case DType::kBFloat16:
      return 2;
  }
  return 0;  // not a DType value
}

/// The PyTorch-style name of `dtype`: "float32", "float64", "int64" or "bfloat16".
const char* dtype_name(DType dtype);

/// True for the floating types float32, float64 and bfloat16 (as torch.is_floating_point).
///
/// A bfloat16 tensor therefore passes the "floating tensor" checks of the ops; the ops that have
/// no bfloat16 kernel then throw from dispatch_floating() with the op's name and "bfloat16".
constexpr bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kBFloat16;
}

/// Prints dtype_name(dtype).
std::ostream& operator<<(std::ostream& os, DType dtype);

/// One bfloat16 value as stored: the upper 16 bits of the float32 it stands for.
///
/// A plain, trivially copyable struct (so `Tensor::data<bfloat16>()` and memcpy work) with no
/// arithmetic and no implicit conversions: read it with bfloat16_to_float(); produce it by
/// rounding a float (chapter 11, tt::float_to_bfloat16_rne) or from known bits, `bfloat16{0x3F80}`
/// (1.0).
struct bfloat16 {
  uint16_t bits;  ///< sign (bit 15), exponent (bits 14..7), mantissa (bits 6..0)
};
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2);

/// The float32 value of a bfloat16: exact (every bfloat16 is a float32 whose low 16 bits are 0).
constexpr float bfloat16_to_float(bfloat16 h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h.bits) << 16);
}

/// Trait mapping a C++ element type to its DType (specialized for float, double, int64_t and
/// bfloat16 only).
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
/// tt::bfloat16 is bfloat16.
template <>
struct DTypeOf<bfloat16> {
  static constexpr DType value = DType::kBFloat16;  ///< the DType of tt::bfloat16
};

/// Maps a C++ element type to its DType: `dtype_of<float>` is DType::kFloat32.
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

/// Throws the tt::Error of a kernel `op` that has no bfloat16 implementation: "<op>: no bfloat16
/// kernel ...", with the way out (compute in float32: `.to(DType::kFloat32)`).
[[noreturn]] void throw_no_bfloat16_kernel(const char* op);

/// Calls `f.template operator()<T>()` with T the C++ type of `dtype` (float, double or int64_t)
/// and returns its result.
///
/// This is how one kernel body serves every dtype:
/// @code
/// dispatch_dtype(x.dtype(), "sum", [&]<typename T>() { ... x.data<T>() ... });
/// @endcode
/// `op` names the caller in the error thrown for an unsupported dtype. bfloat16 is never
/// dispatched (a body written for float would silently compute in the wrong type): it throws
/// throw_no_bfloat16_kernel(op).
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kInt64:
      return f.template operator()<int64_t>();
    case DType::kBFloat16:
      throw_no_bfloat16_kernel(op);
  }
  TT_THROW(op, ": unsupported dtype ", static_cast<int>(dtype));
}

/// Like dispatch_dtype but only for float32/float64; int64 throws a tt::Error naming `op`, and
/// bfloat16 throws throw_no_bfloat16_kernel(op).
template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kBFloat16:
      throw_no_bfloat16_kernel(op);
    default:
      break;
  }
  TT_THROW(op, ": expected a floating dtype (float32 or float64), got ", dtype_name(dtype));
}

}  // namespace tt
