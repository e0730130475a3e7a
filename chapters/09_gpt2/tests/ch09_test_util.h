// Helpers of chapter 09's tests: a tiny GPT-2 configuration and fixed batches, plus chapter 08's
// helpers (temporary directories, raw file reads and writes, header patches).
#pragma once

#include <cstdint>
#include <vector>

#include "../../08_data/tests/ch08_test_util.h"
#include "tt/dataloader.h"
#include "tt/generator.h"
#include "tt/gpt2.h"
#include "tt/testing.h"

namespace tt::test09 {

using test08::identity_bytes;
using test08::put_le32;
using test08::read_bytes;
using test08::TempDir;
using test08::write_bytes;

/// A GPT-2 small enough for unit tests: L=2, NH=2, C=16, V=50 (Vp=64), maxT=16.
inline gpt2::GPT2Config tiny_config() {
  return {.block_size = 16,
          .vocab_size = 50,
          .padded_vocab_size = 64,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 16};
}

/// A deterministic batch of B rows of T tokens < V (targets = inputs shifted by one), from `seed`.
inline Batch fixed_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> w(static_cast<std::size_t>(B * T + 1));
  for (auto& t : w) t = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(V));
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(w[static_cast<std::size_t>(b * T + t)]);
      y.push_back(w[static_cast<std::size_t>(b * T + t + 1)]);
    }
  }
  return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

}  // namespace tt::test09
