// The real train_gpt2 (chapter 09's program with chapter 13's strategy "tp") on a tiny
// generated dataset: --tp 2, --tp 2 --sequence-parallel and DP2 x TP2 log the losses of one
// process with the same global batch, and a checkpoint written by DP2 x TP2 (whole tensors) is
// resumed by one process like an uninterrupted run. Not an "Mpi" test: it starts mpirun itself,
// from a plain process.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "tt/dist.h"

namespace {

namespace test09 = tt::test09;
using ch12_test::JobResult;
using test09::read_csv;

class Ch13_TrainGpt2Tp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tt::dist::built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job";
    test09::write_tiny_dataset(dir_.file("data"));
  }
  /// train_gpt2 with `extra` options under `mpirun -np np` (np 1: the one-process reference,
  /// a world of one): 8 steps of 64 tokens, checkpoints at 3 and 6, validation at 0, 4, 8.
  JobResult train(int np, const std::string& extra, const std::string& out) {
    const std::string args = "--data '" + dir_.file("data") + "' --out '" + dir_.file(out) +
                             "' --device cpu --threads 1 --layers 2 --heads 4 --channels 32 " +
                             "--T 8 --total-batch 64 --steps 8 --warmup 1 --eval-every 4 " +
                             "--eval-batches 1 --sample-tokens 2 --checkpoint-every 3 " +
                             "--precision fp32 " + extra;
    return ch12_test::run_mpi_job(np, ch12_test::program_path("train_gpt2"), args);
  }
  std::string csv(const std::string& out) const { return dir_.file(out) + "/train.csv"; }
  /// The logged loss, lr, grad norm and val loss of `out` equal `expected`'s to the 6 digits of
  /// the log (%.6g: one unit of the last digit is up to 1e-5 relative; the split sums run in
  /// another order, so the values may round to neighbouring last digits).
  void expect_same_log(const std::string& out, const std::string& expected) {
    EXPECT_TRUE(test09::logs_match(csv(out), csv(expected), 2e-5, {1, 2, 3, 6}));
  }

  test09::TempDir dir_;
};

TEST_F(Ch13_TrainGpt2Tp, TensorAndSequenceParallelLogTheLossesOfOneProcess) {
  const JobResult one = train(1, "--B 8", "one");
  ASSERT_EQ(one.status, 0) << one.output;
  const JobResult tp = train(2, "--B 8 --tp 2", "tp2");
  ASSERT_EQ(tp.status, 0) << tp.output;
  EXPECT_NE(tp.output.find("parallel: tp over 2 processes: 1 data-parallel replica(s) of 2 ranks"),
            std::string::npos)
      << tp.output;
  EXPECT_NE(tp.output.find("tensor parallel tp=2"), std::string::npos) << tp.output;
  expect_same_log("tp2", "one");
  const JobResult sp = train(2, "--B 8 --tp 2 --sequence-parallel", "tp2sp");
  ASSERT_EQ(sp.status, 0) << sp.output;
  EXPECT_NE(sp.output.find("tensor parallel tp=2, sequence parallel"), std::string::npos)
      << sp.output;
  expect_same_log("tp2sp", "one");
}

TEST_F(Ch13_TrainGpt2Tp, DataTimesTensorParallelResumedByOneProcess) {
  const JobResult one = train(1, "--B 8", "one");
  ASSERT_EQ(one.status, 0) << one.output;
  // DP2 x TP2 on 4 ranks (each replica reads B=4 rows of the global 8), killed after step 5: its
  // last checkpoint is step 3's, whole tensors gathered over the tp groups ...
  const JobResult dptp = train(4, "--B 4 --tp 2 --kill-after-step 5", "dp2tp2");
  ASSERT_NE(dptp.status, 0) << dptp.output;
  EXPECT_NE(dptp.output.find("2 data-parallel replica(s) of 2 ranks"), std::string::npos)
      << dptp.output;
  ASSERT_EQ(read_csv(csv("dp2tp2")).back().at(0), "5") << "the kill came too early";
  // ... resumed by one process: steps 1-5 logged by DP2 x TP2 and 6-8 by one process make the
  // log of the uninterrupted one-process run.
  const JobResult resumed = train(1, "--B 8 --resume", "dp2tp2");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 3"), std::string::npos) << resumed.output;
  expect_same_log("dp2tp2", "one");
}

TEST_F(Ch13_TrainGpt2Tp, TpThatDoesNotDivideFailsOnEveryRank) {
  // 4 heads over tp = 3 ranks: every rank fails with the reason, nobody hangs.
  const JobResult r = train(3, "--B 8 --tp 3", "bad");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cannot be split over tp=3"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
}

}  // namespace
