// ============================================================================================
// YOUR EXERCISE FILE for chapter 08_data. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch08
// Generated from solutions/08_data/bpe_train.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 08 exercise ch08.1: the BPE training loop.
// The reference solution lives here; tools/sync_starters generates the learner's starter
// chapters/08_data/src/bpe_train.cc from this file.
#include <algorithm>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "tt/bpe.h"
#include "tt/error.h"
#include "tt/todo.h"

namespace tt {

std::vector<BpeMerge> learn_bpe_merges(std::vector<BpeWord> words, int32_t first_new_id,
                                       int64_t num_merges, const ProgressFn& progress) {
  TT_CHECK(num_merges >= 0, "learn_bpe_merges: num_merges must be >= 0, got ", num_merges);
  TT_CHECK(first_new_id >= 0, "learn_bpe_merges: first_new_id must be >= 0, got ", first_new_id);
  TT_TODO("ch08.1",
          "learn_bpe_merges: at most num_merges merges (left, right, first_new_id + k) in order; "
          "merge k is the adjacent pair with the highest count over the words so far rewritten by "
          "merges 0..k-1, each occurrence weighted by its word's count (ties: smallest (left, "
          "right)); stops early when no pair occurs at least twice");
}

}  // namespace tt
