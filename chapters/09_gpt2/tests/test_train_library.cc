// The training library (tt/train_config.h, tt/run_dir.h, tt/trainer.h), unit by unit and through
// the real train_gpt2: flags validated before anything runs, the run directory locked and kept
// consistent, and --resume refusing a run that is not the one in the checkpoint. Each test
// reproduces a finding of issue 22 ("Run directories lose data").
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "ch09_test_util.h"
#include "tt/checkpoint.h"
#include "tt/run_dir.h"
#include "tt/train_config.h"

namespace tt::train {
namespace {

namespace fs = std::filesystem;

using test09::run_program;
using test09::RunResult;

using test09::contains;

/// The app, a temporary directory and a tiny dataset in it.
class Ch09_TrainLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    app_ = test09::program_path("train_gpt2");
    ASSERT_FALSE(app_.empty()) << "train_gpt2 is not next to the test binary (build train_gpt2)";
    test09::write_tiny_dataset(dir_.file("data"));
  }
  /// train_gpt2 on the tiny dataset with `extra` options into --out <dir>/<out>.
  RunResult train(const std::string& extra, const std::string& out) {
    return run_program(app_,
                       "--data '" + dir_.file("data") + "' --out '" + dir_.file(out) +
                           "' --device cpu --threads 1 --layers 1 --heads 2 --channels 16 --B 2 "
                           "--T 8 --warmup 1 --eval-every 2 --eval-batches 1 --sample-tokens 2 " +
                           extra,
                       dir_.file(out + "_" + std::to_string(runs_++) + ".log"));
  }
  std::string app_;
  test09::TempDir dir_;
  int runs_ = 0;
};

// ----- TrainConfig ------------------------------------------------------------------------------

TEST(Ch09_TrainConfig, ParsesStrictlyAndValidatesEveryFlagUpFront) {
  const TrainConfig c =
      TrainConfig::parse_args({"--steps", "7", "--warmup", "2", "--lr", "2e-3", "--T", "32"});
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.lr, 2e-3);
  EXPECT_EQ(c.block_size, 32) << "block size 0 means T";
  // Values the old app accepted, or found only when it used them (after training).
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--temperature", "-1"}, "--temperature"},
      {{"--clip", "nan"}, "--clip"},
      {{"--max-seconds", "-1"}, "--max-seconds"},
      {{"--threads", "-1"}, "--threads"},
      {{"--B", "4294967296", "--T", "4294967296"}, "overflows"},
      {{"--lr", "inf"}, "--lr"},
      {{"--top-k", "-3"}, "--top-k"},
      {{"--eval-batches", "0"}, "--eval-batches"},
      {{"--heads", "3"}, "--channels 128 is not a multiple of --heads 3"},
      {{"--n-kv-head", "3"}, "--n-kv-head 3 must divide --heads 4"},
      {{"--n-kv-head", "-1"}, "--n-kv-head -1 must divide --heads 4"},
      {{"--override", "steps"}, "--override applies to --resume only"},
      {{"--resume", "--override", "heads"}, "--override heads: not a flag"},
      {{"--resume", "--overwrite"}, "give one of them"},
      {{"--steps", "10k"}, "--steps"},
      {{"--trace", "t.json", "--trace-steps", "0"}, "--trace-steps must be >= 1"},
      {{"--trace", "t.json", "--profile-step", "2"}, "--trace excludes --cuda-graph and"},
  };
  for (const auto& [args, what] : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    try {
      TrainConfig::parse_args(args);
      ADD_FAILURE() << joined << "was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), what)) << joined;
    }
  }
}

TEST(Ch09_TrainConfig, DevicePeakFollowsThePrecisionOrTheFlag) {
  // One rule for every model family's MFU: the H100's dense peak of the precision on a GPU,
  // none on a CPU, --peak-tflops over both.
  EXPECT_EQ(TrainConfig::parse_args({"--precision", "bf16"}).device_peak_tflops(true), 989.0);
  EXPECT_EQ(TrainConfig::parse_args({"--precision", "tf32"}).device_peak_tflops(true), 495.0);
  EXPECT_EQ(TrainConfig::parse_args({"--precision", "fp32"}).device_peak_tflops(true), 67.0);
  EXPECT_EQ(TrainConfig::parse_args({"--precision", "bf16"}).device_peak_tflops(false), 0.0);
  const TrainConfig given = TrainConfig::parse_args({"--peak-tflops", "312"});
  EXPECT_EQ(given.device_peak_tflops(true), 312.0);
  EXPECT_EQ(given.device_peak_tflops(false), 312.0);
}

TEST(Ch09_TrainConfig, RecordHashAndResumeConflicts) {
  TrainConfig a = TrainConfig::parse_args({"--B", "4", "--steps", "40"});
  const std::string recorded = record_text(a.record(1));
  // The record round-trips through checkpoint metadata.
  EXPECT_EQ(recorded_config(config_metadata(a, 1)), recorded);
  EXPECT_EQ(recorded_config({}), "");
  // Free changes keep the hash and resume.
  TrainConfig free = a;
  free.eval_every = 7, free.temperature = 0.1, free.threads = 2, free.resume = true;
  EXPECT_EQ(free.hash(1), a.hash(1));
  EXPECT_TRUE(resume_conflicts(recorded, free, 1).empty());
  // The same global batch on 2 ranks (B 2 each) is the same run.
  TrainConfig halves = a;
  halves.B = 2;
  EXPECT_EQ(halves.hash(2), a.hash(1));
  EXPECT_TRUE(resume_conflicts(recorded, halves, 2).empty());
  // Fixed and overridable changes are listed, each once.
  TrainConfig b = TrainConfig::parse_args({"--B", "8", "--heads", "2", "--n-kv-head", "1", "--seed",
                                           "7", "--lr", "0.002", "--steps", "50", "--resume"});
  EXPECT_NE(b.hash(1), a.hash(1));
  const std::vector<std::string> c = resume_conflicts(recorded, b, 1);
  std::string all;
  for (const auto& line : c) all += line + "\n";
  EXPECT_TRUE(contains(all, "--heads: 4 in the checkpoint, 2 now"));
  EXPECT_TRUE(contains(all, "--n-kv-head: 0 in the checkpoint, 1 now"));
  EXPECT_TRUE(contains(all, "--seed: 1337 in the checkpoint, 7 now"));
  EXPECT_TRUE(contains(all, "--B x ranks: 4 in the checkpoint, 8 now"));
  EXPECT_TRUE(
      contains(all, "--lr: 0.001 in the checkpoint, 0.002 now (accept with --override lr)"));
  EXPECT_TRUE(contains(all, "--steps: 40 in the checkpoint, 50 now"));
  // --override accepts the optimization's changes, never the model's.
  b.overrides = {"steps,lr"};
  const std::vector<std::string> left = resume_conflicts(recorded, b, 1);
  all.clear();
  for (const auto& line : left) all += line + "\n";
  EXPECT_EQ(all.find("--lr"), std::string::npos) << all;
  EXPECT_EQ(all.find("--steps"), std::string::npos) << all;
  EXPECT_TRUE(contains(all, "--heads"));
}

// ----- RunDir -----------------------------------------------------------------------------------

TEST_F(Ch09_TrainLibrary, ASecondRunOnTheSameOutFailsAtOnceNamingThePid) {
  // This test holds the lock, as a running train_gpt2 would.
  const RunDir held(dir_.file("run"), {});
  const RunResult second = train("--steps 2", "run");
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_TRUE(
      contains(second.output, "is in use by another run (pid " + std::to_string(::getpid()) + ","));
  EXPECT_FALSE(fs::exists(dir_.file("run") + "/train.csv")) << "the second run wrote its log";
}

TEST_F(Ch09_TrainLibrary, ACheckpointIsNeverOverwrittenWithoutResumeOrOverwrite) {
  const RunResult first = train("--steps 2", "run");
  ASSERT_EQ(first.status, 0) << first.output;
  const std::string csv = test09::read_bytes(dir_.file("run") + "/train.csv");
  const std::string ckpt = test09::read_bytes(dir_.file("run") + "/checkpoint.ttckpt");
  const RunResult again = train("--steps 2 --seed 9", "run");
  EXPECT_EQ(again.status, 1) << again.output;
  EXPECT_TRUE(contains(again.output, "holds the checkpoint of an earlier run"));
  EXPECT_TRUE(contains(again.output, "--overwrite"));
  EXPECT_EQ(test09::read_bytes(dir_.file("run") + "/train.csv"), csv);
  EXPECT_EQ(test09::read_bytes(dir_.file("run") + "/checkpoint.ttckpt"), ckpt);
  const RunResult overwritten = train("--steps 2 --seed 9 --overwrite", "run");
  EXPECT_EQ(overwritten.status, 0) << overwritten.output;
  EXPECT_NE(test09::read_bytes(dir_.file("run") + "/checkpoint.ttckpt"), ckpt);
}

TEST_F(Ch09_TrainLibrary, ResumeRemovesStaleTempFilesAndKeepsFileModes) {
  const std::string out = dir_.file("run");
  const RunResult crash = train("--steps 4 --checkpoint-every 1 --kill-after-step 2", "run");
  ASSERT_TRUE(crash.killed) << crash.output;
  // What a kill during a checkpoint write leaves behind.
  test09::write_bytes(out + "/checkpoint.ttckpt.tmp.AbC123", std::string(1000, 'x'));
  test09::write_bytes(out + "/unrelated.tmp.AbC123", "kept");
  const RunResult resumed = train("--steps 4 --checkpoint-every 1 --resume", "run");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "removed 1 temporary file(s)"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint.ttckpt.tmp.AbC123"));
  EXPECT_TRUE(fs::exists(out + "/unrelated.tmp.AbC123")) << "not a file of the run";
  // Every file of the run has the mode of an ordinary write (0666 minus the umask), also those
  // rewritten atomically after the resume.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  for (const char* name : {"train.csv", "checkpoint.ttckpt", "model.bin", "samples.txt"}) {
    struct stat st {};
    ASSERT_EQ(::stat((out + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << name;
  }
}

// ----- --resume ---------------------------------------------------------------------------------

TEST_F(Ch09_TrainLibrary, ResumeRefusesAnotherRunAndAcceptsExplicitOverrides) {
  const RunResult first = train("--steps 4 --checkpoint-every 2 --kill-after-step 3", "run");
  ASSERT_TRUE(first.killed) << first.output;
  const std::string ckpt = test09::read_bytes(dir_.file("run") + "/checkpoint.ttckpt");
  const RunResult changed = train("--steps 6 --resume --heads 4 --B 4 --seed 7 --lr 0.002", "run");
  EXPECT_EQ(changed.status, 1) << changed.output;
  for (const char* what : {"--heads: 2 in the checkpoint, 4 now",
                           "--B x ranks: 2 in the "
                           "checkpoint, 4 now",
                           "--seed: 1337 in the checkpoint, 7 now",
                           "--lr: 0.001 in the checkpoint, 0.002 now (accept with --override lr)",
                           "--steps: 4 in the checkpoint, 6 now"}) {
    EXPECT_TRUE(contains(changed.output, what));
  }
  EXPECT_EQ(test09::read_bytes(dir_.file("run") + "/checkpoint.ttckpt"), ckpt);
  // More steps, explicitly: the run goes on from step 2 to 6.
  const RunResult longer = train("--steps 6 --resume --override steps", "run");
  ASSERT_EQ(longer.status, 0) << longer.output;
  EXPECT_TRUE(contains(longer.output, "resumed from"));
  EXPECT_TRUE(contains(longer.output, "trained 4 steps"));
  EXPECT_EQ(test09::read_csv(dir_.file("run") + "/train.csv").back().at(0), "6");
}

TEST_F(Ch09_TrainLibrary, ResumeSaysWhenThereIsNothingToTrain) {
  const RunResult first = train("--steps 4", "run");
  ASSERT_EQ(first.status, 0) << first.output;
  const RunResult fewer = train("--steps 2 --resume --override steps", "run");
  EXPECT_EQ(fewer.status, 1) << fewer.output;
  EXPECT_TRUE(contains(fewer.output, "is at step 4, beyond --steps 2: nothing to train"));
  const RunResult same = train("--steps 4 --resume", "run");
  EXPECT_EQ(same.status, 0) << same.output;
  EXPECT_TRUE(contains(same.output, "the run is complete, nothing to train"));
  EXPECT_EQ(same.output.find("trained 0 steps"), std::string::npos) << same.output;
}

// ----- flags and messages ---------------------------------------------------------------------

TEST_F(Ch09_TrainLibrary, BadFlagsFailBeforeTheFirstStepWithOnePrefix) {
  const RunResult good = train("--steps 2", "run");
  ASSERT_EQ(good.status, 0) << good.output;
  int i = 0;
  for (const char* flags : {"--temperature -1", "--clip nan", "--max-seconds -1", "--threads -1",
                            "--B 4294967296 --T 4294967296"}) {
    SCOPED_TRACE(flags);
    // A resumed run: the old app trained before it met the bad value.
    const std::string out = "bad" + std::to_string(i++);
    fs::copy(dir_.file("run"), dir_.file(out));
    fs::remove(dir_.file(out) + "/run.lock");
    const RunResult r = train(std::string("--steps 2 --resume ") + flags, out);
    EXPECT_EQ(r.status, 1) << r.output;  // not a signal (SIGFPE), not status 0
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << "trained before failing";
    EXPECT_TRUE(contains(r.output, "train_gpt2: "));
    EXPECT_EQ(r.output.find("train_gpt2: train_gpt2:"), std::string::npos) << r.output;
  }
  const RunResult gqa = train("--steps 2 --n-kv-head 1", "gqa");
  EXPECT_EQ(gqa.status, 1) << gqa.output;
  EXPECT_TRUE(contains(gqa.output, "--n-kv-head 1: GPT-2 has multi-head attention")) << gqa.output;
  const RunResult missing = train("--steps 2 --resume", "nothing_here");
  EXPECT_EQ(missing.status, 1);
  EXPECT_TRUE(contains(missing.output, "train_gpt2: --resume: there is no checkpoint"));
}

TEST_F(Ch09_TrainLibrary, Bf16OnTheCpuDoesNotClaimCublasLt) {
  const RunResult r = train("--steps 2 --precision bf16", "bf16");
  if (r.status != 0) {  // a build without chapter 11's bf16 set says why
    EXPECT_TRUE(contains(r.output, "--precision bf16: chapter 11")) << r.output;
    return;
  }
  EXPECT_TRUE(contains(r.output, "ops: bf16 mixed precision, emulated on the CPU"));
  EXPECT_EQ(r.output.find("cuBLASLt"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tt::train
