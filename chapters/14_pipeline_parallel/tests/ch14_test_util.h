// Helpers shared by chapter 14's tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tt/dist.h"
#include "tt/tensor.h"

namespace tt::test14 {

/// Rank 0's `path` on every rank of `world` (a collective): where rank 0 alone writes a
/// checkpoint that every rank then reads.
inline std::string rank0_path(dist::ProcessGroup& world, const std::string& path) {
  std::vector<int64_t> chars(1024, 0);
  std::copy_n(path.begin(), std::min<std::size_t>(path.size(), chars.size() - 1), chars.begin());
  Tensor t = from_vector(chars, {static_cast<int64_t>(chars.size())});
  world.broadcast(t, 0);
  std::string out;
  for (int64_t c : t.to_vector<int64_t>()) {
    if (c == 0) break;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

}  // namespace tt::test14
