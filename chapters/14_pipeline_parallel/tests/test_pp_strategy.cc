// The ParallelStrategy "pp" that train_gpt2 --pp runs (src/pp_strategy.cc), driven as the
// training library drives it: DP x PP x TP layouts of the world (TP2 x PP2 on 4 ranks) give the
// losses and gradient norms of one process within fp32 1e-5 over 20 steps; their checkpoints
// are one-process checkpoints (whole tensors) that every layout resumes; each rank holds only
// the parameters of its stages (those its optimizer updates); misuse is refused on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "ch14_test_util.h"
#include "tt/checkpoint.h"
#include "tt/dist.h"
#include "tt/parallel.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace {

using tt::Batch;
using tt::Tensor;
using tt::gpt2::GPT2;
namespace dist = tt::dist;

constexpr int64_t kRows = 8, kT = 8;  // rows per step (all replicas), tokens per row
constexpr int kMicro = 4;             // micro-batches per batch of a replica
constexpr uint64_t kSeed = 11;
using tt::test14::kTol;

tt::gpt2::GPT2Config config() {
  tt::gpt2::GPT2Config c = tt::test09::tiny_config();
  c.n_layer = 4;  // one block per stage at PP = 4
  return c;
}

using tt::test14::adam;
using tt::test14::Layout;

// The global batch of step `step`: kRows rows, the same on every rank.
Batch global_batch(int64_t step) {
  return tt::test09::fixed_batch(kRows, kT, config().vocab_size, 300 + static_cast<uint64_t>(step));
}

// One process: train_step on the whole global batch of each step, with operation set `ops`.
struct OneProcess : tt::test14::OneProcessRun {
  explicit OneProcess(int steps, const std::string& ops = "reference")
      : OneProcessRun(config(), kSeed, steps, global_batch, ops) {}
};

// The layouts of a world of n ranks; the first is the one every test trains longest.
std::vector<Layout> layouts(int n) {
  if (n == 4) return {{1, 2, 2, "1f1b", 1}, {2, 1, 2, "afab", 1}, {1, 1, 4, "1f1b", 1}};
  if (n == 2) return {{1, 1, 2, "1f1b", 1}, {1, 2, 1, "afab", 1}, {1, 1, 2, "interleaved", 2}};
  return {{n, 1, 1, "1f1b", 1}};
}

// A model trained through the strategy "pp" as Gpt2Family and the Trainer use it.
struct StrategyRun : tt::test14::StrategyRun {
  explicit StrategyRun(const Layout& l, const std::string& ops = "reference",
                       const std::string& partition = "flops")
      : tt::test14::StrategyRun(config(), kSeed, l, kMicro, kRows, kT, global_batch, ops,
                                partition) {}
};

// The rank holds the parameters its optimizer updates (its stages', its tp parts) and, of the
// others, only the ln_1 after a stage (GPT2Stages::boundary_parameters): the rest are empty
// tensors, so with several stages it holds less than the whole model.
void expect_only_own_stages(const StrategyRun& run, const Layout& l) {
  std::vector<Tensor> updated;
  for (const tt::optim::ParamGroup& g : run.optimizer->param_groups()) {
    updated.insert(updated.end(), g.params.begin(), g.params.end());
  }
  for (const auto& named : run.model.named_parameters()) {
    // (Not a structured binding: clang's C++20 does not capture one in the lambda.)
    const std::string& name = named.first;
    const Tensor& t = named.second;
    const bool own =
        std::any_of(updated.begin(), updated.end(), [&](const Tensor& u) { return u.is_same(t); });
    if (own) {
      EXPECT_GT(t.numel(), 0) << name;
    } else if (t.numel() > 0) {
      EXPECT_NE(name.find(".ln_1."), std::string::npos) << name << " is held, not trained";
    }
  }
  if (l.pp > 1) {
    EXPECT_LT(run.model.num_parameters(), GPT2(config(), kSeed).num_parameters());
  }
}

TEST(Ch14_PipelineStrategy, EqualsOneProcessMpi) {
  // The first layout for 20 steps on 4 ranks (TP2 x PP2; 8 on fewer ranks, 4 under the
  // sanitizers), the others for 4; then its checkpoint, gathered whole, is what one process
  // holds after those steps.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const int longest = tt::testing::steps_unless_sanitized(world.world_size() == 4 ? 20 : 8, 4);
  const OneProcess ref(longest);
  tt::testing::TempDir dir;
  const std::string path = tt::test14::rank0_path(world, dir.file("pp.ckpt"));
  bool first = true;
  for (const Layout& l : layouts(world.world_size())) {
    SCOPED_TRACE(l.str());
    StrategyRun run(l);
    tt::test14::expect_steps_of_one_process(run, ref, first ? longest : 4, kRows * kT);
    expect_only_own_stages(run, l);
    if (first) {
      run.par->save_checkpoint(path, run.model, *run.optimizer);
      tt::test14::expect_one_process_checkpoint(path, ref, longest);
    }
    first = false;
  }
  world.barrier();  // rank 0's file is read before its directory goes
}

TEST(Ch14_PipelineStrategy, CheckpointResumesUnderEveryLayoutMpi) {
  // 3 steps under the first layout, saved; each layout (and one process) resumes it for 2 steps:
  // the losses of one uninterrupted process.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  const OneProcess ref(5);
  const std::vector<Layout> all = layouts(world.world_size());
  tt::testing::TempDir dir;
  const std::string path = tt::test14::rank0_path(world, dir.file("pp.ckpt"));
  {
    StrategyRun run(all.front());
    for (int s = 0; s < 3; ++s) run.train();
    run.par->save_checkpoint(path, run.model, *run.optimizer);
  }
  for (const Layout& l : all) {
    SCOPED_TRACE("resumed under " + l.str());
    StrategyRun run(l);
    run.par->load_checkpoint(path, run.model, *run.optimizer);
    EXPECT_EQ(run.optimizer->step_count(), 3);
    expect_only_own_stages(run, l);
    run.step = 3;
    for (int s = 3; s < 5; ++s) EXPECT_NEAR(run.train().loss, ref.losses[s], kTol) << "step " << s;
  }
  // One process (chapter 09's own checkpoint loader) resumes it too.
  GPT2 model(config(), /*seed=*/99);
  tt::optim::AdamW optimizer(tt::gpt2::param_groups(model, 0.1), adam());
  tt::ckpt::load_checkpoint(path, model, &optimizer);
  for (int s = 3; s < 5; ++s) {
    const auto r = tt::gpt2::train_step(model, optimizer, [s] { return global_batch(s); },
                                        {.max_grad_norm = 1.0});
    EXPECT_NEAR(r.loss, ref.losses[s], kTol) << "one process, step " << s;
  }
  world.barrier();
}

TEST(Ch14_PipelineStrategy, FusedOperationSetsEqualOneProcessMpi) {
  // The stages run the operation set's fused loop (GPT2::run_blocks): chapter 10's "fast" set
  // (fused residual + LayerNorm, also at the stage boundaries) and chapter 11's "bf16" (emulated
  // on the CPU, with its master-weight AdamW; measured 1e-6 from one bf16 process) within 1e-5.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  // (bf16 without tensor parallelism: MPI has no bfloat16 for chapter 13's all-reduces.)
  const std::vector<Layout> all = layouts(world.world_size());
  const Layout no_tp =
      *std::find_if(all.begin(), all.end(), [](const Layout& l) { return l.tp == 1; });
  for (const auto& [ops, tol, layout] :
       {std::tuple{"fast", kTol, all.front()}, std::tuple{"bf16", kTol, no_tp}}) {
    if (!tt::gpt2::has_model_ops(ops)) continue;
    SCOPED_TRACE(std::string(ops) + ", " + layout.str());
    const OneProcess ref(3, ops);
    StrategyRun run(layout, ops);
    for (int s = 0; s < 3; ++s) {
      const auto r = run.train();
      EXPECT_NEAR(r.loss, ref.losses[s], tol) << "step " << s;
      EXPECT_NEAR(r.grad_norm, ref.norms[s], tol * std::max(1.0, ref.norms[s])) << "step " << s;
    }
  }
  world.barrier();
}

TEST(Ch14_PipelineStrategy, MeasuredPartitionEqualsOneProcessMpi) {
  // --pp-partition measured: the model stays whole until make_optimizer has timed its parts
  // (here on the CPU) and the ranks agreed on the costs; then each rank keeps its stages only,
  // and the steps are one process's. The cut may differ from the FLOP model's; the math does not.
  const tt::ScopedNumThreads one(1);
  dist::ProcessGroup& world = dist::world();
  for (const Layout& l : layouts(world.world_size())) {
    if (l.tp > 1) continue;  // measured costs are timed unsplit (refused with tp > 1)
    SCOPED_TRACE(l.str());
    const OneProcess ref(2);
    StrategyRun run(l, "reference", "measured");
    expect_only_own_stages(run, l);
    tt::test14::expect_steps_of_one_process(run, ref, 2, kRows * kT);
    // The plan names the partition, its costs in ms and the predicted balance.
    const std::string plan = run.runner->description();
    EXPECT_NE(plan.find("partition measured: costs (ms) per block:"), std::string::npos) << plan;
    EXPECT_NE(plan.find("predicted max stage"), std::string::npos) << plan;
  }
  // With tensor parallelism the timed blocks would not be the split ones: refused.
  auto par = tt::gpt2::make_parallel_strategy("pp");
  if (world.world_size() % 2 == 0) {
    par->set_model_parallelism(2, false);
    try {
      par->set_pipeline({world.world_size() / 2, kMicro, "1f1b", 1, "measured", 1, kT});
      ADD_FAILURE() << "measured with tp 2 was accepted";
    } catch (const tt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("--pp-partition measured"), std::string::npos)
          << e.what();
    }
  }
  world.barrier();
}

TEST(Ch14_PipelineStrategy, MisuseIsRefusedOnEveryRankMpi) {
  dist::ProcessGroup& world = dist::world();
  const int n = world.world_size();
  const auto message = [](const Layout& l, int micro_batches) {
    try {
      auto par = tt::gpt2::make_parallel_strategy("pp");
      par->set_model_parallelism(l.tp, false);
      par->set_pipeline({l.pp, micro_batches, l.schedule, l.chunks});
      GPT2 model(config(), kSeed);
      par->prepare_model(model);
      auto optimizer = par->make_optimizer(model, tt::gpt2::param_groups(model, 0.1), adam());
      par->make_step_runner(model, *optimizer, kRows / l.dp, kT, {});
    } catch (const tt::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  // pp x tp does not divide the world.
  const std::string world_size = message({1, 1, n + 1, "1f1b", 1}, kMicro);
  EXPECT_NE(world_size.find("do not divide the world of " + std::to_string(n)), std::string::npos)
      << world_size;
  // Sequence parallelism would send parts of sequences between the stages.
  auto par = tt::gpt2::make_parallel_strategy("pp");
  EXPECT_THROW(par->set_model_parallelism(1, true), tt::Error);
  if (n % 2 == 0) {
    // Interleaved with m = 2 micro-batches on p = 2 stages (m >= 2p needed).
    const std::string m = message({n / 2, 1, 2, "interleaved", 2}, 2);
    EXPECT_NE(m.find("at least 2p"), std::string::npos) << m;
    // More stages than blocks: 2 stages x 3 chunks for 4 blocks.
    const std::string layers = message({n / 2, 1, 2, "interleaved", 3}, 6);
    EXPECT_NE(layers.find("more stages than layers"), std::string::npos) << layers;
  }
  world.barrier();  // every rank threw before any collective it could not finish
}

}  // namespace
