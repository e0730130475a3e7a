// train_gpt2 --cuda-graph (chapter 09's program, linked with chapter 10): its steps run through
// the graphed step runner that chapter 10 registers (fast::GraphedTrainStep behind
// gpt2::StepRunner, tt/train.h). On a GPU the run must equal the eager one bit for bit (the
// same train.csv and the same model.bin); everywhere the flag's misuses must be refused with a
// message that names the cause.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "tt/fast_step.h"
#include "tt/testing.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace tt::fast {
namespace {

using test09::run_program;
using test09::RunResult;

/// A tiny run of train_gpt2 (V = 257 from write_tiny_dataset) on `data`, one thread.
std::string tiny_options(const std::string& data) {
  return "--data '" + data + "' --threads 1 --layers 1 --heads 2 --channels 64 --B 2 --T 8 " +
         "--warmup 1 --eval-batches 1 --sample-tokens 2 ";
}

using test09::contains;

class Ch10_GraphedTrainGpt2 : public ::testing::Test {
 protected:
  void SetUp() override {
    app_ = test09::program_path("train_gpt2");
    ASSERT_FALSE(app_.empty()) << "train_gpt2 is not built next to the test binary";
    test09::write_tiny_dataset(dir_.file("data"));
  }
  /// train_gpt2 with the tiny options, `extra`, and --out <dir>/<out>.
  RunResult train(const std::string& extra, const std::string& out) {
    return run_program(app_,
                       tiny_options(dir_.file("data")) + extra + " --out '" + dir_.file(out) + "'",
                       dir_.file(out + ".log"));
  }

  std::string app_;
  test09::TempDir dir_;
};

TEST_F(Ch10_GraphedTrainGpt2, FlagMisusesAreRefusedWithTheirCause) {
  const RunResult cpu = train("--device cpu --steps 2 --cuda-graph", "cpu");
  EXPECT_EQ(cpu.status, 1) << cpu.output;
  EXPECT_TRUE(contains(cpu.output, "--cuda-graph needs --device cuda"));
  EXPECT_TRUE(contains(cpu.output, "the device is cpu"));
  const RunResult profiled = train("--device cpu --steps 2 --cuda-graph --profile-step 1", "prof");
  EXPECT_EQ(profiled.status, 1) << profiled.output;
  EXPECT_TRUE(contains(profiled.output, "--cuda-graph and --profile-step exclude each other"));
  const RunResult help = run_program(app_, "--help", dir_.file("help.log"));
  EXPECT_TRUE(contains(help.output, "--cuda-graph"));
}

/// A strategy that claims two processes (it is never asked to communicate).
class TwoRanks final : public gpt2::ParallelStrategy {
 public:
  std::string name() const override { return "ddp"; }
  int world_size() const override { return 2; }
};

TEST(Ch10_GraphedStepRunner, IsRegisteredOnceAndRefusesWhatItCannotRun) {
  ASSERT_TRUE(gpt2::has_graphed_step_runner());
  EXPECT_TT_ERROR(gpt2::register_graphed_step_runner(
                      [](gpt2::GPT2&, optim::Optimizer&, int64_t, int64_t,
                         const gpt2::TrainStepOptions&) -> std::unique_ptr<gpt2::StepRunner> {
                        return nullptr;
                      }),
                  "register_graphed_step_runner", "already registered");
  gpt2::GPT2 model(test09::tiny_config(), 3);
  optim::AdamW opt(gpt2::param_groups(model, 0.1), optim::AdamWOptions{});
  TwoRanks two;
  gpt2::TrainStepOptions so;
  so.parallel = &two;
  EXPECT_TT_ERROR(gpt2::make_graphed_step_runner(model, opt, 2, 8, so), "GraphedTrainStep",
                  "one process", "'ddp' over 2 processes");
  // One process, but the model is on the CPU (or the build has no CUDA).
  EXPECT_TT_ERROR(gpt2::make_graphed_step_runner(model, opt, 2, 8, {}), "GraphedTrainStep",
                  built_with_cuda() ? "got cpu" : "no CUDA");
}

/// Eager and graphed runs of 6 steps (2 eager warm-up steps, the capture, 3 replays) with two
/// micro-batches per step: the same logged loss, learning rate, gradient norm and validation
/// loss, and the same final parameters (model.bin byte for byte): GraphedTrainStep is bit for
/// bit chapter 09's train_step. Once with the operations train_gpt2 picks (chapter 10's "fast"
/// ones where implemented), once with chapter 09's reference ones.
/// The same runs on a GPU (skipped without one).
class Ch10_10_GraphedTrainGpt2Cuda : public Ch10_GraphedTrainGpt2 {};

TEST_F(Ch10_10_GraphedTrainGpt2Cuda, GraphedRunEqualsTheEagerRunBitForBit) {
  TT_SKIP_IF_NO_CUDA();
  for (const std::string ops : {"", "--attention naive --fused off"}) {
    SCOPED_TRACE("ops: " + (ops.empty() ? std::string("default") : ops));
    const std::string base = "--device cuda --steps 6 --total-batch 32 --eval-every 3 " + ops;
    const std::string tag = ops.empty() ? "default" : "reference";
    const RunResult eager = train(base, "eager_" + tag);
    ASSERT_EQ(eager.status, 0) << eager.output;
    const RunResult graphed = train(base + " --cuda-graph", "graphed_" + tag);
    ASSERT_EQ(graphed.status, 0) << graphed.output;
    EXPECT_TRUE(contains(graphed.output, "step: CUDA graph"));
    EXPECT_TRUE(contains(graphed.output, "grad accumulation 2"));
    const auto expected = test09::reproducible_columns(dir_.file("eager_" + tag) + "/train.csv");
    ASSERT_EQ(expected.size(), 1u + 1u + 6u) << "header, validation at step 0, 6 steps";
    EXPECT_EQ(test09::reproducible_columns(dir_.file("graphed_" + tag) + "/train.csv"), expected);
    EXPECT_EQ(test09::read_bytes(dir_.file("graphed_" + tag) + "/model.bin"),
              test09::read_bytes(dir_.file("eager_" + tag) + "/model.bin"))
        << "the final parameters differ";
  }
}

}  // namespace
}  // namespace tt::fast
