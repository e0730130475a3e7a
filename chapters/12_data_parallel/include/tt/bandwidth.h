/// @file bandwidth.h
/// @brief Algorithm and bus bandwidth of an all-reduce, as NVIDIA's nccl-tests define them
/// (its PERFORMANCE.md), for tt_allreduce_bench and the tools lab (exercise ch12.6).
///
/// An all-reduce of a buffer of S bytes that takes t seconds on N ranks has
/// - algorithm bandwidth algbw = S / t (what the caller sees: bytes reduced per second);
/// - bus bandwidth busbw = algbw * 2(N-1)/N: the ring's traffic per rank (each rank sends, and
///   receives, 2(N-1)/N * S bytes; see "Ring all-reduce" in the README) per second. It does not
///   depend on N for an algorithm that uses the links optimally, so it compares with the speed
///   of ONE DIRECTION of a rank's link (e.g. 450 GB/s for an H100 SXM's NVLink 4, whose "900 GB/s"
///   counts both directions).
#pragma once

#include <cstdint>

namespace tt::dist {

/// algbw in bytes per second: `bytes` / `seconds`. Throws tt::Error when bytes < 0 or
/// seconds <= 0 (or not finite).
double algorithm_bandwidth(int64_t bytes, double seconds);

/// busbw of an all-reduce in bytes per second (exercise ch12.6): algorithm_bandwidth(bytes,
/// seconds) * 2(N-1)/N with N = world_size; 0 for one rank (nothing crosses a link). Throws
/// tt::Error naming the arguments when bytes < 0, seconds <= 0 or not finite, or world_size < 1.
double bus_bandwidth(int64_t bytes, double seconds, int world_size);

}  // namespace tt::dist
