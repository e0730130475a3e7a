// Helpers shared by chapter 14's tests (and chapter 16's PP x CP test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "tt/checkpoint.h"
#include "tt/dataloader.h"
#include "tt/dist.h"
#include "tt/gpt2.h"
#include "tt/optim.h"
#include "tt/tensor.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace tt::test14 {

/// Rank 0's `path` on every rank of `world` (a collective): where rank 0 alone writes a
/// checkpoint that every rank then reads.
inline std::string rank0_path(dist::ProcessGroup& world, const std::string& path) {
  std::vector<int64_t> chars(1024, 0);
  std::copy_n(path.begin(), std::min<std::size_t>(path.size(), chars.size() - 1), chars.begin());
  Tensor t = from_vector(chars, {static_cast<int64_t>(chars.size())});
  world.broadcast(t, 0);
  std::string out;
  for (int64_t c : t.to_vector<int64_t>()) {
    if (c == 0) break;
    out.push_back(static_cast<char>(c));
  }
  return out;
}

/// Losses and gradient norms of a layout against one process, float32.
constexpr double kTol = 1e-5;
/// The parameters and AdamW moments after a run: a layout that sums in another order (a split
/// GEMM with tp > 1, ring attention's merged blocks with cp > 1) rounds differently, and AdamW's
/// m / (sqrt(v) + eps) turns those roundings into parameter steps of up to lr on small-gradient
/// entries. On an AVX-512 host (Eigen's other GEMM blocking) TP2 x PP2 ended 20 steps 1.3e-5
/// from one process; losses and norms stay within kTol.
constexpr double kStateTol = 5e-5;

/// The AdamW settings of the strategy tests (lr 3e-3, the rest AdamW's defaults).
inline optim::AdamWOptions adam() {
  optim::AdamWOptions o;
  o.lr = 3e-3;
  return o;
}

/// The global batch of a step (the same on every rank), by step number.
using GlobalBatches = std::function<Batch(int64_t step)>;

/// One process: gpt2::train_step on the whole global batch of each of `steps` steps, with
/// operation set `ops` (and its AdamW: chapter 11's master weights for "bf16"), clipping at 1.
struct OneProcessRun {
  gpt2::GPT2 model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<double> losses, norms;

  OneProcessRun(const gpt2::GPT2Config& config, uint64_t seed, int steps,
                const GlobalBatches& batches, const std::string& ops = "reference")
      : model(config, seed) {
    model.set_ops(gpt2::model_ops(ops));
    const gpt2::ModelOps& set = model.ops();
    optimizer = set.adamw ? set.adamw(gpt2::param_groups(model, 0.1), adam())
                          : std::make_unique<optim::AdamW>(gpt2::param_groups(model, 0.1), adam());
    for (int s = 0; s < steps; ++s) {
      const auto r =
          gpt2::train_step(model, *optimizer, [&] { return batches(s); }, {.max_grad_norm = 1.0});
      losses.push_back(r.loss);
      norms.push_back(r.grad_norm);
    }
  }
};

/// A layout of the strategy "pp": dp x pp x cp x tp ranks (cp: chapter 16's context
/// parallelism), the schedule and its chunks per rank.
struct Layout {
  int dp = 1, tp = 1, pp = 1;
  const char* schedule = "1f1b";
  int chunks = 1;
  int cp = 1;
  std::string str() const {
    return "dp" + std::to_string(dp) + " x pp" + std::to_string(pp) +
           (cp > 1 ? " x cp" + std::to_string(cp) : std::string()) + " x tp" + std::to_string(tp) +
           " " + schedule;
  }
};

/// A model trained through the strategy "pp" as Gpt2Family and the Trainer use it, set up in
/// train_gpt2's order (set_model_parallelism, set_context_parallelism, set_pipeline,
/// prepare_model, model_ops, make_optimizer, make_step_runner): `micro_batches` per batch of a
/// replica, `rows` rows of T tokens per global batch, with operation set `ops`, the blocks
/// weighed by `partition` (--pp-partition: "flops" or "measured").
struct StrategyRun {
  std::unique_ptr<gpt2::ParallelStrategy> par = gpt2::make_parallel_strategy("pp");
  gpt2::GPT2 model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<gpt2::StepRunner> runner;
  int64_t step = 0;  ///< the next global batch's step

  StrategyRun(const gpt2::GPT2Config& config, uint64_t seed, const Layout& l, int micro_batches,
              int64_t rows, int64_t T, GlobalBatches batches, const std::string& ops = "reference",
              const std::string& partition = "flops")
      : model(config, seed), rows_(rows), batches_(std::move(batches)) {
    par->set_model_parallelism(l.tp, false);
    par->set_context_parallelism(l.cp);
    par->set_pipeline(
        {l.pp, micro_batches, l.schedule, l.chunks, partition, rows / l.dp / micro_batches, T});
    par->prepare_model(model);
    const gpt2::ModelOps set = gpt2::model_ops(ops);
    model.set_ops(par->model_ops(set));
    optimizer = par->make_optimizer(model, gpt2::param_groups(model, 0.1), adam(), set.adamw);
    gpt2::TrainStepOptions options;
    options.max_grad_norm = 1.0;
    options.parallel = par.get();
    runner = par->make_step_runner(model, *optimizer, rows / l.dp, T, options);
  }
  /// One step on this replica's rows of the next global batch (its cp ranks read them whole).
  gpt2::TrainStepResult train() {
    const Batch all = batches_(step++);
    const int64_t rows = rows_ / par->data_world_size(), first = par->data_rank() * rows;
    return runner->step([&] {
      return Batch{all.inputs.narrow(0, first, rows).contiguous(),
                   all.targets.narrow(0, first, rows).contiguous()};
    });
  }

 private:
  int64_t rows_;
  GlobalBatches batches_;
};

/// `steps` steps of `run` (from its next step on) give `ref`'s losses within kTol and its
/// gradient norms within kTol (relative above 1), each step counting `tokens` tokens.
inline void expect_steps_of_one_process(StrategyRun& run, const OneProcessRun& ref, int steps,
                                        int64_t tokens) {
  for (int i = 0; i < steps; ++i) {
    const auto s = static_cast<std::size_t>(run.step);
    const gpt2::TrainStepResult r = run.train();
    ASSERT_TRUE(r.finite) << "step " << s;
    EXPECT_NEAR(r.loss, ref.losses.at(s), kTol) << "step " << s;
    EXPECT_NEAR(r.grad_norm, ref.norms.at(s), kTol * std::max(1.0, ref.norms.at(s)))
        << "step " << s;
    EXPECT_EQ(r.tokens, tokens) << "step " << s;
  }
}

/// The checkpoint at `path` loaded into a one-process model (of other weights) and AdamW equals
/// `ref`'s state after `steps` steps: parameters and moments within kStateTol.
inline void expect_one_process_checkpoint(const std::string& path, const OneProcessRun& ref,
                                          int steps) {
  gpt2::GPT2 model(ref.model.config(), /*seed=*/99);  // the file must replace every weight
  optim::AdamW optimizer(gpt2::param_groups(model, 0.1), adam());
  ckpt::load_checkpoint(path, model, &optimizer);
  EXPECT_EQ(optimizer.step_count(), steps);
  for (const auto& [name, t] : model.named_parameters()) {
    EXPECT_LE(test09::max_abs_diff(t, ref.model.parameter(name)), kStateTol) << name;
  }
  const nn::StateDict want = ref.optimizer->state_dict();
  const nn::StateDict got = optimizer.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, want[i].first);
    if (got[i].first.starts_with("state.")) {
      EXPECT_LE(test09::max_abs_diff(got[i].second, want[i].second), kStateTol) << got[i].first;
    }
  }
}

}  // namespace tt::test14
