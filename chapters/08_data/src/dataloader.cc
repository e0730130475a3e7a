// tt::DataLoader: windows over memory-mapped shards, sequential or seeded-shuffled.
#include "tt/dataloader.h"

#include <numeric>
#include <utility>

#include "tt/error.h"

namespace tt {

uint64_t uniform_below(Generator& gen, uint64_t n) {
  TT_CHECK(n > 0, "uniform_below: n must be positive");
  // Accept r only below the largest multiple of n (2^64 - (2^64 mod n)): then r % n is uniform.
  const uint64_t threshold = (0 - n) % n;  // (2^64 - n) mod n == 2^64 mod n
  for (;;) {
    const uint64_t r = gen.next_u64();
    if (r >= threshold) return r % n;
  }
}

DataLoader::DataLoader(const std::vector<std::string>& shard_paths, DataLoaderOptions options)
    : options_(options), generator_(options.seed) {
  const int64_t B = options_.batch_size;
  const int64_t T = options_.seq_len;
  TT_CHECK(B > 0 && T > 0, "DataLoader: batch_size and seq_len must be positive, got B=", B,
           " T=", T);
  TT_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
           "DataLoader: rank ", options_.rank, " is not in 0..", options_.world_size - 1,
           " (world_size ", options_.world_size, ")");
  TT_CHECK(options_.vocab_size > 0, "DataLoader: options.vocab_size must be set (> 0), got ",
           options_.vocab_size);
  TT_CHECK(!shard_paths.empty(), "DataLoader: no shard files given");
  const int64_t rows = B * options_.world_size;  // of a global batch
  std::string sizes;
  shards_.reserve(shard_paths.size());
  for (const std::string& path : shard_paths) {
    shards_.emplace_back(path, options_.vocab_size);
    const int64_t n = shards_.back().num_tokens();
    sizes += detail::str(sizes.empty() ? "" : ", ", "'", path, "': ", n);
    for (int64_t start = 0; start + rows * T + 1 <= n; start += rows * T) {
      windows_.push_back({static_cast<int32_t>(shards_.size() - 1), start});
    }
  }
  TT_CHECK(!windows_.empty(), "DataLoader: no shard holds world_size*B*T+1 = ", rows * T + 1,
           " tokens (world_size=", options_.world_size, ", B=", B, ", T=", T,
           "); tokens per shard: ", sizes);
  start_epoch();
}

void DataLoader::start_epoch() {
  order_.resize(windows_.size());
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (options_.shuffle) {
    // Fisher-Yates: position i takes a uniformly chosen element of order_[0..i].
    for (std::size_t i = order_.size() - 1; i > 0; --i) {
      std::swap(order_[i], order_[uniform_below(generator_, i + 1)]);
    }
  }
  position_ = 0;
}

Batch DataLoader::next() {
  if (position_ == batches_per_epoch()) {
    ++epoch_;
    start_epoch();
  }
  const Window& w = windows_[order_[position_]];
  ++position_;
  // This rank's rows [rank*B, (rank+1)*B) of the global window.
  const int64_t offset = options_.rank * options_.batch_size * options_.seq_len;
  return make_batch(shards_[w.shard], w.start + offset, options_.batch_size, options_.seq_len);
}

void DataLoader::reset() {
  generator_.manual_seed(options_.seed);
  epoch_ = 0;
  start_epoch();
}

int64_t DataLoader::num_tokens() const {
  int64_t n = 0;
  for (const TokenShard& s : shards_) n += s.num_tokens();
  return n;
}

}  // namespace tt
