// Helpers shared by chapter 15's tests: seeded leaves, a tiny LLaMA configuration, and the
// gradcheck expectation.
#pragma once

#include <vector>

#include "tt/autograd.h"
#include "tt/llama.h"
#include "tt/testing.h"

namespace tt::ch15 {

/// A leaf of `dtype` with N(0, scale^2) values from a seeded generator (requires grad when
/// `grad`).
inline Tensor leaf(const Shape& shape, uint64_t seed, double scale = 1.0,
                   DType dtype = DType::kFloat64, bool grad = true) {
  Generator gen(seed);
  std::vector<double> v = randn(shape, gen, {.dtype = DType::kFloat64}).to_vector<double>();
  for (auto& x : v) x *= scale;
  Tensor t = from_vector<double>(v, shape).to(dtype);
  if (grad) t.set_requires_grad(true);
  return t;
}

/// A tiny LLaMA with grouped-query attention (NH 4, NKV 2) and an untied head: the shape of
/// reference_data/ch15 (gen_llama_reference.py).
inline llama::LlamaConfig tiny_config() {
  llama::LlamaConfig c;
  c.vocab_size = 96;
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 64;
  c.max_seq_len = 128;
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-6;
  c.tie_embeddings = false;
  c.init_std = 0.1;  // larger than LLaMA's 0.02, so that the logits are not all near zero
  return c;
}

}  // namespace tt::ch15

/// EXPECTs that gradcheck(fn, inputs...) passes, printing its message otherwise.
#define EXPECT_GRADCHECK(fn, ...)                                               \
  do {                                                                          \
    const auto r = ::tt::autograd::gradcheck(fn, __VA_ARGS__);                  \
    EXPECT_TRUE(r.ok) << r.message << " (max abs err " << r.max_abs_err << ")"; \
  } while (0)
