/// @file dist_sampler.h
/// @brief Disjoint batches for each rank from chapter 08's token shards.
///
/// Data parallelism with N ranks and B rows per rank must see exactly the batches that one
/// process would see with B*N rows: then the averaged gradient is the gradient of that global
/// batch. DistributedSampler is a chapter-08 DataLoader with options.rank = r and
/// options.world_size = N (same shards, options and seed on every rank): it visits the windows
/// of N*B*T+1 tokens in the order of a one-process loader of batch size B*N and reads rows
/// [rank*B, (rank+1)*B) of each, i.e. the tokens [start + r*B*T, start + (r+1)*B*T] of each
/// window, like llm.c's DataLoader. Ranks get disjoint rows, and shuffling, epochs and reset()
/// behave as for one process; a rank reads only its own B*T+1 tokens.
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
  /// `options.batch_size` is the per-rank B; `rank` in 0..world_size-1 (options.rank and
  /// options.world_size are replaced by them).
  DistributedSampler(const std::vector<std::string>& shard_paths, DataLoaderOptions options,
                     int rank, int world_size);
  /// The same for this process's group.
  DistributedSampler(const std::vector<std::string>& shard_paths, DataLoaderOptions options,
                     const ProcessGroup& group);
  /// This rank's B rows of the next global batch.
  Batch next() { return loader_.next(); }
  /// Back to the first batch (as a new sampler).
  void reset() { loader_.reset(); }
  /// Global batches per epoch.
  int64_t batches_per_epoch() const { return loader_.batches_per_epoch(); }
  /// The rank's loader.
  const DataLoader& loader() const { return loader_; }
  /// This rank.
  int rank() const { return loader_.options().rank; }
  /// Number of ranks.
  int world_size() const { return loader_.options().world_size; }

 private:
  static DataLoaderOptions rank_options(DataLoaderOptions options, int rank, int world_size);

  DataLoader loader_;
};

}  // namespace tt::dist
