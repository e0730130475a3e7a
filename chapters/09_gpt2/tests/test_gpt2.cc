// Chapter 09: configuration checks, the llm.c format (layout, round
// trip, malformed files), attention causality, the pre-norm block, sampling, generation without
// memory growth, the training step (accumulation, clipping, NaN guard) and exact resume.
#include <cmath>
#include <map>

#include "ch09_test_util.h"
#include "tt/autograd.h"
#include "tt/checkpoint.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/sampling.h"
#include "tt/testing.h"
#include "tt/train.h"

namespace tt::gpt2 {
namespace {

using test09::fixed_batch;
using test09::tiny_config;

// ----- configuration and parameters ------------------------------------------------------------

TEST(Ch09_Config, RejectsBadSizes) {
  GPT2Config c = tiny_config();
  c.n_head = 3;
  EXPECT_TT_ERROR(c.validate(), "n_embd", "n_head");
  c = tiny_config();
  c.padded_vocab_size = 10;
  EXPECT_TT_ERROR(c.validate(), "padded_vocab_size");
  c = tiny_config();
  c.n_layer = 0;
  EXPECT_TT_ERROR(c.validate(), "n_layer");
}

TEST(Ch09_Model, ParameterNamesCountAndTiedHead) {
  GPT2 m(tiny_config());
  const auto params = m.named_parameters();
  ASSERT_EQ(params.size(), 2u + 12u * 2u + 2u);
  EXPECT_EQ(params.front().first, "wte.weight");
  EXPECT_EQ(params[2].first, "h.0.ln_1.weight");
  EXPECT_EQ(params[4].first, "h.0.attn.c_attn.weight");
  EXPECT_EQ(params.back().first, "ln_f.bias");
  // 12 C^2 + 13 C per layer, embeddings (Vp + maxT) C, ln_f 2C; the head adds nothing (tied).
  const int64_t C = 16, L = 2;
  EXPECT_EQ(m.num_parameters(), L * (12 * C * C + 13 * C) + (64 + 16) * C + 2 * C);
  EXPECT_EQ(m.parameter("wte.weight").shape(), (Shape{64, 16}));
  EXPECT_TT_ERROR(m.parameter("lm_head.weight"), "no parameter named");
}

TEST(Ch09_Model, EveryTrainingKernelExistsOnTheCpu) {
  EXPECT_TRUE(missing_training_kernels(DeviceType::kCPU).empty());
}

TEST(Ch09_Model, ForwardRejectsBadInput) {
  GPT2 m(tiny_config());
  EXPECT_TT_ERROR(m.forward(zeros({2, 4})), "int64");
  EXPECT_TT_ERROR(m.forward(zeros({1, 17}, {DType::kInt64})), "block_size");
}

// ----- llm.c files -----------------------------------------------------------------------------

TEST(Ch09_5_LlmcLayout, OffsetsFollowLlmcOrder) {
  const GPT2Config c = tiny_config();  // L=2, C=16, Vp=64, maxT=16
  const std::vector<LlmcSlot> slots = llmc_layout(c);
  ASSERT_EQ(slots.size(), 28u);
  std::map<std::string, LlmcSlot> by;
  for (const auto& s : slots) by[s.name] = s;
  const int64_t C = 16, L = 2, base = (64 + 16) * C;
  EXPECT_EQ(by["wte.weight"].offset, 0);
  EXPECT_EQ(by["wpe.weight"].offset, 64 * C);
  EXPECT_EQ(by["h.0.ln_1.weight"].offset, base);
  EXPECT_EQ(by["h.1.ln_1.weight"].offset, base + C);
  EXPECT_EQ(by["h.0.ln_1.bias"].offset, base + L * C);
  EXPECT_EQ(by["h.0.attn.c_attn.weight"].offset, base + 2 * L * C);
  EXPECT_EQ(by["h.1.attn.c_attn.weight"].offset, base + 2 * L * C + 3 * C * C);
  EXPECT_EQ(by["h.1.attn.c_attn.weight"].shape, (Shape{3 * C, C}));
  EXPECT_EQ(by["h.1.mlp.c_proj.bias"].offset, llmc_num_floats(c) - 2 * C - C);
  EXPECT_EQ(by["ln_f.weight"].offset, llmc_num_floats(c) - 2 * C);
  EXPECT_EQ(by["ln_f.bias"].offset, llmc_num_floats(c) - C);
  // Every float belongs to exactly one slot.
  int64_t total = 0;
  for (const auto& s : slots) total += shape_numel(s.shape);
  EXPECT_EQ(total, llmc_num_floats(c));
}

TEST(Ch09_5_LlmcLayout, SaveLoadRoundTripIsByteExact) {
  const std::string src = testing::reference_path("ch09/gpt2_tiny.bin");
  const test09::TempDir dir;
  const std::string copy = dir.file("roundtrip.bin");
  const auto model = load_llmc(src);
  save_llmc(*model, copy);
  const std::string bytes_a = test09::read_bytes(src), bytes_b = test09::read_bytes(copy);
  EXPECT_EQ(bytes_a.size(), bytes_b.size());
  EXPECT_TRUE(bytes_a == bytes_b) << "save_llmc(load_llmc(f)) differs from f";
  // The in-memory versions are the same code.
  const auto in_memory = parse_llmc(std::as_bytes(std::span(bytes_a.data(), bytes_a.size())), src);
  const std::vector<std::byte> bytes_c = serialize_llmc(*in_memory);
  EXPECT_TRUE(std::string(reinterpret_cast<const char*>(bytes_c.data()), bytes_c.size()) == bytes_a)
      << "serialize_llmc(parse_llmc(bytes)) differs from bytes";
}

/// An llm.c-like file: a header with `fields` (then zeros) and `floats` zero parameters.
std::string llmc_bytes(const std::vector<int32_t>& fields, int64_t floats) {
  std::string bytes(static_cast<std::size_t>(1024 + 4 * floats), '\0');
  for (std::size_t i = 0; i < fields.size(); ++i) test09::put_le32(bytes, 4 * i, fields[i]);
  return bytes;
}

TEST(Ch09_LlmcHeader, RejectsMalformedFiles) {
  const GPT2Config c = tiny_config();
  const int64_t n = llmc_num_floats(c);
  const std::vector<int32_t> good = {kLlmcMagic, 3, 16, 50, 2, 2, 16, 64};
  const test09::TempDir dir;
  const std::string f = dir.file("model.bin");
  test09::write_bytes(f, llmc_bytes(good, n));
  EXPECT_EQ(read_llmc_header(f).str(), c.str());

  std::vector<int32_t> h = good;
  h[0] = 12345;
  test09::write_bytes(f, llmc_bytes(h, n));
  EXPECT_TT_ERROR(read_llmc_header(f), "magic", "12345");

  h = good;
  h[1] = 5;
  test09::write_bytes(f, llmc_bytes(h, n));
  EXPECT_TT_ERROR(read_llmc_header(f), "version 5", "bfloat16");

  test09::write_bytes(f, llmc_bytes(good, n - 1));
  EXPECT_TT_ERROR(read_llmc_header(f), "bytes", "needs");

  h = good;
  h[5] = 3;  // C = 16 not divisible by 3 heads
  test09::write_bytes(f, llmc_bytes(h, n));
  EXPECT_TT_ERROR(read_llmc_header(f), "invalid header", "n_head");

  test09::write_bytes(f, "GPT");
  EXPECT_TT_ERROR(read_llmc_header(f), "shorter than");
  EXPECT_TT_ERROR(read_llmc_header(dir.file("missing.bin")), "cannot open");
  // A directory where the model file is expected: said so (mmap's "No such device" before).
  std::filesystem::create_directories(dir.file("model_dir"));
  EXPECT_TT_ERROR(read_llmc_header(dir.file("model_dir")),
                  "llm.c model file '" + dir.file("model_dir") + "' is a directory");
  EXPECT_TT_ERROR(load_llmc(dir.file("model_dir")), "llm.c model file '", "is a directory");
}

TEST(Ch09_LlmcHeader, HostileSizesAreRejectedWithoutOverflow) {
  // Found by fuzz_llmc_import: the float count (and the byte count from it) overflowed int64,
  // so a header could claim a huge model whose size wrapped around to the file's.
  auto header = [](std::vector<int32_t> fields) {
    const std::string bytes = llmc_bytes(fields, 1);
    return parse_llmc_header(std::as_bytes(std::span(bytes.data(), bytes.size())), "hostile.bin");
  };
  const int32_t big = INT32_MAX;
  EXPECT_TT_ERROR(header({kLlmcMagic, 3, 1, 1, big, 1, big, 1}), "hostile.bin", "invalid header",
                  "does not fit int64");
  // 2^29 layers of C = 2^15: the float count fits int64, four times it does not.
  EXPECT_TT_ERROR(header({kLlmcMagic, 3, 1, 1, 1 << 29, 1, 1 << 15, 1}), "hostile.bin",
                  "1028 bytes", "needs 1024 (header) + 4 x");
  GPT2Config huge;
  huge.n_layer = big;
  huge.n_embd = big;
  EXPECT_TT_ERROR(llmc_num_floats(huge), "llmc_num_floats", "does not fit int64");
}

// ----- attention and block ---------------------------------------------------------------------

TEST(Ch09_1_Attention, IsCausal) {
  // Changing the tokens at positions >= 3 must not change outputs at positions < 3.
  Generator g(7);
  const Tensor a = randn({1, 6, 3 * 8}, g);
  const Tensor b = a.clone();
  b.slice(1, 3, 6).copy_(randn({1, 3, 24}, g));
  const Tensor ya = causal_self_attention(a, 2), yb = causal_self_attention(b, 2);
  ASSERT_EQ(ya.shape(), (Shape{1, 6, 8}));
  EXPECT_TENSOR_NEAR(ya.slice(1, 0, 3), yb.slice(1, 0, 3), 0, 0);
  EXPECT_FALSE(allclose(ya.slice(1, 3, 6), yb.slice(1, 3, 6)));
}

TEST(Ch09_1_Attention, FirstPositionCopiesItsValue) {
  // Position 0 can only attend to itself: its output is its own v.
  Generator g(3);
  const Tensor qkv = randn({2, 4, 12}, g);
  const Tensor y = causal_self_attention(qkv, 2);
  EXPECT_TENSOR_NEAR(y.select(1, 0), qkv.select(1, 0).slice(1, 8, 12), 1e-6, 0);
  EXPECT_TT_ERROR(causal_self_attention(randn({2, 4, 10}, g), 2), "causal_self_attention");
}

TEST(Ch09_2_Block, ZeroSublayersAreTheIdentity) {
  // With zero output projections both residual branches add 0: the block returns x.
  GPT2Config c = tiny_config();
  Generator g(5);
  Block block(c, g);
  block.attn->c_proj->weight.fill_(0);
  block.attn->c_proj->bias.fill_(0);
  block.mlp->c_proj->weight.fill_(0);
  block.mlp->c_proj->bias.fill_(0);
  const Tensor x = randn({2, 5, 16}, g);
  EXPECT_TENSOR_NEAR(block.forward(x), x, 0, 0);
  // A bias on the MLP output shifts every position by exactly that bias.
  block.mlp->c_proj->bias.fill_(0.5);
  EXPECT_TENSOR_NEAR(block.forward(x), add(x, 0.5), 1e-6, 0);
}

// ----- sampling --------------------------------------------------------------------------------

TEST(Ch09_3_Sampling, GreedyAndTopOneAreArgmax) {
  const Tensor logits = from_vector(std::vector<float>{0.1f, 2.0f, -1.0f, 2.0f, 0.5f});
  Generator g(1);
  EXPECT_EQ(sample_token(logits, {0.0, 0}, g), 1);  // first of the tied maxima
  for (int i = 0; i < 20; ++i) {
    const int64_t t = sample_token(logits, {1.0, 1}, g);
    EXPECT_TRUE(t == 1 || t == 3) << t;  // top-1 keeps the tied maxima only
  }
}

TEST(Ch09_3_Sampling, MatchesSoftmaxFrequenciesAndIsSeeded) {
  // p = softmax([0, ln 3]) = [0.25, 0.75] at temperature 1.
  const Tensor logits = from_vector(std::vector<float>{0.f, std::log(3.f)});
  Generator g(42);
  int ones = 0;
  const int n = 4000;
  std::vector<int64_t> first;
  for (int i = 0; i < n; ++i) {
    const int64_t t = sample_token(logits, {1.0, 0}, g);
    ones += t == 1;
    if (i < 50) first.push_back(t);
  }
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.03);
  Generator again(42);
  for (int64_t t : first) EXPECT_EQ(sample_token(logits, {1.0, 0}, again), t);
  // A high temperature flattens the distribution towards uniform.
  Generator h(9);
  int hot = 0;
  for (int i = 0; i < n; ++i) hot += sample_token(logits, {100.0, 0}, h) == 1;
  EXPECT_NEAR(static_cast<double>(hot) / n, 0.5, 0.04);
}

TEST(Ch09_3_Sampling, TopKNeverPicksOthers) {
  const Tensor logits = from_vector(std::vector<float>{5.f, 1.f, 4.f, 0.f, 4.5f, -2.f});
  Generator g(3);
  std::map<int64_t, int> seen;
  for (int i = 0; i < 500; ++i) ++seen[sample_token(logits, {2.0, 3}, g)];
  for (const auto& [t, count] : seen) EXPECT_TRUE(t == 0 || t == 2 || t == 4) << t;
  EXPECT_EQ(seen.size(), 3u);
}

TEST(Ch09_Sampling, RejectsBadOptions) {
  Generator g(1);
  const Tensor logits = zeros({4});
  EXPECT_TT_ERROR(sample_token(logits, {-1.0, 0}, g), "temperature");
  EXPECT_TT_ERROR(sample_token(logits, {1.0, -2}, g), "top_k");
  EXPECT_TT_ERROR(sample_token(zeros({2, 2}), {1.0, 0}, g), "1-D");
}

TEST(Ch09_Generate, NoGraphAndNoMemoryGrowth) {
  GPT2 m(tiny_config());
  Generator g(11);
  // Warm up once (caches such as kernel tables), then generation must not grow the number of
  // live tensors or autograd nodes, however many tokens are sampled (past the context window).
  generate(m, {1, 2, 3}, 4, {1.0, 10}, g);
  const int64_t tensors = TensorImpl::live_count(), nodes = autograd::Node::live_count();
  const std::vector<int64_t> out = generate(m, {1, 2, 3}, 40, {1.0, 10}, g);
  EXPECT_EQ(TensorImpl::live_count(), tensors);
  EXPECT_EQ(autograd::Node::live_count(), nodes);
  ASSERT_EQ(out.size(), 43u);
  for (int64_t t : out) EXPECT_TRUE(t >= 0 && t < 50) << t;
  EXPECT_TRUE(autograd::is_grad_enabled());  // the guard restored grad mode
}

// ----- training --------------------------------------------------------------------------------

TEST(Ch09_4_TrainStep, AveragesMicroBatchGradients) {
  // loss_i = sum(p * x_i): the step's gradient is the mean of the x_i, and SGD with lr 1 moves
  // p by exactly minus that mean. Built with given code only (the first TODO met is ch09.4).
  const Tensor p = from_vector(std::vector<float>{1.f, 2.f, 3.f}).set_requires_grad(true);
  optim::SgdOptions so;
  so.lr = 1.0;
  optim::SGD opt(std::vector<Tensor>{p}, so);
  const std::vector<Tensor> xs = {from_vector(std::vector<float>{1.f, 0.f, 4.f}),
                                  from_vector(std::vector<float>{3.f, 2.f, 0.f})};
  int calls = 0;
  const TrainStepResult r = train_step(
      opt, [&](const Batch& b) { return sum(mul(p, b.inputs)); },
      [&] {
        return Batch{xs[static_cast<std::size_t>(calls++)], Tensor()};
      },
      {2, 0.0});
  EXPECT_EQ(calls, 2);
  EXPECT_NEAR(r.loss, (13.0 + 7.0) / 2, 1e-6);  // mean of 1+0+12 and 3+4+0
  EXPECT_NEAR(r.grad_norm, std::sqrt(2.0 * 2.0 + 1.0 + 2.0 * 2.0), 1e-6);  // |(2, 1, 2)|
  EXPECT_EQ(r.tokens, 6);
  EXPECT_TENSOR_NEAR(p, from_vector(std::vector<float>{-1.f, 1.f, 1.f}), 1e-6, 0);
  EXPECT_EQ(opt.step_count(), 1);
}

TEST(Ch09_4_TrainStep, AccumulationEqualsOneBigBatch) {
  // Two micro-batches of 2 rows with accumulation give the gradient of the 4-row batch.
  const Batch big = fixed_batch(4, 8, 50, 1);
  GPT2 a(tiny_config(), 3), b(tiny_config(), 3);
  optim::AdamW opt_a(a.parameters(), {}), opt_b(b.parameters(), {});
  const TrainStepResult ra = train_step(a, opt_a, [&] { return big; }, {1, 0.0});
  int micro = 0;
  auto halves = [&] {
    const int64_t r = 2 * micro++;
    return Batch{big.inputs.slice(0, r, r + 2).contiguous(),
                 big.targets.slice(0, r, r + 2).contiguous()};
  };
  const TrainStepResult rb = train_step(b, opt_b, halves, {2, 0.0});
  EXPECT_EQ(micro, 2);
  EXPECT_NEAR(ra.loss, rb.loss, 1e-6);
  EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-5 * ra.grad_norm);
  EXPECT_EQ(rb.tokens, 32);
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TENSOR_NEAR(pb[i].second.grad(), pa[i].second.grad(), 1e-6, 1e-4) << pa[i].first;
  }
}

TEST(Ch09_4_TrainStep, ClipsAndReportsTheNormBeforeClipping) {
  const Batch batch = fixed_batch(2, 8, 50, 2);
  GPT2 m(tiny_config(), 4);
  optim::SGD opt(m.parameters(), {});
  const TrainStepResult r = train_step(m, opt, [&] { return batch; }, {1, 1e-3});
  ASSERT_GT(r.grad_norm, 1e-3);
  double sq = 0;
  for (const Tensor& p : m.parameters()) {
    for (float v : p.grad().to_vector<float>()) sq += static_cast<double>(v) * v;
  }
  EXPECT_NEAR(std::sqrt(sq), 1e-3, 1e-6);  // gradients were scaled to the threshold
}

TEST(Ch09_4_TrainStep, NonFiniteLossSkipsTheUpdate) {
  const Batch batch = fixed_batch(2, 8, 50, 3);
  GPT2 m(tiny_config(), 5);
  optim::AdamW opt(m.parameters(), {});
  m.parameter("ln_f.weight").fill_(NAN);
  const Tensor before = m.parameter("h.0.mlp.c_fc.weight").clone();
  const TrainStepResult r = train_step(m, opt, [&] { return batch; }, {1, 1.0});
  EXPECT_FALSE(r.finite);
  EXPECT_EQ(opt.step_count(), 0);
  EXPECT_TENSOR_NEAR(m.parameter("h.0.mlp.c_fc.weight"), before, 0, 0);
}

TEST(Ch09_Train, ResumeFromCheckpointIsExact) {
  // 6 steps straight == 3 steps, checkpoint, fresh objects, load, 3 more steps: the losses are
  // compared with == (bit for bit, not within a tolerance), and so are the final parameters
  // and the optimizer state (moments, step, lr).
  const GPT2Config c = tiny_config();
  auto batches = [](int64_t& i) { return fixed_batch(2, 8, 50, 100 + static_cast<uint64_t>(i++)); };
  auto make_opt = [](GPT2& m) {
    return std::make_unique<optim::AdamW>(param_groups(m, 0.1), optim::AdamWOptions{});
  };
  std::vector<double> straight;
  GPT2 straight_model(c, 9);
  auto straight_opt = make_opt(straight_model);
  {
    int64_t i = 0;
    for (int s = 0; s < 6; ++s) {
      straight.push_back(
          train_step(straight_model, *straight_opt, [&] { return batches(i); }, {2, 1.0}).loss);
    }
  }
  const test09::TempDir dir;
  const std::string path = dir.file("resume.ttckpt");
  std::vector<double> resumed;
  int64_t i = 0;
  {
    GPT2 m(c, 9);
    auto opt = make_opt(m);
    for (int s = 0; s < 3; ++s)
      resumed.push_back(train_step(m, *opt, [&] { return batches(i); }, {2, 1.0}).loss);
    ckpt::save_checkpoint(path, m, opt.get());
  }
  GPT2 m(c, 1234);  // a different init: everything must come from the file
  auto opt = make_opt(m);
  ckpt::load_checkpoint(path, m, opt.get());
  EXPECT_EQ(opt->step_count(), 3);
  for (int s = 0; s < 3; ++s)
    resumed.push_back(train_step(m, *opt, [&] { return batches(i); }, {2, 1.0}).loss);
  ASSERT_EQ(resumed.size(), straight.size());
  for (std::size_t s = 0; s < straight.size(); ++s) EXPECT_EQ(resumed[s], straight[s]) << s;
  const auto a = straight_model.state_dict(), b = m.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].second.to_vector<float>(), b[k].second.to_vector<float>()) << a[k].first;
  }
  const auto sa = straight_opt->state_dict(), sb = opt->state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  EXPECT_EQ(sa[0].second.item(), sb[0].second.item());  // step
  EXPECT_EQ(sa[1].second.item(), sb[1].second.item());  // lr
  for (std::size_t k = 2; k < sa.size(); ++k) {
    EXPECT_EQ(sa[k].second.to_vector<float>(), sb[k].second.to_vector<float>()) << sa[k].first;
  }
}

TEST(Ch09_Train, ParamGroupsAndFlops) {
  GPT2 m(tiny_config());
  const auto groups = param_groups(m, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.1);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  for (const Tensor& p : groups[0].params) EXPECT_GE(p.dim(), 2);
  for (const Tensor& p : groups[1].params) EXPECT_EQ(p.dim(), 1);
  EXPECT_EQ(groups[0].params.size() + groups[1].params.size(), m.parameters().size());
  EXPECT_DOUBLE_EQ(flops_per_token(m.config(), 1000, 8), 6000.0 + 12.0 * 2 * 16 * 8);
}

}  // namespace
}  // namespace tt::gpt2
