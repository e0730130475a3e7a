// DistributedSampler: a DataLoader reading rows [rank*B, (rank+1)*B) of each global batch.
#include "tt/dist_sampler.h"

namespace tt::dist {

DataLoaderOptions DistributedSampler::rank_options(DataLoaderOptions options, int rank,
                                                   int world_size) {
  TT_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank,
           " is not in 0..", world_size - 1, " (world size ", world_size, ")");
  options.rank = rank;
  options.world_size = world_size;
  return options;
}

DistributedSampler::DistributedSampler(const std::vector<std::string>& shard_paths,
                                       DataLoaderOptions options, int rank, int world_size)
    : loader_(shard_paths, rank_options(options, rank, world_size)) {}

DistributedSampler::DistributedSampler(const std::vector<std::string>& shard_paths,
                                       DataLoaderOptions options, const ProcessGroup& group)
    : DistributedSampler(shard_paths, options, group.rank(), group.world_size()) {}

}  // namespace tt::dist
