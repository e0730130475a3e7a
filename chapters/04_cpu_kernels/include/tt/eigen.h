/// @file eigen.h
/// @brief Eigen's Core for the CPU kernels, included with two false-positive GCC 12 warnings
/// silenced for its code only.
///
/// With -march=native on an AVX-512 CPU, GCC 12 reports -Wmaybe-uninitialized (-O3) or
/// -Wuninitialized (-O2) inside Eigen's AVX-512 packet transposes (the _mm512_undefined_ps/pd()
/// intrinsics, GCC bug 105593, fixed in GCC 13), which breaks -Werror builds. Every file of the
/// project that uses Eigen includes this header instead of <Eigen/Core>.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
