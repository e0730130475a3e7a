// Training safety, end to end: the real train_gpt2 program (built next to this test binary) is
// run on a tiny generated dataset. A run that diverges must stop with a clear message and a
// non-zero exit status, and leave the last good checkpoint intact and loadable (the non-finite
// policy of tt/train.h). A run killed between two checkpoints and resumed must log each step
// once, as the uninterrupted run does.
#include <sys/wait.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ch09_test_util.h"
#include "tt/checkpoint.h"
#include "tt/shards.h"
#include "tt/tokenizer.h"
#include "tt/train.h"

namespace tt::gpt2 {
namespace {

namespace fs = std::filesystem;

using test09::program_path;
using test09::run_program;
using test09::RunResult;

/// The model train_gpt2 builds from the options below (V = 257 padded to a multiple of 64).
/// What every test of train_gpt2 starts with: the app (next to the test binary; empty when
/// it was not built), a temporary directory, and write_tiny_dataset() in its "data".
struct AppRun {
  AppRun() : app(program_path("train_gpt2")), data(dir.file("data")) {
    test09::write_tiny_dataset(data);
  }
  std::string app;
  test09::TempDir dir;
  std::string data;
};

/// The options every run of these tests shares: the model of app_config() on the data of
/// write_tiny_dataset(data), one thread, short samples.
std::string tiny_run_options(const std::string& data) {
  return "--data '" + data + "' --device cpu --threads 1 --layers 1 --heads 2 --channels 16 " +
         "--B 2 --T 8 --warmup 1 --eval-batches 1 --sample-tokens 2 ";
}

GPT2Config app_config() {
  return {.block_size = 8,
          .vocab_size = 257,
          .padded_vocab_size = 320,
          .n_layer = 1,
          .n_head = 2,
          .n_embd = 16};
}

using test09::contains;

TEST(Ch09_TrainSafety, DivergedRunsStopWithStatus3AndKeepTheLastGoodCheckpoint) {
  const AppRun run;
  ASSERT_FALSE(run.app.empty())
      << "train_gpt2 is not next to the test binary (build target train_gpt2)";
  const std::string &app = run.app, &data = run.data, out = run.dir.file("run");
  const test09::TempDir& dir = run.dir;
  const std::string base = tiny_run_options(data) + "--checkpoint-every 1 ";
  const std::string ckpt_path = out + "/checkpoint.ttckpt";

  // 1. Three good steps, a checkpoint after each: the last good state is step 3's.
  const RunResult first =
      run_program(app, base + "--steps 3 --lr 1e-3 --out '" + out + "'", dir.file("first.log"));
  ASSERT_EQ(first.status, 0) << first.output;
  const std::string good_bytes = test09::read_bytes(ckpt_path);
  ASSERT_FALSE(good_bytes.empty());
  const std::string good_model_bin = test09::read_bytes(out + "/model.bin");

  // 2. Resumed with an absurd learning rate: step 4's loss and gradient norm are finite, but
  //    its update overflows the float32 weights (more steps and another learning rate than the
  //    checkpoint's run: --override says so). The run must stop right there (before any
  //    sample, evaluation or checkpoint uses them), say so, and exit with status 3.
  const RunResult blown = run_program(
      app, base + "--steps 6 --lr 1e39 --resume --override steps,lr --out '" + out + "'",
      dir.file("blown.log"));
  EXPECT_EQ(blown.status, 3) << blown.output;
  EXPECT_TRUE(contains(blown.output, "resumed from"));
  EXPECT_TRUE(contains(blown.output, "step 4: loss"));
  EXPECT_TRUE(contains(blown.output, "made the parameters NaN/Inf; stopping"));
  EXPECT_TRUE(contains(blown.output, "The last good checkpoint is " + ckpt_path));
  EXPECT_TRUE(test09::read_bytes(ckpt_path) == good_bytes) << "the checkpoint was rewritten";
  EXPECT_TRUE(test09::read_bytes(out + "/model.bin") == good_model_bin);

  // 3. A poisoned state (a NaN weight, as a diverged run would leave it) in another run
  //    directory: step 4's loss is NaN, so the step is skipped and the run stops with status 3,
  //    writing nothing.
  const std::string poisoned_out = dir.file("poisoned");
  fs::create_directories(poisoned_out);
  nn::StateDict state = ckpt::load(ckpt_path);
  for (auto& [name, t] : state) {
    if (name == "model.ln_f.weight") t.fill_(NAN);
  }
  const std::string poisoned_ckpt = poisoned_out + "/checkpoint.ttckpt";
  ckpt::save(poisoned_ckpt, state);  // the generic save writes any values
  const std::string poisoned_bytes = test09::read_bytes(poisoned_ckpt);
  const RunResult nan_loss = run_program(
      app, base + "--steps 6 --lr 1e-3 --resume --override steps --out '" + poisoned_out + "'",
      dir.file("nan.log"));
  EXPECT_EQ(nan_loss.status, 3) << nan_loss.output;
  EXPECT_TRUE(contains(nan_loss.output, "step 4: loss "));  // "nan" or "-nan"
  EXPECT_TRUE(contains(nan_loss.output, "is not finite (the update was skipped); stopping"));
  EXPECT_TRUE(test09::read_bytes(poisoned_ckpt) == poisoned_bytes);
  EXPECT_FALSE(fs::exists(poisoned_out + "/model.bin"));

  // The last good checkpoint loads into a fresh model with finite values at step 3.
  GPT2 model(app_config(), 99);
  optim::AdamW opt(param_groups(model, 0.1), {});
  ckpt::load_checkpoint(ckpt_path, model, &opt);
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_TRUE(all_finite(model.parameters()));
}

TEST(Ch09_TrainSafety, ARunKilledAndResumedLogsEachStepOnce) {
  const AppRun run;
  ASSERT_FALSE(run.app.empty())
      << "train_gpt2 is not next to the test binary (build target train_gpt2)";
  const std::string &app = run.app, &data = run.data;
  const test09::TempDir& dir = run.dir;
  // 10 steps, checkpoints at 3, 6 and 9, validation rows at 0, 2, 4, ..., 10.
  const std::string base =
      tiny_run_options(data) + "--eval-every 2 --checkpoint-every 3 --steps 10 ";

  const std::string full = dir.file("full");
  const RunResult uninterrupted =
      run_program(app, base + "--out '" + full + "'", dir.file("u.log"));
  ASSERT_EQ(uninterrupted.status, 0) << uninterrupted.output;

  // kill -9 after step 8 was logged: the last checkpoint is step 6's, so steps 7 and 8 are in
  // train.csv but not in the checkpoint; the resumed run trains them again.
  const std::string out = dir.file("crashed");
  const RunResult crash =
      run_program(app, base + "--kill-after-step 8 --out '" + out + "'", dir.file("crash.log"));
  ASSERT_TRUE(crash.killed) << "status " << crash.status << "\n" << crash.output;
  ASSERT_EQ(test09::read_csv(out + "/train.csv").back().at(0), "8") << "the crash came too early";
  const RunResult resumed =
      run_program(app, base + "--resume --out '" + out + "'", dir.file("resumed.log"));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "resumed from " + out + "/checkpoint.ttckpt at step 6"));

  const std::vector<std::vector<std::string>> rows = test09::read_csv(out + "/train.csv");
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0].at(0), "step");
  for (std::size_t i = 2; i < rows.size(); ++i) {
    EXPECT_LT(std::stoll(rows[i - 1].at(0)), std::stoll(rows[i].at(0)))
        << "train.csv rows " << i - 1 << " and " << i << " are not in increasing step order";
  }
  // Each step once, with the losses, learning rates, norms and validation losses of the
  // uninterrupted run (resuming is bit-exact).
  EXPECT_EQ(test09::reproducible_columns(out + "/train.csv"),
            test09::reproducible_columns(full + "/train.csv"));
  for (const auto& entry : fs::directory_iterator(out)) {  // no temporary file left behind
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

TEST(Ch09_TrainSafety, AllFiniteSeesOneBadElementAnywhere) {
  GPT2 m(test09::tiny_config(), 6);
  const std::vector<Tensor> params = m.parameters();
  EXPECT_TRUE(all_finite(params));
  for (double bad : {static_cast<double>(NAN), static_cast<double>(INFINITY), -1e39}) {
    const Tensor w = m.parameter("h.1.mlp.c_proj.weight");
    const float saved = w.at<float>({3, 5});
    w.at<float>({3, 5}) = static_cast<float>(bad);
    EXPECT_FALSE(all_finite(params)) << bad;
    w.at<float>({3, 5}) = saved;
    EXPECT_TRUE(all_finite(params));
  }
  EXPECT_TRUE(all_finite({tensor_i64({1}), zeros({0})}));  // integers and empties: nothing to see
}

TEST(Ch09_TrainOps, FlagsChooseTheOpsAndTheLogSaysWhich) {
  // train_gpt2 links the top of the chapter chain, so chapter 10's "fast" set is there (in a
  // learner build whose chapter 10 is still TODO, auto falls back to the reference and an
  // explicit --attention flash is refused). The start of the log names the ops; the fast and
  // the reference runs train the same model: their losses agree to float32 rounding (attention
  // sums in another order; 3 AdamW steps at lr 1e-3 keep that at ~1e-6 of the loss).
  const AppRun run;
  ASSERT_FALSE(run.app.empty())
      << "train_gpt2 is not next to the test binary (build target train_gpt2)";
  const std::string &app = run.app, &data = run.data;
  const test09::TempDir& dir = run.dir;
  const std::string base = tiny_run_options(data) + "--steps 3 --lr 1e-3 ";
  const RunResult naive =
      run_program(app, base + "--attention naive --fused off --out '" + dir.file("naive") + "'",
                  dir.file("naive.log"));
  ASSERT_EQ(naive.status, 0) << naive.output;
  EXPECT_TRUE(contains(naive.output,
                       "ops: attention naive, fused off (reference (chapter 09 compositions))"));
  // auto on the CPU: the reference operations (chapter 10's are opt-in there).
  const RunResult dflt =
      run_program(app, base + "--out '" + dir.file("auto") + "'", dir.file("auto.log"));
  ASSERT_EQ(dflt.status, 0) << dflt.output;
  EXPECT_TRUE(contains(dflt.output, "ops: attention naive, fused off")) << dflt.output;
  const RunResult fast = run_program(
      app, base + "--attention flash --fused on --profile-step 2 --out '" + dir.file("fast") + "'",
      dir.file("fast.log"));
  if (fast.status != 0) {
    // No usable fast set (e.g. a learner build before chapter 10): asking for it fails, naming
    // why, and auto said so too.
    EXPECT_EQ(fast.status, 1) << fast.output;
    EXPECT_TRUE(contains(fast.output, "--attention flash: chapter 10")) << fast.output;
    EXPECT_TRUE(contains(dflt.output, "chapter 10's \"fast\" operations are not")) << dflt.output;
    return;
  }
  EXPECT_TRUE(contains(fast.output, "ops: attention flash, fused on (fast: ")) << fast.output;
  EXPECT_TRUE(contains(dflt.output, "auto picks chapter 10's operations on CUDA only"))
      << dflt.output;
  // --profile-step 2 printed chapter 10's per-op table of step 2, attention kernels included.
  EXPECT_TRUE(contains(fast.output, "Per-op profile of one training step on cpu"));
  EXPECT_TRUE(contains(fast.output, "flash_attention_backward"));
  EXPECT_TRUE(test09::logs_match(dir.file("fast") + "/train.csv", dir.file("naive") + "/train.csv",
                                 1e-5, {1, 6}));  // loss, val_loss
  // The fast set without its other members, and flash without the fast set's other members.
  const RunResult mixed =
      run_program(app, base + "--attention flash --fused off --out '" + dir.file("mixed") + "'",
                  dir.file("mixed.log"));
  ASSERT_EQ(mixed.status, 0) << mixed.output;
  EXPECT_TRUE(contains(mixed.output,
                       "ops: attention flash, fused off (reference (chapter 09 "
                       "compositions); attention: FlashAttention of \"fast\")"));
  const RunResult bad = run_program(app, base + "--attention fast", dir.file("bad.log"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.output, "--attention must be flash, naive or auto, got 'fast'"));
}

}  // namespace
}  // namespace tt::gpt2
