// Tests of the KV cache (exercise ch15.4) and of generation (tt/generate.h): prefill + decode
// equals full recomputation at every position, for batch rows of different lengths.
#include <algorithm>
#include <vector>

#include "ch15_test_util.h"
#include "tt/functional.h"
#include "tt/generate.h"
#include "tt/sampling.h"

namespace tt {
namespace {

using llama::Llama;

TEST(Ch15_4_KvCache, AppendThenAttendEqualsAttentionOverTheWholePrefix) {
  // One row at start 3 with Tq = 2, NH 4, NKV 2: queries see keys [0, 3 + t].
  const int64_t NH = 4, NKV = 2, hs = 8, Tmax = 9;
  const Tensor prefix_k = ch15::leaf({1, NKV, 3, hs}, 1, 1.0, DType::kFloat64, false);
  const Tensor prefix_v = ch15::leaf({1, NKV, 3, hs}, 2, 1.0, DType::kFloat64, false);
  const Tensor k_new = ch15::leaf({1, NKV, 2, hs}, 3, 1.0, DType::kFloat64, false);
  const Tensor v_new = ch15::leaf({1, NKV, 2, hs}, 4, 1.0, DType::kFloat64, false);
  const Tensor q = ch15::leaf({1, NH, 2, hs}, 5, 1.0, DType::kFloat64, false);
  Tensor kc = zeros({1, NKV, Tmax, hs}, {DType::kFloat64});
  Tensor vc = zeros({1, NKV, Tmax, hs}, {DType::kFloat64});
  kc.slice(2, 0, 3).copy_(prefix_k);
  vc.slice(2, 0, 3).copy_(prefix_v);
  const Tensor out = llama::kv_cache_attend(q, k_new, v_new, kc, vc, {3});
  EXPECT_TENSOR_NEAR(kc.slice(2, 3, 5), k_new, 0, 0);
  EXPECT_TENSOR_NEAR(vc.slice(2, 3, 5), v_new, 0, 0);
  EXPECT_TENSOR_NEAR(kc.slice(2, 5, Tmax), zeros({1, NKV, 4, hs}, {DType::kFloat64}), 0, 0);
  // Reference: causal GQA over the 5 positions; the cached queries are its last two rows.
  const Tensor k_all = contiguous(kc.slice(2, 0, 5));
  const Tensor v_all = contiguous(vc.slice(2, 0, 5));
  Tensor q_all = zeros({1, NH, 5, hs}, {DType::kFloat64});
  q_all.slice(2, 3, 5).copy_(q);
  const Tensor ref = gqa_attention_naive(q_all, k_all, v_all).slice(2, 3, 5);
  EXPECT_TENSOR_NEAR(out, ref, 1e-12, 1e-12);
}

TEST(Ch15_4_KvCache, ErrorsNameTheRowAndTheShapes) {
  Tensor kc = zeros({2, 1, 4, 8}), vc = zeros({2, 1, 4, 8});
  EXPECT_TT_ERROR(llama::kv_cache_attend(ones({2, 2, 1, 8}), ones({2, 1, 1, 8}), ones({2, 1, 1, 8}),
                                         kc, vc, {0, 4}),
                  "kv_cache_attend", "row 1", "max_len 4");
  EXPECT_TT_ERROR(llama::kv_cache_attend(ones({2, 3, 1, 8}), ones({2, 2, 1, 8}), ones({2, 2, 1, 8}),
                                         kc, vc, {0, 0}),
                  "kv_cache_attend", "[2, 3, 1, 8]");
}

TEST(Ch15_4_KvCache, PrefillAndDecodeEqualFullRecomputationForRowsOfDifferentLengths) {
  Llama model(ch15::tiny_config(), 21);
  const std::vector<std::vector<int64_t>> seqs = {{5, 17, 3, 88, 40, 2, 61, 9, 30, 71, 12},
                                                  {44, 8, 93, 27, 1, 65, 33, 50, 7, 19, 80}};
  const std::vector<int64_t> lens = {3, 7};  // prompt lengths; the rest is fed one token a step
  const int64_t total = 11, longest = 7;
  llama::KVCache cache = model.make_cache(2, total);
  std::vector<int64_t> prompt(2 * longest, 0);
  for (int b = 0; b < 2; ++b) std::copy_n(seqs[b].begin(), lens[b], prompt.begin() + b * longest);
  const Tensor pre = model.forward_cached(from_vector(prompt, {2, longest}), cache, {0, 0});
  std::vector<Tensor> full;
  for (int b = 0; b < 2; ++b) full.push_back(model.forward(from_vector(seqs[b], {1, total})));
  for (int b = 0; b < 2; ++b) {
    EXPECT_TENSOR_NEAR(pre.select(0, b).slice(0, 0, lens[b]),
                       full[b].select(0, 0).slice(0, 0, lens[b]), 1e-5, 0)
        << "prefill of row " << b;
  }
  std::vector<int64_t> len = lens;
  for (int step = 0; len[0] < total; ++step) {
    std::vector<int64_t> next = {seqs[0][len[0]], seqs[1][std::min<int64_t>(len[1], total - 1)]};
    const Tensor logits = model.forward_cached(from_vector(next, {2, 1}), cache, len);
    for (int b = 0; b < 2; ++b) {
      if (len[b] < total) {
        EXPECT_TENSOR_NEAR(logits.select(0, b).select(0, 0), full[b].select(0, 0).select(0, len[b]),
                           1e-5, 0)
            << "decode step " << step << " of row " << b << " at position " << len[b];
      }
    }
    len[0] = std::min<int64_t>(len[0] + 1, total);
    len[1] = std::min<int64_t>(len[1] + 1, total - 1);
  }
}

TEST(Ch15_4_KvCache, GreedyGenerateEqualsGenerationWithoutTheCache) {
  Llama model(ch15::tiny_config(), 22);
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {50, 60, 70, 80, 90, 11}, {4}};
  llama::GenerateOptions opt;
  opt.max_new_tokens = 12;
  opt.sampling.temperature = 0;
  Generator gen(0);
  const llama::GenerateResult r = llama::generate(model, prompts, opt, gen);
  ASSERT_EQ(r.tokens.size(), 3u);
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    EXPECT_EQ(r.tokens[b], llama::generate_greedy_nocache(model, prompts[b], 12)) << "row " << b;
  }
  EXPECT_EQ(r.new_tokens, 36);
  EXPECT_EQ(r.decode_steps, 11);
}

TEST(Ch15_4_KvCache, StopTokensEndARowAndTheSeedFixesSampling) {
  Llama model(ch15::tiny_config(), 23);
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {7, 8}};
  llama::GenerateOptions opt;
  opt.max_new_tokens = 20;
  opt.sampling = {0.9, 20, 0.8};
  Generator g1(5), g2(5);
  const auto a = llama::generate(model, prompts, opt, g1);
  const auto b = llama::generate(model, prompts, opt, g2);
  EXPECT_EQ(a.tokens, b.tokens);
  // Stop at the first token row 0 emitted: row 0 ends after one token, row 1 goes on until it
  // emits that token or reaches max_new_tokens.
  opt.stop_tokens = {a.tokens[0][0]};
  Generator g3(5);
  const auto c = llama::generate(model, prompts, opt, g3);
  EXPECT_EQ(c.tokens[0], std::vector<int64_t>({a.tokens[0][0]}));
  ASSERT_FALSE(c.tokens[1].empty());
  const bool stopped = c.tokens[1].back() == a.tokens[0][0];
  EXPECT_TRUE(stopped || c.tokens[1].size() == 20u);
  EXPECT_TT_ERROR(llama::generate(model, {{1, 200}}, opt, g3), "prompt 0[1] = 200");
  opt.cuda_graph = true;  // a CPU model
  EXPECT_TT_ERROR(llama::generate(model, {{1, 2}}, opt, g3), "cuda_graph", "CUDA");
}

TEST(Ch15_4_KvCache, Gpt2WithTheCacheEqualsItsForward) {
  gpt2::GPT2Config c;
  c.block_size = 16;
  c.vocab_size = 50;
  c.padded_vocab_size = 64;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  gpt2::GPT2 model(c, 3);
  const std::vector<int64_t> seq = {4, 8, 15, 16, 23, 42, 7, 1};
  const Tensor full = model.forward(from_vector(seq, {1, 8}));
  llama::KVCache cache = llama::gpt2_cache(model, 1, 8);
  const Tensor pre = llama::gpt2_forward_cached(
      model, from_vector(std::vector<int64_t>(seq.begin(), seq.begin() + 5), {1, 5}), cache, {0});
  EXPECT_TENSOR_NEAR(pre, full.slice(1, 0, 5), 1e-5, 0);
  for (int64_t p = 5; p < 8; ++p) {
    const Tensor step =
        llama::gpt2_forward_cached(model, from_vector<int64_t>({seq[p]}, {1, 1}), cache, {p});
    EXPECT_TENSOR_NEAR(step.select(1, 0), full.select(1, p), 1e-5, 0) << "position " << p;
  }
  // Greedy generation with the cache = chapter 09's generate (full recomputation).
  llama::GenerateOptions opt;
  opt.max_new_tokens = 8;
  opt.sampling.temperature = 0;
  Generator g1(0), g2(0);
  const auto r = llama::generate(llama::cached_model(model), {{3, 1, 4}}, opt, g1);
  const std::vector<int64_t> ref = gpt2::generate(model, {3, 1, 4}, 8, {0.0, 0}, g2);
  EXPECT_EQ(r.tokens[0], std::vector<int64_t>(ref.begin() + 3, ref.end()));
}

}  // namespace
}  // namespace tt
