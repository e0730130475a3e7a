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
          "causal_self_attention: qkv [B, T, 3C] (q | k | v, C split into n_head heads of hs = "
          "C / n_head) -> [B, T, C]; output position i of each head is the softmax(q_i . k_j / "
          "sqrt(hs))-weighted mean of v_j over keys j <= i only; differentiable (autograd ops)");
}

Tensor Block::forward(const Tensor& x) {
  (void)x;
  TT_TODO("ch09.2",
          "Block::forward: the pre-norm residual block, x [B, T, C] -> [B, T, C]: attention, "
          "then the MLP, each reads its own LayerNorm's view of the residual stream and adds "
          "its output to the stream, which is itself never normalized; matches the PyTorch "
          "reference block");
}

}  // namespace tt::gpt2
