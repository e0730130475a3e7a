// The tt_generate app: a tiny random model on the CPU generates, prints time to first token and
// tokens/s, and saves a model directory that loads back with the same logits.
#include "../../08_data/tests/ch08_test_util.h"
#include "ch15_test_util.h"
#include "tt/llama.h"
#include "tt/npy_tensor.h"
#include "tt/temp_dir.h"

namespace tt {
namespace {

using test08::contains;

TEST(Ch15_GenerateApp, PrintsTokensTimeToFirstTokenAndTokensPerSecond) {
  const std::string app = test08::program_path("tt_generate");
  ASSERT_FALSE(app.empty()) << "tt_generate is not next to the test binary";
  const testing::TempDir dir;
  const auto r = test08::run_program(
      app,
      "--random tiny --device cpu --prompt '1,2,3;4,5' --max-new 5 --temperature 0.8 --top-p 0.9 "
      "--save " +
          dir.file("model"),
      dir.file("log"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "row 0:"));
  EXPECT_TRUE(contains(r.output, "row 1:"));
  EXPECT_TRUE(contains(r.output, "time to first token:"));
  EXPECT_TRUE(contains(r.output, "tokens/s"));
  const auto model = llama::load_hf(dir.file("model"));
  const Tensor ids = load_npy(dir.file("model/input_ids.npy"));
  EXPECT_TENSOR_NEAR(model->forward(ids), load_npy(dir.file("model/logits.npy")), 0, 0);
  // GPT-2 (an llm.c file of chapter 09) through the same cache.
  const auto g = test08::run_program(app,
                                     "--gpt2 '" + testing::reference_path("ch09/gpt2_tiny.bin") +
                                         "' --device cpu --prompt '1,2,3' --max-new 6",
                                     dir.file("log3"));
  ASSERT_EQ(g.status, 0) << g.output;
  EXPECT_TRUE(contains(g.output, "model: GPT-2"));
  EXPECT_TRUE(contains(g.output, "tokens/s"));
  const auto bad = test08::run_program(app, "--random huge --device cpu", dir.file("log2"));
  EXPECT_EQ(bad.status, 1);
  EXPECT_TRUE(contains(bad.output, "huge"));
}

}  // namespace
}  // namespace tt
