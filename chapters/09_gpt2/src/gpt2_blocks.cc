// ============================================================================================
// YOUR EXERCISE FILE for chapter 09_gpt2. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch09
// Generated from solutions/09_gpt2/gpt2_blocks.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The two exercises at the heart of GPT-2 (tt/gpt2.h): causal self-attention (ch09.1) and the
// pre-norm transformer block (ch09.2), written with chapter 04's differentiable ops and
// chapter 05's layers, so autograd derives their backward passes.
#include <cmath>

#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/todo.h"

namespace tt::gpt2 {

Tensor causal_self_attention(const Tensor& qkv, int64_t n_head) {
  TT_TODO("ch09.1",
          "causal self-attention: slice q, k, v from qkv, view+permute each to [B, NH, T, hs], "
          "scores = q @ k^T / sqrt(hs), masked_fill(causal_mask(T), -inf), softmax over the "
          "last dim, @ v, permute back and reshape to [B, T, C]");
}

Tensor Block::forward(const Tensor& x) {
  (void)x;
  TT_TODO("ch09.2",
          "GPT-2 block: x = x + attn(ln_1(x)), then x + mlp(ln_2(x)) (pre-norm residuals: each "
          "sub-layer reads a normalized copy and adds its output to the residual stream)");
}

}  // namespace tt::gpt2
