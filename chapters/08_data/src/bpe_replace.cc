// The rewriting step of BPE, shared by training (ch08.1) and encoding (ch08.2).
#include "tt/bpe.h"

namespace tt {

int64_t bpe_replace_pair(std::vector<int32_t>& ids, int32_t left, int32_t right, int32_t id) {
  const std::size_t n = ids.size();
  std::size_t out = 0;
  int64_t replaced = 0;
  for (std::size_t i = 0; i < n;) {
    if (i + 1 < n && ids[i] == left && ids[i + 1] == right) {
      ids[out++] = id;
      i += 2;
      ++replaced;
    } else {
      ids[out++] = ids[i++];
    }
  }
  ids.resize(out);
  return replaced;
}

}  // namespace tt
