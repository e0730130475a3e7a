// train_llama: a tiny GQA LLaMA trained by chapter 09's training library on the CPU: the loss
// falls, a resumed run logs the same losses as a straight one, and the final Hugging Face
// directory loads back.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "ch15_test_util.h"
#include "tt/llama.h"

namespace tt {
namespace {

class Ch15_TrainLlamaApp : public ::testing::Test {
 protected:
  void SetUp() override { test09::write_tiny_dataset(dir_.file("data")); }
  test09::RunResult train(const std::string& out, const std::string& extra) {
    const std::string app = test09::program_path("train_llama");
    EXPECT_FALSE(app.empty()) << "train_llama is not next to the test binary";
    return test09::run_program(
        app,
        "--data '" + dir_.file("data") + "' --out '" + dir_.file(out) +
            "' --device cpu --threads 1 --layers 2 --heads 4 --n-kv-head 2 --channels 32 --B 4 "
            "--T 8 --warmup 1 --eval-every 2 --eval-batches 1 --sample-tokens 2 --lr 3e-3 " +
            extra,
        dir_.file(out + ".log"));
  }
  /// The training loss of each step of run `out` (validation rows have an empty loss cell).
  std::vector<double> losses(const std::string& out) {
    std::vector<double> l;
    for (const auto& row : test09::read_csv(dir_.file(out + "/train.csv"))) {
      if (row.size() > 1 && !row[1].empty() && row[1] != "loss") l.push_back(std::stod(row[1]));
    }
    return l;
  }
  test09::TempDir dir_;
};

TEST_F(Ch15_TrainLlamaApp, LossFallsResumeIsExactAndTheModelLoadsBack) {
  const auto straight = train("straight", "--steps 8");
  ASSERT_EQ(straight.status, 0) << straight.output;
  EXPECT_TRUE(test09::contains(straight.output, "model: LLaMA"));
  EXPECT_TRUE(test09::contains(straight.output, "NKV=2"));
  const std::vector<double> loss = losses("straight");
  ASSERT_EQ(loss.size(), 8u) << straight.output;
  EXPECT_LT(loss.back(), loss.front()) << "the loss did not fall";
  // 4 steps, then --resume to 8: the same log as the straight run.
  EXPECT_NE(train("resumed", "--steps 8 --kill-after-step 4 --checkpoint-every 2").status, 0);
  const auto resumed = train("resumed", "--steps 8 --checkpoint-every 2 --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(test09::reproducible_columns(dir_.file("resumed/train.csv")),
            test09::reproducible_columns(dir_.file("straight/train.csv")));
  const auto model = llama::load_hf(dir_.file("straight/hf"));
  EXPECT_EQ(model->config().n_kv_heads, 2);
  EXPECT_EQ(model->config().vocab_size, 257);
  const auto bad = train("bad", "--steps 2 --precision bf16 --recompute");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(test09::contains(bad.output, "--recompute")) << bad.output;
  // The run record holds --n-kv-head: resuming with another value is refused by name, before
  // any parameter is loaded (the shapes would differ).
  const auto other_kv = train("resumed", "--steps 8 --resume --n-kv-head 4");
  EXPECT_EQ(other_kv.status, 1) << other_kv.output;
  EXPECT_TRUE(test09::contains(other_kv.output, "--n-kv-head: 2 in the checkpoint, 4 now"))
      << other_kv.output;
}

// --precision bf16: chapter 11's mixed precision, emulated on the CPU. The log says so, the
// losses fall and follow the float32 run's within 0.03 (bf16 GEMM operands: a relative rounding
// of 2^-9 each), and a resumed bf16 run logs the same losses as a straight one (the checkpoint
// holds the float32 masters; the bf16 copies are derived from them).
TEST_F(Ch15_TrainLlamaApp, Bf16FollowsFloat32AndResumesExactly) {
  const auto fp32 = train("fp32", "--steps 8");
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  const auto bf16 = train("bf16", "--steps 8 --precision bf16");
  ASSERT_EQ(bf16.status, 0) << bf16.output;
  EXPECT_TRUE(test09::contains(bf16.output, "device cpu (bf16 mixed precision)")) << bf16.output;
  EXPECT_TRUE(test09::contains(bf16.output, "ops: bf16 mixed precision, emulated on the CPU"))
      << bf16.output;
  EXPECT_FALSE(test09::contains(fp32.output, "bf16 mixed precision")) << fp32.output;
  const std::vector<double> l32 = losses("fp32"), l16 = losses("bf16");
  ASSERT_EQ(l32.size(), 8u);
  ASSERT_EQ(l16.size(), 8u);
  double max_diff = 0;
  for (std::size_t s = 0; s < l32.size(); ++s) {
    EXPECT_NEAR(l16[s], l32[s], 0.03) << "step " << s;
    max_diff = std::max(max_diff, std::abs(l16[s] - l32[s]));
  }
  EXPECT_GT(max_diff, 0.0) << "the bf16 losses equal the float32 ones";
  std::printf("train_llama: max |bf16 - float32| loss over 8 steps %.3g\n", max_diff);
  EXPECT_LT(l16.back(), l16.front()) << "the bf16 loss did not fall";
  EXPECT_NE(
      train("bf16r", "--steps 8 --precision bf16 --kill-after-step 4 --checkpoint-every 2").status,
      0);
  const auto resumed = train("bf16r", "--steps 8 --precision bf16 --checkpoint-every 2 --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(test09::reproducible_columns(dir_.file("bf16r/train.csv")),
            test09::reproducible_columns(dir_.file("bf16/train.csv")));
}

}  // namespace
}  // namespace tt
