// PP x CP: chapter 14's strategy "pp" (train_gpt2 --pp P --cp J) with chapter 16's context-
// parallel operations on each stage, driven as the training library drives it. The world is a
// grid dp x pp x cp x tp; each cp rank of a stage holds T/cp positions of every micro-batch
// (zigzag), sends [B/M, T/cp, C] to the next stage, and runs ring attention over its stage's cp
// group. PP2 x CP2 on 4 ranks (CP2 alone through the pipeline on 2) gives the losses and
// gradient norms of one process within fp32 1e-5 over 20 AdamW steps, and so do PP2 x CP2 AFAB,
// PP1 x CP2 x TP2 and DP2 x CP2 (through the pipeline) over 4; its checkpoint holds one
// process's parameters and moments (read by one process's loader) and every layout resumes it;
// misuse is refused on every rank alike.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "../../14_pipeline_parallel/tests/ch14_test_util.h"
#include "tt/dist.h"
#include "tt/error.h"
#include "tt/gpt2.h"
#include "tt/parallel.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"
#include "tt/train.h"
#include "tt/train_config.h"
#include "tt/train_parallel.h"

namespace {

using tt::Batch;
using tt::test14::Layout;
namespace dist = tt::dist;

// Per step 8 rows of 8 tokens (all replicas), cut into 2 micro-batches per replica: at CP2 each
// rank holds 2 zigzag chunks of 2 tokens of every row.
constexpr int64_t kRows = 8, kT = 8;
constexpr int kMicro = 2;
constexpr uint64_t kSeed = 23;

// 2 blocks: one per stage at PP = 2.
tt::gpt2::GPT2Config config() {
  return tt::test09::tiny_config();
}

// The global batch of step `step` (the same on every rank): random tokens, each followed by
// (7 t + 3) mod V, so the curve falls.
Batch global_batch(int64_t step) {
  const int64_t V = config().vocab_size;
  const Batch b = tt::test09::fixed_batch(kRows, kT, V, 500 + static_cast<uint64_t>(step));
  std::vector<int64_t> targets = b.inputs.to_vector<int64_t>();
  for (int64_t& t : targets) t = (7 * t + 3) % V;
  return {b.inputs, tt::from_vector(targets, b.inputs.shape())};
}

// One process: train_step on the whole global batch of each step.
struct OneProcess : tt::test14::OneProcessRun {
  explicit OneProcess(int steps) : OneProcessRun(config(), kSeed, steps, global_batch) {}
};

// The layouts of a world of n ranks (dp, tp, pp, schedule, chunks, cp); the first is the one
// trained for 20 steps: PP2 x CP2 on 4 ranks, CP2 through the pipeline on 2.
std::vector<Layout> layouts(int n) {
  if (n == 4) {
    return {{.dp = 1, .tp = 1, .pp = 2, .schedule = "1f1b", .cp = 2},
            {.dp = 1, .tp = 1, .pp = 2, .schedule = "afab", .cp = 2},
            {.dp = 1, .tp = 2, .pp = 1, .schedule = "1f1b", .cp = 2},
            {.dp = 2, .tp = 1, .pp = 1, .schedule = "1f1b", .cp = 2}};
  }
  if (n == 2) return {{.dp = 1, .tp = 1, .pp = 1, .cp = 2}, {.dp = 1, .tp = 1, .pp = 2, .cp = 1}};
  return {{.dp = n}};
}

// A model trained through the strategy "pp" with sequences of T tokens.
struct StrategyRun : tt::test14::StrategyRun {
  explicit StrategyRun(const Layout& l, int64_t T = kT)
      : tt::test14::StrategyRun(config(), kSeed, l, kMicro, kRows, T, global_batch) {}
};

TEST(Ch16_PipelineContextParallel, EqualsOneProcessMpi) {
  // The first layout for 20 steps (PP2 x CP2 on 4 ranks; 4 under the sanitizers), the others
  // for 4; the first one's checkpoint, gathered whole, is what one process holds after those
  // steps, and the other layouts resume it.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const int longest = tt::testing::steps_unless_sanitized(20, 4);
  const OneProcess ref(longest + 2);
  ASSERT_LT(ref.losses[longest - 1], ref.losses.front() - 0.1) << "the curve must move";
  tt::testing::TempDir dir;
  const std::string path = tt::test14::rank0_path(world, dir.file("ppcp.ckpt"));
  const std::vector<Layout> all = layouts(world.world_size());
  for (const Layout& l : all) {
    SCOPED_TRACE(l.str());
    const bool first = &l == &all.front();
    StrategyRun run(l);
    if (first) {
      EXPECT_NE(run.runner->description().find(" x cp=" + std::to_string(l.cp)), std::string::npos)
          << run.runner->description();
      EXPECT_EQ(l.cp > 1,
                run.model.ops().description.find("context parallel (cp=") != std::string::npos)
          << run.model.ops().description;
    }
    tt::test14::expect_steps_of_one_process(run, ref, first ? longest : 4, kRows * kT);
    if (!first) continue;
    run.par->save_checkpoint(path, run.model, *run.optimizer);
    tt::test14::expect_one_process_checkpoint(path, OneProcess(longest), longest);
  }
  // Every layout resumes the first one's checkpoint: the next 2 steps of one process.
  for (const Layout& l : all) {
    SCOPED_TRACE("resumed under " + l.str());
    StrategyRun run(l);
    run.par->load_checkpoint(path, run.model, *run.optimizer);
    EXPECT_EQ(run.optimizer->step_count(), longest);
    run.step = longest;
    tt::test14::expect_steps_of_one_process(run, ref, 2, kRows * kT);
  }
  world.barrier();  // rank 0's file is read before its directory goes
}

TEST(Ch16_PipelineContextParallel, MisuseIsRefusedOnEveryRankMpi) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size();
  const auto message = [](const Layout& l, int64_t T) {
    try {
      StrategyRun run(l, T);
    } catch (const tt::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // pp x cp x tp does not divide the world (2 x 3 x 1 = 6 ranks per replica).
  const std::string world_size = message({.dp = 1, .tp = 1, .pp = 2, .cp = 3}, kT);
  EXPECT_NE(world_size.find("cp=3"), std::string::npos) << world_size;
  EXPECT_NE(world_size.find("do not divide the world of " + std::to_string(n)), std::string::npos)
      << world_size;
  if (n % 2 == 0) {
    // T = 6 cannot be cut into 2 x cp = 4 zigzag chunks (refused before any collective of the
    // pipeline).
    const std::string t = message({.dp = n / 2, .tp = 1, .pp = 1, .cp = 2}, 6);
    EXPECT_NE(t.find("T = 6"), std::string::npos) << t;
    EXPECT_NE(t.find("zigzag chunks"), std::string::npos) << t;
  }
  // Sequence parallelism would send parts of sequences between the stages.
  auto par = tt::gpt2::make_parallel_strategy("pp");
  EXPECT_THROW(par->set_model_parallelism(2, true), tt::Error);
  // train_gpt2's options: --pp with --cp needs T divisible by 2 cp.
  EXPECT_THROW(tt::train::TrainConfig::parse_args({"--pp", "2", "--cp", "2", "--T", "6"}),
               tt::Error);
  EXPECT_NO_THROW(tt::train::TrainConfig::parse_args({"--pp", "2", "--cp", "2", "--T", "8"}));
  world.barrier();  // every rank threw before any collective it could not finish
}

}  // namespace
