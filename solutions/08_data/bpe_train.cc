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
#if TT_SOLUTION
  // Incremental counting: pair counts are computed once; a merge only revisits the words that
  // contain the merged pair (found through `where`), subtracting their old pairs and adding
  // their new ones. The best pair comes from a max-heap with lazy deletion: an entry whose
  // count no longer matches `counts` is stale and skipped (a fresh one was pushed when the
  // count changed).
  std::unordered_map<uint64_t, int64_t> counts;              // pair -> weighted count
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // pair -> words (maybe stale)
  std::vector<uint64_t> touched;                             // pairs whose count changed
  auto add_pairs = [&](int32_t w, int64_t sign) {
    const auto& ids = words[w].ids;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const uint64_t key = bpe_pair_key(ids[i], ids[i + 1]);
      counts[key] += sign * words[w].count;
      touched.push_back(key);
      if (sign > 0) {
        auto& ws = where[key];
        if (ws.empty() || ws.back() != w) ws.push_back(w);
      }
    }
  };
  for (int32_t w = 0; w < static_cast<int32_t>(words.size()); ++w) add_pairs(w, +1);

  struct Entry {
    int64_t count;
    int32_t left, right;
  };
  // The heap's top is the "largest": highest count, then the SMALLEST (left, right).
  auto lower_priority = [](const Entry& a, const Entry& b) {
    if (a.count != b.count) return a.count < b.count;
    return std::tie(a.left, a.right) > std::tie(b.left, b.right);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(lower_priority)> heap(lower_priority);
  auto push_touched = [&] {
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t key : touched) {
      auto it = counts.find(key);
      if (it == counts.end()) continue;
      if (it->second == 0) {
        counts.erase(it);
        continue;
      }
      heap.push({it->second, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key)});
    }
    touched.clear();
  };
  push_touched();

  std::vector<BpeMerge> merges;
  while (static_cast<int64_t>(merges.size()) < num_merges && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const uint64_t key = bpe_pair_key(top.left, top.right);
    const auto it = counts.find(key);
    if (it == counts.end() || it->second != top.count) continue;  // stale entry
    if (top.count < 2) break;  // every remaining pair occurs once: nothing worth merging
    const BpeMerge merge{top.left, top.right, first_new_id + static_cast<int32_t>(merges.size())};
    merges.push_back(merge);

    std::vector<int32_t> affected = std::move(where[key]);
    where.erase(key);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    for (int32_t w : affected) {
      auto& ids = words[w].ids;
      bool contains = false;
      for (std::size_t i = 0; i + 1 < ids.size() && !contains; ++i) {
        contains = ids[i] == merge.left && ids[i + 1] == merge.right;
      }
      if (!contains) continue;  // stale: an earlier merge already rewrote this pair here
      add_pairs(w, -1);
      bpe_replace_pair(ids, merge.left, merge.right, merge.id);
      add_pairs(w, +1);
    }
    push_touched();
    if (progress) progress(static_cast<int64_t>(merges.size()), num_merges);
  }
  return merges;
#else
  TT_TODO("ch08.1",
          "learn_bpe_merges: at most num_merges merges (left, right, first_new_id + k) in order; "
          "merge k is the adjacent pair with the highest count over the words so far rewritten by "
          "merges 0..k-1, each occurrence weighted by its word's count (ties: smallest (left, "
          "right)); stops early when no pair occurs at least twice");
#endif
}

}  // namespace tt
