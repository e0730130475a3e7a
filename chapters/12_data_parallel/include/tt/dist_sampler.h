/// @file dist_sampler.h
/// @brief Disjoint batches for each rank from chapter 08's token shards.
///
/// Data parallelism with N ranks and B rows per rank must see exactly the batches that one
/// process would see with B*N rows: then the averaged gradient is the gradient of that global
/// batch. DistributedSampler does it by drawing the global batch with a chapter-08 DataLoader of
/// batch size B*N (same shards, options and seed on every rank) and keeping rows
/// [rank*B, (rank+1)*B): rank r reads the tokens [start + r*B*T, start + (r+1)*B*T] of each
/// window, like llm.c's DataLoader. Ranks get disjoint rows, and shuffling, epochs and reset()
/// behave as for one process.
///
/// The cost: every rank materialises the whole global batch (N*B*T int64 tokens, small next to
/// a step) before keeping its rows; a rank/world option in DataLoader would avoid that.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tt/dataloader.h"
#include "tt/dist.h"

namespace tt::dist {

/// Each rank's share of the global batch (see the file comment).
class DistributedSampler {
 public:
  /// `options.batch_size` is the per-rank B; `rank` in 0..world_size-1.
  DistributedSampler(const std::vector<std::string>& shard_paths, DataLoaderOptions options,
                     int rank, int world_size);
  /// The same for this process's group.
  DistributedSampler(const std::vector<std::string>& shard_paths, DataLoaderOptions options,
                     const ProcessGroup& group);
  /// This rank's B rows of the next global batch.
  Batch next();
  /// Back to the first batch (as a new sampler).
  void reset() { loader_.reset(); }
  /// Global batches per epoch.
  int64_t batches_per_epoch() const { return loader_.batches_per_epoch(); }
  /// The global loader (batch size B*N).
  const DataLoader& global_loader() const { return loader_; }
  /// This rank.
  int rank() const { return rank_; }
  /// Number of ranks.
  int world_size() const { return world_size_; }

 private:
  static DataLoaderOptions global_options(DataLoaderOptions options, int rank, int world_size);

  int rank_, world_size_;
  int64_t rows_;  // B
  DataLoader loader_;
};

}  // namespace tt::dist
