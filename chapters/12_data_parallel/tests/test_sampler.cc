// DistributedSampler: the ranks' batches are disjoint and together form one process's batch.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "tt/dist_sampler.h"
#include "tt/shards.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"

namespace tt::dist {
namespace {

/// A shard of tokens 0, 1, 2, ... (distinct, so a token identifies its position) in `dir`.
std::string write_counting_shard(const testing::TempDir& dir, int64_t n) {
  std::vector<int32_t> tokens(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = static_cast<int32_t>(i);
  const std::string path = dir.file("count_000000.bin");
  write_shard(path, tokens, 4096);
  return path;
}

TEST(Ch12_Sampler, RanksShareTheGlobalBatchWithoutOverlap) {
  const testing::TempDir dir;  // one per process: each rank writes its own
  const std::string shard = write_counting_shard(dir, 1000);
  constexpr int N = 3;
  for (bool shuffle : {false, true}) {
    const DataLoaderOptions opt{
        .batch_size = 2, .seq_len = 4, .vocab_size = 4096, .shuffle = shuffle};
    DataLoaderOptions global_opt = opt;
    global_opt.batch_size = opt.batch_size * N;
    DataLoader one_process({shard}, global_opt);
    std::vector<DistributedSampler> ranks;
    for (int r = 0; r < N; ++r) ranks.emplace_back(std::vector<std::string>{shard}, opt, r, N);
    std::set<int64_t> seen;  // first token of every row over all steps
    for (int step = 0; step < 2 * ranks[0].batches_per_epoch() + 1; ++step) {
      const Batch expected = one_process.next();
      for (int r = 0; r < N; ++r) {
        const Batch b = ranks[static_cast<std::size_t>(r)].next();
        ASSERT_EQ(b.inputs.shape(), (Shape{2, 4}));
        EXPECT_TENSOR_NEAR(b.inputs, expected.inputs.narrow(0, 2 * r, 2), 0, 0) << "rank " << r;
        EXPECT_TENSOR_NEAR(b.targets, expected.targets.narrow(0, 2 * r, 2), 0, 0) << "rank " << r;
        if (step < ranks[0].batches_per_epoch()) {  // within the first epoch
          for (int64_t row = 0; row < 2; ++row) {
            EXPECT_TRUE(seen.insert(b.inputs.at<int64_t>({row, 0})).second)
                << "rank " << r << " step " << step << " repeats a row";
          }
        }
      }
    }
  }
  EXPECT_TT_ERROR(DistributedSampler({shard}, {.vocab_size = 4096}, 3, 3), "DistributedSampler",
                  "rank 3");
}

}  // namespace
}  // namespace tt::dist
