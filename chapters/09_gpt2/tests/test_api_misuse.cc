// API misuse of chapter 09's public entry points: the model (configuration, forward, loss,
// attention), sampling and generation, the training step and evaluation (the dataloader's are
// chapter 08's, 08_data/tests/test_api_misuse.cc). Each bad input must throw tt::Error naming the
// entry point and the offending shape, dtype, device or value. Then the documented results for
// empty batches and non-finite logits.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ch09_test_util.h"
#include "tt/sampling.h"
#include "tt/second_device.h"
#include "tt/testing.h"
#include "tt/train.h"

namespace tt::gpt2 {
namespace {

using test09::fixed_batch;
using test09::tiny_config;
using testing::expect_errors;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(Ch09_ApiMisuse, ModelNamesShapesDtypesAndValues) {
  GPT2 m(tiny_config(), 1);
  const Batch b = fixed_batch(2, 4, 50, 1);
  GPT2Config neg = tiny_config();
  neg.block_size = -1;
  expect_errors({
      {"config", [&] { neg.validate(); }, {"GPT2Config", "block_size", "-1"}},
      {"float idx",
       [&] {
         m.forward(zeros({2, 4}));
       },
       {"GPT2::forward", "int64", "float32"}},
      {"1-D idx",
       [&] {
         m.forward(tensor_i64({1, 2}));
       },
       {"GPT2::forward", "[B, T]", "[2]"}},
      {"undefined idx", [&] { m.forward(Tensor()); }, {"GPT2::forward", "undefined"}},
      {"T = 0",
       [&] {
         m.forward(zeros({2, 0}, {.dtype = DType::kInt64}));
       },
       {"GPT2::forward", "T = 0", "block_size = 16"}},
      {"T > block_size",
       [&] {
         m.forward(zeros({1, 17}, {.dtype = DType::kInt64}));
       },
       {"GPT2::forward", "T = 17"}},
      {"token >= Vp",
       [&] {
         m.forward(from_vector<int64_t>({1, 64}, {1, 2}));
       },
       {"embedding", "indices[1] = 64", "[0, 64)"}},
      {"negative token",
       [&] {
         m.forward(from_vector<int64_t>({-3}, {1, 1}));
       },
       {"embedding", "indices[0] = -3"}},
      {"targets shape",
       [&] { m.loss(b.inputs, b.targets.reshape({8})); },
       {"GPT2::loss", "[8]", "[2, 4]"}},
      {"targets dtype",
       [&] {
         m.loss(b.inputs, zeros({2, 4}));
       },
       {"cross_entropy", "float32"}},
      {"target in the padding",
       [&] {
         m.loss(b.inputs, full({2, 4}, 55, {.dtype = DType::kInt64}));
       },
       {"cross_entropy", "= 55", "[0, 50)"}},
      {"parameter name",
       [&] { m.parameter("h.9.ln_1.weight"); },
       {"GPT2::parameter", "h.9.ln_1.weight"}},
      {"attention rank",
       [&] {
         causal_self_attention(zeros({4, 12}), 2);
       },
       {"causal_self_attention", "[4, 12]"}},
      {"attention heads",
       [&] {
         causal_self_attention(zeros({1, 4, 12}), 0);
       },
       {"causal_self_attention", "n_head = 0"}},
      {"attention split",
       [&] {
         causal_self_attention(zeros({1, 4, 12}), 3);
       },
       {"causal_self_attention", "n_head = 3", "[1, 4, 12]"}},
      {"attention undefined",
       [&] { causal_self_attention(Tensor(), 2); },
       {"causal_self_attention", "undefined"}},
  });
}

TEST(Ch09_ApiMisuse, ModelOnCpuInputOnCuda) {
  TT_SECOND_DEVICE_OR_SKIP(dev);
  GPT2 m(tiny_config(), 1);
  EXPECT_TT_ERROR(m.forward(tensor_i64({1, 2}).reshape({1, 2}).to(dev)), "embedding", "cpu",
                  dev.str());
}

TEST(Ch09_ApiMisuse, SamplingRejectsWhatCannotBeSampledFrom) {
  GPT2 m(tiny_config(), 2);
  Generator g(1);
  auto logits = [](std::vector<double> v) { return from_vector(v); };
  expect_errors({
      {"NaN logit",
       [&] {
         sample_token(logits({0, kNaN, 1}), {1.0, 0}, g);
       },
       {"sample_token", "logits[1] = nan"}},
      {"NaN logit greedy",
       [&] {
         sample_token(logits({kNaN, 1}), {0.0, 0}, g);
       },
       {"sample_token", "logits[0] = nan"}},
      {"+inf logit",
       [&] {
         sample_token(logits({0, kInf}), {1.0, 0}, g);
       },
       {"sample_token", "logits[1] = inf"}},
      {"all -inf",
       [&] {
         sample_token(logits({-kInf, -kInf}), {1.0, 0}, g);
       },
       {"sample_token", "-inf", "[2]"}},
      {"temperature NaN",
       [&] {
         sample_token(logits({0, 1}), {kNaN, 0}, g);
       },
       {"sample_token", "temperature", "nan"}},
      {"temperature Inf",
       [&] {
         sample_token(logits({0, 1}), {kInf, 0}, g);
       },
       {"sample_token", "temperature", "inf"}},
      {"int64 logits",
       [&] {
         sample_token(tensor_i64({1, 2}), {1.0, 0}, g);
       },
       {"sample_token", "int64"}},
      {"empty logits",
       [&] {
         sample_token(zeros({0}), {1.0, 0}, g);
       },
       {"sample_token", "[0]"}},
      {"undefined logits",
       [&] {
         sample_token(Tensor(), {1.0, 0}, g);
       },
       {"sample_token", "undefined"}},
      {"empty prompt", [&] { generate(m, {}, 2, {}, g); }, {"generate", "prompt"}},
      {"negative count",
       [&] { generate(m, {1}, -1, {}, g); },
       {"generate", "max_new_tokens", "-1"}},
      {"prompt id",
       [&] {
         generate(m, {1, 50}, 1, {}, g);
       },
       {"generate", "prompt[1] = 50", "vocab_size = 50"}},
  });
  // -inf is just probability 0 (a masked token): never sampled, even at a high temperature.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sample_token(logits({-kInf, 0, -kInf}), {5.0, 0}, g), 1);
}

TEST(Ch09_ApiMisuse, TrainingAndEvaluationRejectBadArguments) {
  GPT2 m(tiny_config(), 3);
  optim::AdamW opt(param_groups(m, 0.1), {});
  const Batch good = fixed_batch(2, 4, 50, 2);
  auto batch_of = [](Batch b) { return [b] { return b; }; };
  expect_errors({
      {"accumulation 0",
       [&] {
         train_step(m, opt, batch_of(good), {0, 1.0});
       },
       {"train_step", "grad_accum_steps", "0"}},
      {"bad batch",
       [&] {
         train_step(m, opt, batch_of({good.inputs, good.inputs.reshape({8})}), {});
       },
       {"GPT2::loss", "[8]"}},
      {"float batch",
       [&] {
         train_step(m, opt, batch_of({zeros({2, 4}), good.targets}), {});
       },
       {"GPT2::forward", "float32"}},
      {"non-scalar loss",
       [&] {
         train_step(opt, [&](const Batch&) { return m.parameter("ln_f.bias"); }, batch_of(good),
                    {});
       },
       {"train_step", "one-element", "[16]"}},
      {"evaluate 0 batches",
       [&] { evaluate(m, batch_of(good), 0); },
       {"evaluate", "num_batches", "0"}},
      {"negative weight decay",
       [&] { optim::AdamW(param_groups(m, -0.1), {}); },
       {"AdamW", "group 0", "-0.1"}},
      {"all_finite undefined", [&] { all_finite({Tensor()}); }, {"all_finite", "undefined"}},
  });
  EXPECT_EQ(opt.step_count(), 0);  // nothing was applied
}

// ----- empty batches ----------------------------------------------------------------------------

TEST(Ch09_EmptyTensors, AnEmptyBatchGivesEmptyLogitsAndANaNLoss) {
  // B = 0 rows: logits [0, T, V]; the mean loss over no tokens is NaN (like PyTorch), which is
  // exactly what train_step's finite check catches: no update.
  GPT2 m(tiny_config(), 4);
  const Tensor none = zeros({0, 4}, {.dtype = DType::kInt64});
  EXPECT_EQ(m.forward(none).shape(), (Shape{0, 4, 50}));
  EXPECT_TRUE(std::isnan(m.loss(none, none).item()));
  optim::AdamW opt(m.parameters(), {});
  const TrainStepResult r = train_step(m, opt, [&] { return Batch{none, none}; }, {});
  EXPECT_FALSE(r.finite);
  EXPECT_EQ(opt.step_count(), 0);
  EXPECT_EQ(r.tokens, 0);
}

}  // namespace
}  // namespace tt::gpt2
