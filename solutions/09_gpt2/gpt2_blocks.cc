// The two exercises at the heart of GPT-2 (tt/gpt2.h): causal self-attention (ch09.1) and the
// pre-norm transformer block (ch09.2), written with chapter 04's differentiable ops and
// chapter 05's layers, so autograd derives their backward passes.
#include <cmath>

#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/todo.h"

namespace tt::gpt2 {

Tensor causal_self_attention(const Tensor& qkv, int64_t n_head) {
#if TT_SOLUTION
  TT_CHECK(qkv.defined() && qkv.dim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0,
           "causal_self_attention: qkv must be [B, T, 3C] with C divisible by n_head = ", n_head,
           ", got ", qkv.describe());
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, hs = C / n_head;
  // Split q | k | v along channels, then each C into heads: [B, T, NH, hs] -> [B, NH, T, hs].
  auto head_view = [&](int64_t which) {
    const Tensor part = slice(qkv, 2, which * C, (which + 1) * C);
    return permute(view(part, {B, T, n_head, hs}), {0, 2, 1, 3});
  };
  const Tensor q = head_view(0), k = head_view(1), v = head_view(2);
  // Scores [B, NH, T, T], scaled so their variance does not grow with hs.
  Tensor att = mul(matmul(q, transpose(k, -2, -1)), 1.0 / std::sqrt(static_cast<double>(hs)));
  // Query i may only look at keys j <= i.
  att = softmax(masked_fill(att, causal_mask(T, qkv.device()), -INFINITY), -1);
  // Weighted sum of values, heads merged back: [B, NH, T, hs] -> [B, T, NH, hs] -> [B, T, C].
  return reshape(permute(matmul(att, v), {0, 2, 1, 3}), {B, T, C});
#else
  TT_TODO("ch09.1",
          "causal_self_attention: qkv [B, T, 3C] (q | k | v, C split into n_head heads of hs = "
          "C / n_head) -> [B, T, C]; output position i of each head is the softmax(q_i . k_j / "
          "sqrt(hs))-weighted mean of v_j over keys j <= i only; differentiable (autograd ops)");
#endif
}

Tensor Block::forward(const Tensor& x) {
#if TT_SOLUTION
  const Tensor x1 = add(x, attn->forward(ln_1->forward(x)));
  return add(x1, mlp->forward(ln_2->forward(x1)));
#else
  (void)x;
  TT_TODO("ch09.2",
          "Block::forward: the pre-norm residual block, x [B, T, C] -> [B, T, C]: attention, "
          "then the MLP, each reads its own LayerNorm's view of the residual stream and adds "
          "its output to the stream, which is itself never normalized; matches the PyTorch "
          "reference block");
#endif
}

}  // namespace tt::gpt2
