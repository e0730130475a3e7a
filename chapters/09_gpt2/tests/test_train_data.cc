// train_gpt2's data checks (tt/shard_set.h): it refuses shards encoded with another tokenizer,
// shards its set's manifest does not list, sets without a manifest, and says "is a directory"
// for a directory given as --init-llmc.
#include <filesystem>
#include <string>
#include <vector>

#include "ch09_test_util.h"
#include "tt/shards.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

namespace fs = std::filesystem;
using test08::contains;
using test09::program_path;
using test09::run_program;
using test09::RunResult;

/// train_gpt2's options for a 2-step run of a tiny model on write_tiny_dataset(data).
std::string tiny_args(const std::string& data, const std::string& out) {
  return "--data '" + data + "' --out '" + out +
         "' --device cpu --threads 1 --layers 1 --heads 2 --channels 16 --B 2 --T 8 --steps 2 "
         "--warmup 1 --eval-batches 1 --sample-tokens 2";
}

TEST(Ch09_TrainData, RefusesShardsOfAnotherTokenizerUnlistedShardsAndSetsWithoutManifest) {
  const std::string app = program_path("train_gpt2");
  ASSERT_FALSE(app.empty())
      << "train_gpt2 is not next to the test binary (build target train_gpt2)";
  const test09::TempDir dir;
  const std::string data = dir.file("data");
  const std::string args = tiny_args(data, dir.file("run"));
  // 1. The tokenizer replaced by another one (what a second tt_prepare_data into the same
  //    directory did, keeping the old shards): refused before training.
  test09::write_tiny_dataset(data);
  Tokenizer(test09::identity_bytes(), {}, {{"<|endoftext|>", 256}, {"<|pad|>", 257}})
      .save(data + "/tokenizer.ttbpe");
  RunResult r = run_program(app, args, dir.file("tok.log"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "'" + data + "' was encoded with another tokenizer"));
  EXPECT_FALSE(fs::exists(dir.file("run") + "/train.csv"));

  // 2. A shard of another run next to the set's own: refused, named.
  test09::write_tiny_dataset(data);
  write_shard(data + "/old_train_000000.bin", std::vector<int32_t>(100, 7), 257);
  r = run_program(app, args, dir.file("stray.log"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "'old_train_000000.bin' is not listed in manifest.json"));
  fs::remove(data + "/old_train_000000.bin");

  // 3. A set without a manifest (an older tt_prepare_data's): refused with what to do.
  fs::remove(data + "/manifest.json");
  r = run_program(app, args, dir.file("old.log"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "has no manifest.json"));
  EXPECT_TRUE(contains(r.output, "rerun tt_prepare_data --out " + data + " --overwrite"));

  // 4. The good set trains.
  test09::write_tiny_dataset(data);
  r = run_program(app, args, dir.file("good.log"));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(Ch09_TrainData, DirectoryGivenAsInitLlmcSaysSo) {
  const std::string app = program_path("train_gpt2");
  ASSERT_FALSE(app.empty())
      << "train_gpt2 is not next to the test binary (build target train_gpt2)";
  const test09::TempDir dir;
  test09::write_tiny_dataset(dir.file("data"));
  fs::create_directories(dir.file("model_dir"));
  const RunResult r = run_program(
      app,
      tiny_args(dir.file("data"), dir.file("run")) + " --init-llmc '" + dir.file("model_dir") + "'",
      dir.file("llmc.log"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(
      contains(r.output, "llm.c model file '" + dir.file("model_dir") + "' is a directory"));
}

}  // namespace
}  // namespace tt
