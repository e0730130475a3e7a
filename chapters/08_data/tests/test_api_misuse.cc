// API misuse of chapter 08's public entry points that read files: the dataloader and
// make_batch. Each bad input must throw tt::Error naming the entry point and the offending
// file, size or value.
#include <string>
#include <vector>

#include "ch08_test_util.h"
#include "tt/dataloader.h"
#include "tt/shards.h"
#include "tt/testing.h"

namespace tt {
namespace {

using testing::expect_errors;

TEST(Ch08_ApiMisuse, DataLoaderNamesFilesAndSizes) {
  const test08::TempDir dir;
  const std::string shard = dir.file("s_train_000.bin");
  std::vector<int32_t> tokens(20);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 7);
  write_shard(shard, tokens, 7);
  const TokenShard ts(shard, 7);
  expect_errors({
      {"B = 0",
       [&] { DataLoader({shard}, {.batch_size = 0, .seq_len = 4, .vocab_size = 7}); },
       {"DataLoader", "B=0"}},
      {"no vocab",
       [&] { DataLoader({shard}, {.batch_size = 1, .seq_len = 4}); },
       {"DataLoader", "vocab_size", "0"}},
      {"no shards",
       [&] { DataLoader({}, {.batch_size = 1, .seq_len = 4, .vocab_size = 7}); },
       {"DataLoader", "no shard"}},
      {"too small",
       [&] { DataLoader({shard}, {.batch_size = 4, .seq_len = 8, .vocab_size = 7}); },
       {"DataLoader", "B*T+1 = 33", "20"}},
      {"token >= vocab",
       [&] { DataLoader({shard}, {.batch_size = 1, .seq_len = 8, .vocab_size = 5}).next(); },
       {shard, "token 5"}},
      {"missing file",
       [&] { DataLoader({dir.file("nope.bin")}, {.batch_size = 1, .vocab_size = 7}); },
       {"nope.bin"}},
      {"window", [&] { make_batch(ts, 10, 2, 5); }, {"make_batch", "[10, 21)", "20 tokens"}},
      {"negative start", [&] { make_batch(ts, -1, 1, 4); }, {"make_batch", "-1"}},
  });
}

}  // namespace
}  // namespace tt
