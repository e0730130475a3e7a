// DistributedSampler: rows [rank*B, (rank+1)*B) of a global DataLoader batch of B*N rows.
#include "tt/dist_sampler.h"

namespace tt::dist {

DataLoaderOptions DistributedSampler::global_options(DataLoaderOptions options, int rank,
                                                     int world_size) {
  TT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank,
           " is not in 0..", world_size - 1, " (world size ", world_size, ")");
  TT_CHECK(options.batch_size > 0, "DistributedSampler: batch_size must be > 0, got ",
           options.batch_size);
  options.batch_size *= world_size;
  return options;
}

DistributedSampler::DistributedSampler(const std::vector<std::string>& shard_paths,
                                       DataLoaderOptions options, int rank, int world_size)
    : rank_(rank),
      world_size_(world_size),
      rows_(options.batch_size),
      loader_(shard_paths, global_options(options, rank, world_size)) {}

DistributedSampler::DistributedSampler(const std::vector<std::string>& shard_paths,
                                       DataLoaderOptions options, const ProcessGroup& group)
    : DistributedSampler(shard_paths, options, group.rank(), group.world_size()) {}

Batch DistributedSampler::next() {
  const Batch global = loader_.next();
  return {global.inputs.narrow(0, rank_ * rows_, rows_).contiguous(),
          global.targets.narrow(0, rank_ * rows_, rows_).contiguous()};
}

}  // namespace tt::dist
