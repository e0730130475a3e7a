// Chapter 08, ch08.4: make_batch (shifted targets) and the DataLoader (sequential, shuffled,
// several shards, errors).
#include <algorithm>
#include <set>

#include "ch08_test_util.h"
#include "tt/dataloader.h"

namespace tt {
namespace {

using test08::TempDir;

// A shard whose token i is (first + i) % vocab.
std::string counting_shard(const TempDir& dir, const std::string& name, int64_t n,
                           int32_t first = 0, int32_t vocab = 50257) {
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>((first + i) % vocab);
  write_shard(dir.file(name), tokens, vocab);
  return dir.file(name);
}

TEST(Ch08_4_MakeBatch, ShiftedTargets) {
  TempDir dir;
  const TokenShard shard(counting_shard(dir, "a.bin", 100, 1000), 50257);
  const Batch batch = make_batch(shard, 10, 3, 5);  // window [10, 26)
  ASSERT_EQ(batch.inputs.shape(), (Shape{3, 5}));
  ASSERT_EQ(batch.targets.shape(), (Shape{3, 5}));
  EXPECT_EQ(batch.inputs.dtype(), DType::kInt64);
  EXPECT_EQ(batch.targets.dtype(), DType::kInt64);
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = 0; t < 5; ++t) {
      EXPECT_EQ(batch.inputs.at<int64_t>({b, t}), 1000 + 10 + b * 5 + t) << b << "," << t;
      EXPECT_EQ(batch.targets.at<int64_t>({b, t}), 1000 + 10 + b * 5 + t + 1) << b << "," << t;
    }
  }
  // The last window that fits: [84, 100).
  const Batch last = make_batch(shard, 84, 3, 5);
  EXPECT_EQ(last.targets.at<int64_t>({2, 4}), 1000 + 99);
}

TEST(Ch08_4_MakeBatch, ChecksTheWindowAndTokens) {
  TempDir dir;
  const TokenShard shard(counting_shard(dir, "a.bin", 100), 50257);
  EXPECT_TT_ERROR(make_batch(shard, 85, 3, 5), "a.bin", "[85, 101)", "100 tokens");
  EXPECT_TT_ERROR(make_batch(shard, -1, 3, 5), "make_batch");
  EXPECT_TT_ERROR(make_batch(shard, 0, 0, 5), "batch_size");
  // Found by fuzz_shard: start + B*T + 1 overflowed for extreme arguments.
  EXPECT_TT_ERROR(make_batch(shard, INT64_MAX, 1, 1), "a.bin", "beyond int64", "100 tokens");
  EXPECT_TT_ERROR(make_batch(shard, 0, int64_t{1} << 32, int64_t{1} << 32), "a.bin",
                  "beyond int64");
  EXPECT_TT_ERROR(make_batch(shard, 0, INT64_MAX, 2), "a.bin", "beyond int64");
  // A token >= vocab inside the window is reported with its byte offset.
  const TokenShard small(counting_shard(dir, "b.bin", 20, 0, 50257), 12);
  EXPECT_TT_ERROR(make_batch(small, 0, 2, 8), "b.bin", "token 12 at offset 1048");
}

TEST(Ch08_DataLoader, SequentialOverShards) {
  TempDir dir;
  // B*T = 8: shard a (30 tokens) has windows at 0, 8, 16 (16 + 9 <= 30); shard b (9 tokens) has
  // one; shard c (8 tokens) is too small for a window.
  const std::vector<std::string> paths = {counting_shard(dir, "a.bin", 30, 0),
                                          counting_shard(dir, "b.bin", 9, 1000),
                                          counting_shard(dir, "c.bin", 8, 2000)};
  DataLoader loader(paths, {.batch_size = 2, .seq_len = 4, .vocab_size = 50257});
  EXPECT_EQ(loader.batches_per_epoch(), 4);
  EXPECT_EQ(loader.num_tokens(), 47);
  const std::vector<int64_t> firsts = {0, 8, 16, 1000, 0, 8};
  for (std::size_t k = 0; k < firsts.size(); ++k) {
    const Batch b = loader.next();
    EXPECT_EQ(b.inputs.at<int64_t>({0, 0}), firsts[k]) << "batch " << k;
    EXPECT_EQ(b.targets.at<int64_t>({1, 3}), firsts[k] + 8) << "batch " << k;
  }
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_EQ(loader.position(), 2);
  loader.reset();
  EXPECT_EQ(loader.epoch(), 0);
  EXPECT_EQ(loader.next().inputs.at<int64_t>({0, 0}), 0);
}

std::vector<int64_t> first_tokens(DataLoader& loader, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < n; ++k) out.push_back(loader.next().inputs.at<int64_t>({0, 0}));
  return out;
}

TEST(Ch08_DataLoader, ShuffleIsSeededAndVisitsEveryWindowOnce) {
  TempDir dir;
  const std::vector<std::string> paths = {counting_shard(dir, "a.bin", 401, 0),
                                          counting_shard(dir, "b.bin", 201, 10000)};
  const DataLoaderOptions opts{
      .batch_size = 2, .seq_len = 5, .vocab_size = 50257, .shuffle = true, .seed = 42};
  DataLoader a(paths, opts);
  DataLoader b(paths, opts);
  const int64_t n = a.batches_per_epoch();
  ASSERT_EQ(n, 40 + 20);
  const auto epoch0 = first_tokens(a, n);
  const auto epoch1 = first_tokens(a, n);
  EXPECT_EQ(first_tokens(b, 2 * n), [&] {
    auto both = epoch0;
    both.insert(both.end(), epoch1.begin(), epoch1.end());
    return both;
  }());
  // Each epoch is a permutation of the sequential windows, and epochs differ.
  std::vector<int64_t> expected;
  for (int64_t k = 0; k < 40; ++k) expected.push_back(10 * k);
  for (int64_t k = 0; k < 20; ++k) expected.push_back(10000 + 10 * k);
  for (const auto* epoch : {&epoch0, &epoch1}) {
    auto sorted = *epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, expected);
  }
  EXPECT_NE(epoch0, expected);
  EXPECT_NE(epoch0, epoch1);
  // Another seed, another order; reset() replays the first one.
  DataLoader c(paths,
               {.batch_size = 2, .seq_len = 5, .vocab_size = 50257, .shuffle = true, .seed = 43});
  EXPECT_NE(first_tokens(c, n), epoch0);
  a.reset();
  EXPECT_EQ(first_tokens(a, n), epoch0);
}

TEST(Ch08_DataLoader, Errors) {
  TempDir dir;
  const std::string tiny = counting_shard(dir, "tiny.bin", 8);
  EXPECT_TT_ERROR(DataLoader({tiny}, {.batch_size = 2, .seq_len = 4, .vocab_size = 50257}),
                  "B*T+1 = 9", "tiny.bin", ": 8");
  EXPECT_TT_ERROR(DataLoader({tiny}, {.batch_size = 0, .seq_len = 4, .vocab_size = 50257}),
                  "batch_size");
  EXPECT_TT_ERROR(DataLoader({tiny}, {.batch_size = 1, .seq_len = 4}), "vocab_size");
  EXPECT_TT_ERROR(DataLoader({}, {.batch_size = 1, .seq_len = 4, .vocab_size = 10}), "no shard");
  test08::write_bytes(dir.file("bad.bin"), std::string(2048, 'x'));
  EXPECT_TT_ERROR(
      DataLoader({tiny, dir.file("bad.bin")}, {.batch_size = 1, .seq_len = 2, .vocab_size = 50257}),
      "bad.bin", "wrong magic");
  Generator gen(1);
  EXPECT_TT_ERROR(uniform_below(gen, 0), "uniform_below");
  for (int i = 0; i < 100; ++i) EXPECT_LT(uniform_below(gen, 7), 7u);
}

}  // namespace
}  // namespace tt
