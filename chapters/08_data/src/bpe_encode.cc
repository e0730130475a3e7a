// ============================================================================================
// YOUR EXERCISE FILE for chapter 08_data. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch08
// Generated from solutions/08_data/bpe_encode.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 08 exercise ch08.2: encoding one pre-token with the merge ranks.
// The reference solution lives here; tools/sync_starters generates the learner's starter
// chapters/08_data/src/bpe_encode.cc from this file.
#include <limits>

#include "tt/bpe.h"
#include "tt/todo.h"

namespace tt {

void bpe_merge_word(std::vector<int32_t>& ids, const MergeRanks& ranks) {
  TT_TODO("ch08.2",
          "bpe_merge_word: ids rewritten in place until no adjacent pair is in `ranks`, each "
          "time merging (all non-overlapping, left to right) the present pair of lowest rank "
          "into its id; words of 0 or 1 ids unchanged");
}

}  // namespace tt
