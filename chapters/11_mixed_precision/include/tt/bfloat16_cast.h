/// @file bfloat16_cast.h
/// @brief Chapter 11's conversions between float32 and bfloat16: the rounding (exercise ch11.1)
/// and the "cast" kernels (CPU and CUDA) behind every bfloat16 conversion of a tensor.
///
/// Chapter 01 declares DType::kBFloat16 and stores it, but leaves the conversions to this
/// chapter: it keeps one slot, set_bfloat16_cast() (tt/backend.h), that Tensor::copy_, to(),
/// fill_ and the creation functions call whenever a bfloat16 value must be produced or widened
/// into a tensor. Linking chapter 11 fills that slot with a function that dispatches the
/// registered kernel "cast" (CastKernel) on the tensors' device, so the conversion appears in
/// chapter 10's per-op profiler like any other kernel:
///
/// | kernel name | signature | CPU | CUDA |
/// |---|---|---|---|
/// | "cast" | CastKernel | cpu::cast (float_to_bfloat16_rne per element) | cuda::cast |
///
/// The contract of "cast": dst and src on one device, of one shape, any strides (src may be
/// broadcast); one of them bfloat16, the other float32 or bfloat16. float32 -> bfloat16 rounds
/// to nearest, ties to even (float_to_bfloat16_rne); bfloat16 -> float32 is exact
/// (bfloat16_to_float); bfloat16 -> bfloat16 copies the bits. Other dtype pairs throw tt::Error
/// naming the op and both dtypes (chapter 01 routes float64 and int64 through float32).
#pragma once

#include "tt/tensor.h"

namespace tt {

/// The bfloat16 nearest to `x`, ties to even (exercise ch11.1), as IEEE 754's default rounding:
/// - finite x: the bfloat16 nearest to x; at a tie (x exactly halfway between two bfloat16) the
///   one whose last mantissa bit is 0. Denormal inputs and results follow the same rule (no
///   flushing to zero); the sign of a zero is kept.
/// - |x| at or above the largest bfloat16 plus half a step (0x1.FFp127) rounds to ±infinity;
///   ±infinity stays ±infinity.
/// - NaN stays NaN: the same sign and the upper mantissa bits, with the quiet bit (bit 6 of the
///   bfloat16) set, so a payload that would truncate to zero cannot turn the NaN into infinity.
bfloat16 float_to_bfloat16_rne(float x);

/// Signature of the kernel "cast" (see the file comment for its contract).
using CastKernel = void(const Tensor& dst, const Tensor& src);

namespace cpu {
/// CPU kernel "cast": float32 -> bfloat16 with float_to_bfloat16_rne, bfloat16 -> float32 with
/// bfloat16_to_float, bfloat16 -> bfloat16 by bits, element by element (cpu_map_strided).
void cast(const Tensor& dst, const Tensor& src);
}  // namespace cpu

namespace cuda {
/// CUDA kernel "cast" (CUDA builds only): the same contract on one CUDA device, one launch on the
/// device's stream. float32 -> bfloat16 uses the GPU's own conversion instruction
/// (`__float2bfloat16_rn`, `cvt.rn.bf16.f32` on sm_80 and later), which rounds to nearest even
/// as float_to_bfloat16_rne does (Ch11_1_CastCuda compares the two bit for bit; a NaN may come
/// out with another payload: the GPU returns its canonical NaN).
void cast(const Tensor& dst, const Tensor& src);
}  // namespace cuda

}  // namespace tt
