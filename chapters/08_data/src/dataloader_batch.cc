// ============================================================================================
// YOUR EXERCISE FILE for chapter 08_data. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch08
// Generated from solutions/08_data/dataloader_batch.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 08 exercise ch08.4: one batch with shifted targets.
// The reference solution lives here; tools/sync_starters generates the learner's starter
// chapters/08_data/src/dataloader_batch.cc from this file.
#include <string>

#include "tt/dataloader.h"
#include "tt/todo.h"

namespace tt {

Batch make_batch(const TokenShard& shard, int64_t start, int64_t batch_size, int64_t seq_len) {
  const int64_t B = batch_size;
  const int64_t T = seq_len;
  TT_CHECK(B > 0 && T > 0, "make_batch: batch_size and seq_len must be positive, got B=", B,
           " T=", T);
  // end = start + B*T + 1, computed with overflow checks: extreme arguments must be rejected,
  // not wrap around into a window that seems to fit.
  int64_t end = 0;
  const bool end_fits = !__builtin_mul_overflow(B, T, &end) &&
                        !__builtin_add_overflow(end, 1, &end) &&
                        !__builtin_add_overflow(start, end, &end);
  TT_CHECK(start >= 0 && end_fits && end <= shard.num_tokens(), "make_batch: '", shard.path(),
           "': the window [", start, ", ", end_fits ? std::to_string(end) : "beyond int64",
           ") of B*T+1 tokens (B=", B, ", T=", T, ") does not fit in the shard's ",
           shard.num_tokens(), " tokens");
  Batch batch{empty({B, T}, {.dtype = DType::kInt64}), empty({B, T}, {.dtype = DType::kInt64})};
  TT_TODO("ch08.4",
          "make_batch: int64 [B, T] inputs and targets cut from the window of B*T + 1 tokens at "
          "start (checked by the given code): the B rows are consecutive pieces of T tokens of "
          "the window, and every target is the token that follows its input in the shard");
}

}  // namespace tt
