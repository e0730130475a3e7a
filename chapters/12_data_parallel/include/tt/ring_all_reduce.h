/// @file ring_all_reduce.h
/// @brief All-reduce written by hand: a ring of point-to-point messages (exercise ch12.1).
///
/// With N ranks the flat tensor is cut into N chunks, chunk c = elements
/// [c*n/N, (c+1)*n/N) (integer division, so sizes differ by at most one and chunks are empty
/// when n < N). Rank r sends to rank r+1 and receives from rank r-1 (mod N):
/// - reduce-scatter, steps s = 0..N-2: send chunk (r-s) mod N, receive chunk (r-s-1) mod N and
///   add it into the local copy; afterwards rank r holds the complete sum of chunk (r+1) mod N;
/// - all-gather, steps s = 0..N-2: send chunk (r+1-s) mod N, receive chunk (r-s) mod N and
///   overwrite the local copy with it.
/// Every rank sends 2(N-1)/N of the tensor in total, independent of N: the bandwidth-optimal
/// all-reduce (see the chapter README for the alpha-beta cost model).
#pragma once

#include <cstdint>

#include "tt/dist.h"

namespace tt::dist {

/// First element of chunk `c` when n elements are cut into `parts` chunks: c*n/parts.
inline int64_t chunk_begin(int64_t n, int64_t parts, int64_t c) {
  return c * n / parts;
}

/// In place: t = sum (or average) over the ranks of `group` of t, computed with the ring
/// algorithm above on group.send_recv (exercise ch12.1). `t` is a contiguous float32/float64 CPU
/// tensor of any shape, and n may be smaller than, or not divisible by, the world size. Every
/// rank ends with bit-identical values (each chunk is summed once, in ring order, then copied).
void ring_all_reduce(ProcessGroup& group, const Tensor& t, ReduceOp op = ReduceOp::kSum);

}  // namespace tt::dist
