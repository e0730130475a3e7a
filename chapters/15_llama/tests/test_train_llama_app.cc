// train_llama: a tiny GQA LLaMA trained by chapter 09's training library on the CPU: the loss
// falls, a resumed run logs the same losses as a straight one, and the final Hugging Face
// directory loads back.
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
  test09::TempDir dir_;
};

TEST_F(Ch15_TrainLlamaApp, LossFallsResumeIsExactAndTheModelLoadsBack) {
  const auto straight = train("straight", "--steps 8");
  ASSERT_EQ(straight.status, 0) << straight.output;
  EXPECT_TRUE(test09::contains(straight.output, "model: LLaMA"));
  EXPECT_TRUE(test09::contains(straight.output, "NKV=2"));
  // The training loss of each step (validation rows have an empty loss cell).
  std::vector<double> losses;
  for (const auto& row : test09::read_csv(dir_.file("straight/train.csv"))) {
    if (row.size() > 1 && !row[1].empty() && row[1] != "loss") losses.push_back(std::stod(row[1]));
  }
  ASSERT_EQ(losses.size(), 8u) << straight.output;
  EXPECT_LT(losses.back(), losses.front()) << "the loss did not fall";
  // 4 steps, then --resume to 8: the same log as the straight run.
  EXPECT_NE(train("resumed", "--steps 8 --kill-after-step 4 --checkpoint-every 2").status, 0);
  const auto resumed = train("resumed", "--steps 8 --checkpoint-every 2 --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(test09::reproducible_columns(dir_.file("resumed/train.csv")),
            test09::reproducible_columns(dir_.file("straight/train.csv")));
  const auto model = llama::load_hf(dir_.file("straight/hf"));
  EXPECT_EQ(model->config().n_kv_heads, 2);
  EXPECT_EQ(model->config().vocab_size, 257);
  const auto bad = train("bad", "--steps 2 --precision bf16");
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(test09::contains(bad.output, "--precision bf16"));
  // The run record holds --n-kv-head: resuming with another value is refused by name, before
  // any parameter is loaded (the shapes would differ).
  const auto other_kv = train("resumed", "--steps 8 --resume --n-kv-head 4");
  EXPECT_EQ(other_kv.status, 1) << other_kv.output;
  EXPECT_TRUE(test09::contains(other_kv.output, "--n-kv-head: 2 in the checkpoint, 4 now"))
      << other_kv.output;
}

}  // namespace
}  // namespace tt
