// ============================================================================================
// YOUR EXERCISE FILE for chapter 16_context_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch16
// Generated from solutions/16_context_parallel/shard_map.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch16.2: the index map of the sequence layouts (tt/ring_attention.h): which global
// position a rank's local position holds, contiguous or zigzag.
#include "tt/error.h"
#include "tt/ring_attention.h"
#include "tt/todo.h"

namespace tt::cp {

int64_t global_position(Layout layout, int64_t T, int rank, int world, int64_t local) {
  const int64_t chunks = num_chunks(layout, world);
  TT_CHECK(T > 0 && T % chunks == 0 && rank >= 0 && rank < world && local >= 0 && local < T / world,
           "cp::global_position: the ", layout_name(layout), " layout over ", world,
           " ranks needs T > 0 divisible by ", chunks, ", rank in [0, ", world,
           ") and local in [0, T / ", world, "), got T = ", T, ", rank ", rank, ", local ", local);
  TT_TODO("ch16.2",
          "global_position: the global position of local position `local` of rank `rank`: "
          "contiguous = chunk rank of N equal chunks; zigzag = chunks rank and 2N-1-rank of 2N, "
          "in that order");
}

}  // namespace tt::cp
