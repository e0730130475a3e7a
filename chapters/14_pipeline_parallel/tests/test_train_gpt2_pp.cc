// The real train_gpt2 (chapter 09's program with chapter 14's strategy "pp") on a tiny generated
// dataset: --pp 2 (1F1B, 2 micro-batches per batch) logs the losses of one process with the same
// batch, and its checkpoint (whole tensors) is resumed by one process like an uninterrupted run;
// the pipeline's flags are validated before anything runs, and what only the world can tell
// fails on every rank before the first step. Not an "Mpi" test: it starts mpirun itself, from a
// plain process (2 ranks at most, like the sanitizer build's multi-process tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "tt/dist.h"
#include "tt/train_config.h"

namespace {

namespace test09 = tt::test09;
using ch12_test::JobResult;

class Ch14_TrainGpt2Pp : public ::testing::Test {
 protected:
  test09::TempDir dir_;

  /// train_gpt2 with `extra` options under `mpirun -np np` (np 1: the one-process reference) on
  /// the tiny dataset: steps of 64 tokens (B=8 rows of T=8), a constant learning rate after one
  /// warm-up step (so that a run of 5 steps continued to 8 is one run of 8), checkpoints every
  /// 3 steps and at the end, validation at 0, 5 and the end.
  JobResult train(int np, const std::string& extra, const std::string& out) {
    const std::string data = dir_.file("data");
    if (!std::filesystem::exists(data + "/manifest.json")) test09::write_tiny_dataset(data);
    return ch12_test::run_mpi_job(
        np, ch12_test::program_path("train_gpt2"),
        "--data '" + data + "' --out '" + dir_.file(out) +
            "' --device cpu --threads 1 --layers 2 --heads 4 --channels 32 --T 8 --B 8 "
            "--warmup 1 --min-lr-frac 1 --eval-every 5 --eval-batches 1 --sample-tokens 2 "
            "--checkpoint-every 3 --precision fp32 " +
            extra);
  }
  void SetUp() override {
    if (!tt::dist::built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job";
  }
  /// The first `rows` rows of `out`'s log equal `expected`'s in step, loss, lr, grad norm and
  /// val loss, to the 6 digits of the log (%.6g: one unit of the last digit is up to 1e-5
  /// relative; the micro-batches sum in another order, so values may round to neighbouring
  /// last digits).
  void expect_same_log(const std::string& out, const std::string& expected, std::size_t rows) {
    const auto got = test09::reproducible_columns(dir_.file(out) + "/train.csv");
    const auto want = test09::reproducible_columns(dir_.file(expected) + "/train.csv");
    ASSERT_GE(got.size(), rows) << out;
    ASSERT_GE(want.size(), rows) << expected;
    for (std::size_t i = 1; i < rows; ++i) {
      ASSERT_EQ(got[i][0], want[i][0]) << out << " row " << i << ": another step";
      for (std::size_t c = 1; c < got[i].size(); ++c) {
        const double a = got[i][c].empty() ? NAN : std::stod(got[i][c]);
        const double b = want[i][c].empty() ? NAN : std::stod(want[i][c]);
        EXPECT_TRUE(std::isnan(a) == std::isnan(b) &&
                    (std::isnan(a) || std::fabs(a - b) <= 2e-5 * std::fabs(b) + 1e-7))
            << out << " row " << i << " column " << c << ": " << got[i][c] << " vs " << want[i][c];
      }
    }
  }
};

TEST_F(Ch14_TrainGpt2Pp, PipelineLogsTheLossesOfOneProcessAndOneProcessResumesIt) {
  const JobResult one = train(1, "--steps 8", "one");
  ASSERT_EQ(one.status, 0) << one.output;
  // PP2 (one block per stage), 1F1B over 2 micro-batches of 4 rows, for 5 steps, each rank
  // holding its stage only, the validation loss through the stages: its checkpoint at step 5 is
  // gathered from both stages ...
  const JobResult pp = train(2, "--steps 5 --pp 2 --micro-batches 2", "pp2");
  ASSERT_EQ(pp.status, 0) << pp.output;
  for (const char* line :
       {"parallel: pp over 2 processes: 1 data-parallel replica(s) of 2 ranks",
        "step: pipeline 1f1b p=2 m=2 v=1", "each rank holds its stages' parameters only"}) {
    EXPECT_NE(pp.output.find(line), std::string::npos) << "no '" << line << "' in\n" << pp.output;
  }
  const std::size_t rows = test09::read_csv(dir_.file("pp2") + "/train.csv").size();
  expect_same_log("pp2", "one", rows);  // steps 1-5 and the validation at 0 and 5
  // ... resumed by one process for 3 more steps: steps 1-5 logged by the pipeline and 6-8 by
  // one process make the log of the uninterrupted one-process run.
  const JobResult resumed = train(1, "--steps 8 --resume --override steps", "pp2");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 5"), std::string::npos) << resumed.output;
  const std::size_t all = test09::read_csv(dir_.file("one") + "/train.csv").size();
  ASSERT_EQ(test09::read_csv(dir_.file("pp2") + "/train.csv").size(), all);
  expect_same_log("pp2", "one", all);
}

TEST_F(Ch14_TrainGpt2Pp, MeasuredPartitionPrintsItsCostsAndCut) {
  // --pp-partition measured: the parts timed on each rank's device (here the CPU) before the
  // optimizer, the plan printed with the costs in ms, the cut and the predicted balance.
  const JobResult r =
      train(2, "--steps 2 --layers 4 --pp 2 --micro-batches 2 --pp-partition measured", "meas");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"partition measured: costs (ms) per block:",
                           "cut: stage 0 = embedding + block", "predicted max stage", "step 2/"}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << "no '" << line << "' in\n" << r.output;
  }
}

TEST_F(Ch14_TrainGpt2Pp, AnErrorAfterTheStartFailsOnEveryRank) {
  // Interleaved: m = 2 micro-batches per step on p = 2 stages (m >= 2p needed), found when the
  // pipeline is made (after the grid, the data and the model): every rank stops, none hangs.
  // (What the flags alone tell is Ch14_TrainConfigPp's, what the world tells
  // Ch14_PipelineStrategy.MisuseIsRefusedOnEveryRankMpi's.)
  const JobResult r =
      train(2, "--steps 8 --layers 4 --pp 2 --schedule interleaved --micro-batches 2", "bad");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("at least 2p"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
}

TEST(Ch14_TrainConfigPp, PipelineFlagsAreCheckedBeforeAnythingRuns) {
  const auto error = [](const std::vector<std::string>& args) {
    try {
      tt::train::TrainConfig::parse_args(args);
    } catch (const tt::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(
      error({"--pp", "2", "--B", "8", "--micro-batches", "3"}).find("--B 8 is not a multiple"),
      std::string::npos);
  EXPECT_NE(error({"--pp", "4", "--layers", "2"}).find("more stages than layers"),
            std::string::npos);
  EXPECT_NE(error({"--pp", "2", "--layers", "2", "--schedule", "interleaved"})
                .find("more stages than layers"),
            std::string::npos);
  EXPECT_NE(error({"--micro-batches", "2"}).find("need --pp > 1"), std::string::npos);
  EXPECT_NE(error({"--pp", "2", "--schedule", "gpipe"}).find("afab, 1f1b or interleaved"),
            std::string::npos);
  EXPECT_NE(error({"--pp", "2", "--chunks", "2"}).find("--chunks 2 with --schedule 1f1b"),
            std::string::npos);
  EXPECT_NE(error({"--pp", "2", "--zero", "1"}).find("excludes --zero 1"), std::string::npos);
  EXPECT_NE(error({"--pp", "2", "--pp-partition", "timed"}).find("must be flops or measured"),
            std::string::npos);
  EXPECT_NE(error({"--pp-partition", "measured"}).find("needs --pp > 1"), std::string::npos);
  EXPECT_NE(error({"--pp", "2", "--tp", "2", "--pp-partition", "measured"}).find("not with --tp"),
            std::string::npos);
  // Accepted: the defaults resolved (1f1b; 2 chunks for interleaved), stable under validate().
  tt::train::TrainConfig c = tt::train::TrainConfig::parse_args(
      {"--pp", "2", "--layers", "4", "--schedule", "interleaved"});
  EXPECT_EQ(c.chunks, 2);
  c.validate();
  EXPECT_EQ(c.schedule, "interleaved");
  tt::train::TrainConfig plain = tt::train::TrainConfig::parse_args({});
  plain.validate();
  EXPECT_EQ(plain.schedule, "1f1b");
  EXPECT_EQ(plain.chunks, 1);
  EXPECT_EQ(plain.pp_partition, "flops");  // the FLOP model unless measured is asked for
  EXPECT_EQ(
      tt::train::TrainConfig::parse_args({"--pp", "2", "--pp-partition", "measured"}).pp_partition,
      "measured");
}

}  // namespace
