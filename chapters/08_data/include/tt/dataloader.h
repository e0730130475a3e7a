/// @file dataloader.h
/// @brief Batches of (inputs, targets) for next-token prediction, read from token shards.
///
/// A batch of B rows of T tokens comes from one window of B*T+1 consecutive tokens w of a shard:
/// \f[ \text{inputs}[b][t] = w[bT + t], \qquad \text{targets}[b][t] = w[bT + t + 1], \f]
/// so every target is the token that follows its input. Window k of a shard starts at token
/// k*B*T (consecutive windows share one token, as in llm.c); a shard of N tokens has
/// floor((N-1) / (B*T)) windows, and windows never cross shards.
///
/// Data parallelism (chapter 12): with `world_size` = W > 1 the loader of rank r reads its part of
/// a GLOBAL batch of W*B rows. Windows are then W*B*T+1 tokens long (k*W*B*T apart) and visited
/// in the same order as by a one-process loader with batch size W*B; rank r returns rows
/// [r*B, (r+1)*B) of each, i.e. the B*T+1 tokens starting at r*B*T inside the window. So W ranks
/// with B rows read exactly the batches of one process with W*B rows, disjoint between ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tt/generator.h"
#include "tt/shards.h"
#include "tt/tensor.h"

namespace tt {

/// One batch: int64 CPU tensors of shape [B, T].
struct Batch {
  Tensor inputs;   ///< tokens[i .. i+T) of each row
  Tensor targets;  ///< tokens[i+1 .. i+T+1) of each row (inputs shifted by one)
};

/// The batch of the window of B*T+1 tokens starting at token `start` of `shard` (exercise
/// ch08.4): inputs[b][t] = shard.token(start + b*T + t), targets[b][t] = the next token.
/// Throws tt::Error when the window does not fit in the shard.
Batch make_batch(const TokenShard& shard, int64_t start, int64_t batch_size, int64_t seq_len);

/// Options of a DataLoader.
struct DataLoaderOptions {
  int64_t batch_size = 4;  ///< B: rows per batch
  int64_t seq_len = 64;    ///< T: tokens per row
  int64_t vocab_size = 0;  ///< every token must be < vocab_size (required, > 0)
  bool shuffle = false;    ///< visit the windows in a seeded random order
  uint64_t seed = 1337;    ///< seed of the shuffle
  int rank = 0;            ///< this process's rank in 0..world_size-1 (data parallelism)
  int world_size = 1;      ///< ranks sharing each global batch of world_size*batch_size rows
};

/// Iterates over the windows of one or more shards, forever, epoch after epoch.
/// Sequential mode visits shard 0's windows in order, then shard 1's, ... . Shuffle mode visits
/// every window of every shard exactly once per epoch in an order drawn (Fisher-Yates with
/// tt::Generator(seed), one permutation per epoch) so that the same seed gives the same batches
/// on every machine. Shards are memory-mapped, so they may be larger than memory.
class DataLoader {
 public:
  /// Opens and validates every shard (header, size); throws tt::Error naming the file on a bad
  /// shard, or when the shards hold no complete window.
  DataLoader(const std::vector<std::string>& shard_paths, DataLoaderOptions options);

  /// The next batch; after the last window of an epoch, starts the next epoch.
  Batch next();
  /// Back to the first batch of epoch 0 (the same sequence as a new loader).
  void reset();

  /// Windows (global batches) per epoch.
  int64_t batches_per_epoch() const { return static_cast<int64_t>(windows_.size()); }
  /// Current epoch (0 for the first pass).
  int64_t epoch() const { return epoch_; }
  /// Index, within the epoch, of the batch next() returns next.
  int64_t position() const { return position_; }
  /// Total tokens in all shards.
  int64_t num_tokens() const;
  /// The options.
  const DataLoaderOptions& options() const { return options_; }

 private:
  struct Window {
    int32_t shard;
    int64_t start;
  };
  void start_epoch();

  DataLoaderOptions options_;
  std::vector<TokenShard> shards_;
  std::vector<Window> windows_;  // in sequential order
  std::vector<int64_t> order_;   // this epoch's visiting order (indices into windows_)
  Generator generator_;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
};

/// A uniform integer in [0, n) from `gen` without modulo bias (rejection sampling); n > 0.
uint64_t uniform_below(Generator& gen, uint64_t n);

}  // namespace tt
