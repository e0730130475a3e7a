// Chapter 08 exercise ch08.2: encoding one pre-token with the merge ranks.
// The reference solution lives here; tools/sync_starters generates the learner's starter
// chapters/08_data/src/bpe_encode.cc from this file.
#include <limits>

#include "tt/bpe.h"
#include "tt/todo.h"

namespace tt {

void bpe_merge_word(std::vector<int32_t>& ids, const MergeRanks& ranks) {
#if TT_SOLUTION
  while (ids.size() >= 2) {
    // The adjacent pair with the lowest rank (the merge learned first) is applied first.
    const MergeRank* best = nullptr;
    std::size_t best_pos = 0;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const auto it = ranks.find(bpe_pair_key(ids[i], ids[i + 1]));
      if (it != ranks.end() && (best == nullptr || it->second.rank < best->rank)) {
        best = &it->second;
        best_pos = i;
      }
    }
    if (best == nullptr) return;  // no pair can be merged: done
    bpe_replace_pair(ids, ids[best_pos], ids[best_pos + 1], best->id);
  }
#else
  TT_TODO("ch08.2",
          "bpe_merge_word: ids rewritten in place until no adjacent pair is in `ranks`, each "
          "time merging (all non-overlapping, left to right) the present pair of lowest rank "
          "into its id; words of 0 or 1 ids unchanged");
#endif
}

}  // namespace tt
