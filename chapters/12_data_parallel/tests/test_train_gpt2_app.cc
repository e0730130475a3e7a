// The real train_gpt2 (chapter 09's program, linked with chapter 12) under mpirun -np 2 on a tiny
// generated dataset: DDP and ZeRO-1 log the losses of one process with the same global batch,
// only rank 0 speaks, and a job killed between checkpoints, or stopped by --max-seconds,
// resumes exactly like an uninterrupted run. (Not an "Mpi" test: it starts mpirun itself, from a
// plain process.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "ch12_test_util.h"
#include "tt/dist.h"
#include "tt/testing_common.h"

namespace tt::dist {
namespace {

using ch12_test::JobResult;
using test09::read_csv;
using test09::reproducible_columns;

class Ch12_TrainGpt2App : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job to run";
    test09::write_tiny_dataset(dir_.file("data"));
  }
  /// train_gpt2 with `extra` options under `mpirun -np np` (np 0: a plain process).
  JobResult train(int np, const std::string& extra, const std::string& out) {
    // 8 steps of 64 tokens; checkpoints at 3 and 6, validation at 0, 2, 4, 6, 8.
    const std::string args = "--data '" + dir_.file("data") + "' --out '" + dir_.file(out) +
                             "' --device cpu --threads 1 --layers 2 --heads 2 --channels 32 " +
                             "--T 8 --total-batch 64 --steps 8 --warmup 1 --eval-every 2 " +
                             "--eval-batches 1 --sample-tokens 2 --checkpoint-every 3 " + extra;
    const std::string app = ch12_test::program_path("train_gpt2");
    if (np > 0) return ch12_test::run_mpi_job(np, app, args);
    const std::string log = dir_.file(out + ".log");
    JobResult r;
    const int rc = std::system((app + " " + args + " > '" + log + "' 2>&1").c_str());
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.output = test09::read_bytes(log);
    return r;
  }
  std::string csv(const std::string& out) const { return dir_.file(out) + "/train.csv"; }

  test09::TempDir dir_;
};

TEST_F(Ch12_TrainGpt2App, DdpAndZero1LogTheLossesOfOneProcess) {
  // float32, and chapter 11's bf16 mixed precision (DDP with its master-weight AdamW and bf16
  // copies; ZeRO-1 with its own AdamW, the layers casting the masters).
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE("--precision " + precision);
    const std::string p = " --precision " + precision;
    const JobResult one = train(0, "--B 8" + p, "one_" + precision);
    ASSERT_EQ(one.status, 0) << one.output;
    for (const std::string zero : {"0", "1"}) {
      // Under the sanitizers (process start-up and MPI under ASan dominate these jobs): one
      // strategy per precision, DDP in fp32 and ZeRO-1 in bf16, so both still run sanitized.
      if (tt::testing::kSanitized && (zero == "1") != (precision == "bf16")) continue;
      const std::string out = "np2_zero" + zero + "_" + precision;
      const JobResult r = train(2, "--B 4 --zero " + zero + p, out);
      ASSERT_EQ(r.status, 0) << r.output;
      EXPECT_NE(r.output.find(std::string("parallel: ") + (zero == "0" ? "ddp" : "zero1") +
                              " over 2 processes (B=4 rows per rank, 8 per global batch)"),
                std::string::npos)
          << r.output;
      EXPECT_NE(r.output.find("memory per rank (max over 2)"), std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("ops: bf16 mixed precision") != std::string::npos,
                precision == "bf16")
          << r.output;
      // Rank 0 alone logs: each step line once.
      const std::size_t first = r.output.find("step 3/8 |");
      ASSERT_NE(first, std::string::npos) << r.output;
      EXPECT_EQ(r.output.find("step 3/8 |", first + 1), std::string::npos) << r.output;
      // Same global batches, same math: the logged values agree to the 6 digits of the log (the
      // gradient sums run in another order: see test_train.cc for the tolerance). In bf16 a
      // master that differs in its last bit may round to the neighbouring bf16 copy (2^-8
      // relative in that weight), hence the wider tolerance there.
      const double rel = precision == "bf16" ? 2e-3 : 2e-5;
      EXPECT_TRUE(test09::logs_match(csv(out), csv("one_" + precision), rel, {1, 2, 3, 6}))
          << "--zero " << zero;  // loss, lr, grad_norm, val_loss
    }
  }
}

TEST_F(Ch12_TrainGpt2App, InterruptedJobsResumeLikeAnUninterruptedOne) {
  for (const std::string zero : {"0", "1"}) {
    // Under the sanitizers, ZeRO-1 only (it restores the sharded optimizer, the longer path);
    // the normal build runs both.
    if (tt::testing::kSanitized && zero == "0") continue;
    SCOPED_TRACE("--zero " + zero);
    const std::string opts = "--B 4 --zero " + zero;
    const JobResult full = train(2, opts, "full" + zero);
    ASSERT_EQ(full.status, 0) << full.output;
    // Every rank kills itself after step 5 was logged: the last checkpoint is step 3's.
    const std::string out = "crash" + zero;
    const JobResult crash = train(2, opts + " --kill-after-step 5", out);
    ASSERT_NE(crash.status, 0) << crash.output;
    ASSERT_EQ(read_csv(csv(out)).back().at(0), "5") << "the crash came too early";
    const JobResult resumed = train(2, opts + " --resume", out);
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("at step 3"), std::string::npos) << resumed.output;
    // Same world size, same data order, deterministic 2-rank sums: bit-exact, so the logs match
    // character for character.
    EXPECT_EQ(reproducible_columns(csv(out)), reproducible_columns(csv("full" + zero)));

    // --max-seconds: the ranks agree on the time, so all stop after the same step (here the
    // first: the limit is below one step), save a checkpoint and exit cleanly.
    const std::string timed = "timed" + zero;
    const JobResult stopped = train(2, opts + " --max-seconds 0.000001", timed);
    ASSERT_EQ(stopped.status, 0) << stopped.output;
    EXPECT_NE(stopped.output.find("stopping after --max-seconds"), std::string::npos)
        << stopped.output;
    ASSERT_EQ(read_csv(csv(timed)).back().at(0), "1");
    const JobResult continued = train(2, opts + " --resume", timed);
    ASSERT_EQ(continued.status, 0) << continued.output;
    auto rows = reproducible_columns(csv(timed));
    ASSERT_EQ(rows.size(), 10u);
    EXPECT_NE(rows[2].at(4), "") << "a run stopped by time evaluates at its last step";
    rows[2].at(4) = "";  // the uninterrupted run evaluates at steps 2, 4, 6, 8 only
    EXPECT_EQ(rows, reproducible_columns(csv("full" + zero)));
  }
}

TEST_F(Ch12_TrainGpt2App, RanksStartedWithOtherOptionsFailAtStartNamingTheRank) {
  // Rank 1 gets --steps 9 where rank 0 has 8 (an MPMD launch, or a script that builds each
  // rank's command line): the job must fail before the first step, naming rank 1 and --steps,
  // not later in a collective that the ranks reach at different steps.
  const std::string app = ch12_test::program_path("train_gpt2");
  const std::string args = "--data '" + dir_.file("data") + "' --out '" + dir_.file("mixed") +
                           "' --device cpu --threads 1 --layers 1 --heads 2 --channels 16 "
                           "--B 2 --T 8 --warmup 1 --eval-batches 1 --sample-tokens 2";
  const JobResult r = ch12_test::run_mpi_job(
      2, "sh", "-c \"exec " + app + " " + args + " --steps \\$((8 + OMPI_COMM_WORLD_RANK))\"");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 was started with other options than rank 0"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--steps 9"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("CUDA"), std::string::npos) << r.output;
}

/// Checks the Chrome trace `path` of a train_gpt2 run with --trace-steps 2 over `ranks` ranks:
/// every rank (pid) has the host events "step 1" and "step 2", one after the other, and every
/// kernel (cat "op") and, under DDP (`ddp`), every bucket all-reduce (cat "comm") of a rank lies
/// inside one of its steps.
void expect_two_nested_steps(const std::string& path, int ranks, bool ddp) {
  const nlohmann::json trace = nlohmann::json::parse(test09::read_bytes(path));
  std::map<int, std::vector<std::pair<double, double>>> steps;  // pid -> [begin, end] per step
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "step" && e.at("tid") == 0) {
      EXPECT_EQ(e.at("name"), "step " + std::to_string(steps[e.at("pid")].size() + 1)) << e;
      const double ts = e.at("ts");
      steps[e.at("pid")].emplace_back(ts, ts + e.at("dur").get<double>());
    }
  }
  ASSERT_EQ(steps.size(), static_cast<std::size_t>(ranks)) << "one process per rank";
  for (const auto& [pid, s] : steps) {
    ASSERT_EQ(s.size(), 2u) << "rank " << pid << ": --trace-steps 2";
    EXPECT_LE(s[0].second, s[1].first) << "rank " << pid << ": steps in order";
  }
  std::map<int, int> ops, comms;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || (e.at("cat") != "op" && e.at("cat") != "comm")) continue;
    const int pid = e.at("pid");
    ++(e.at("cat") == "op" ? ops : comms)[pid];
    const double ts = e.at("ts"), end = ts + e.at("dur").get<double>();
    bool inside = false;
    for (const auto& [b, f] : steps[pid]) inside = inside || (b <= ts + 1 && end <= f + 1);
    EXPECT_TRUE(inside) << "not inside a step of rank " << pid << ": " << e;
  }
  for (int pid = 0; pid < ranks; ++pid) {
    EXPECT_GT(ops[pid], 0) << "rank " << pid << " traced no kernel";
    EXPECT_EQ(comms[pid] > 0, ddp) << "rank " << pid << ": DDP's all-reduces";
  }
}

/// `train_gpt2 --trace FILE --trace-steps 2` (chapter 12's Chrome trace through the training
/// library's StepObserver): in one process, and under mpirun -np 2 with DDP.
TEST(Ch12_TrainGpt2Trace, TraceHoldsTheFirstStepsOfEveryRank) {
  test09::TempDir dir;
  test09::write_tiny_dataset(dir.file("data"));
  const std::string app = ch12_test::program_path("train_gpt2");
  auto args = [&](const std::string& out) {
    return "--data '" + dir.file("data") + "' --out '" + dir.file(out) +
           "' --device cpu --threads 1 --layers 1 --heads 2 --channels 16 --B 2 --T 8 --steps 4 " +
           "--warmup 1 --eval-batches 1 --sample-tokens 2 --trace '" + dir.file(out + ".json") +
           "' --trace-steps 2";
  };
  const std::string log = dir.file("one.log");
  const int rc = std::system((app + " " + args("one") + " > '" + log + "' 2>&1").c_str());
  ASSERT_EQ(rc, 0) << test09::read_bytes(log);
  EXPECT_NE(test09::read_bytes(log).find("trace of 2 step(s) written to"), std::string::npos);
  expect_two_nested_steps(dir.file("one.json"), 1, false);
  if (!built_with_mpi()) GTEST_SKIP() << "built without MPI: the one-process trace passed";
  const JobResult r = ch12_test::run_mpi_job(2, app, args("np2"));
  ASSERT_EQ(r.status, 0) << r.output;
  expect_two_nested_steps(dir.file("np2.json"), 2, true);
}

}  // namespace
}  // namespace tt::dist
