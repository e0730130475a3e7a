// GPT-2 under context parallelism (tt/context_parallel.h): the operations that see the
// sequence (embedding, attention, loss) wrapped to work on this rank's shard.
#include <memory>
#include <string>
#include <vector>

#include "tt/context_parallel.h"
#include "tt/error.h"
#include "tt/functional.h"
#include "tt/generator.h"
#include "tt/layers.h"
#include "tt/mixed_precision.h"

namespace tt::cp {

gpt2::ModelOps context_parallel_ops(gpt2::ModelOps inner, dist::ProcessGroup& group,
                                    Layout layout) {
  TT_CHECK(inner.description.find("sequence parallel") == std::string::npos,
           "context_parallel_ops (", group.where(), "): the operation set (", inner.description,
           ") is sequence parallel; context parallelism composes with tensor parallelism without "
           "it");
  dist::ProcessGroup* g = &group;
  gpt2::ModelOps ops = inner;
  ops.embed = [g, layout, inner_embed = inner.embed](const Tensor& idx, nn::Embedding& wte,
                                                     nn::Embedding& wpe) {
    const int n = g->world_size(), r = g->rank();
    const int64_t T = idx.size(1), Tl = T / n;
    const Tensor pos = from_vector(shard_positions(layout, T, r, n), {Tl}).to(idx.device());
    const Tensor tokens = shard(idx, 1, layout, r, n);
    if (!inner_embed) return add(wte.forward(tokens), wpe.forward(pos));
    // The inner hook (chapter 13's vocab-parallel lookup) adds the rows 0..Tl-1 of the position
    // table it is given: give it the rows of this shard's global positions (gathered from wpe,
    // so their gradient flows back to it).
    Generator unused(0);  // the table's own initial weights are replaced at once
    nn::Embedding rows(Tl, wpe.dim, unused, {wpe.weight.dtype(), wpe.weight.device()});
    rows.weight = embedding(wpe.weight, pos);
    return inner_embed(tokens, wte, rows);
  };
  ops.attention = [g, layout](const Tensor& qkv, int64_t n_head) {
    TT_CHECK(qkv.defined() && qkv.dim() == 3 && qkv.size(2) % (3 * n_head) == 0,
             "context parallel attention: qkv must be [B, Tl, 3C] with C divisible by n_head = ",
             n_head, ", got ", qkv.defined() ? qkv.describe() : std::string("(undefined)"));
    const int64_t B = qkv.size(0), Tl = qkv.size(1), C = qkv.size(2) / 3, hs = C / n_head;
    // bfloat16 (chapter 11's operation set): the slicing and the permutes run in float32, whose
    // backward sums the three slices' gradients with `add` (no bfloat16 kernel); the ring gets
    // bfloat16 heads (on CUDA its blocks are chapter 11's bf16 FlashAttention) and the caller
    // gets y in bfloat16 again.
    const bool bf16 = qkv.dtype() == DType::kBFloat16;
    const Tensor x = bf16 ? to_dtype(qkv, DType::kFloat32) : qkv;
    // [B, Tl, C] of q, k or v -> [B, NH, Tl, hs] (differentiable views, one copy each).
    auto heads = [&](int64_t part) {
      const Tensor h = contiguous(permute(
          reshape(slice(x, 2, part * C, (part + 1) * C), {B, Tl, n_head, hs}), {0, 2, 1, 3}));
      return bf16 ? to_dtype(h, DType::kBFloat16) : h;
    };
    Tensor y = ring_attention(heads(0), heads(1), heads(2), *g, layout, /*causal=*/true);
    if (bf16) y = to_dtype(y, DType::kFloat32);
    y = reshape(contiguous(permute(y, {0, 2, 1, 3})), {B, Tl, C});
    return bf16 ? to_dtype(y, DType::kBFloat16) : y;
  };
  ops.classifier_loss = [g, layout, inner_loss = inner.classifier_loss](
                            const Tensor& h, const Tensor& wte, int64_t vocab_size,
                            const Tensor& targets) {
    TT_CHECK(targets.defined() && targets.dim() == 2 && h.dim() == 3 &&
                 targets.size(1) == h.size(1) * g->world_size(),
             "context parallel loss (", g->where(), "): hidden states ", h.describe(),
             " must be this rank's 1/", g->world_size(), " of the targets ",
             targets.defined() ? targets.describe() : std::string("(undefined)"));
    const Tensor mine = shard(targets, 1, layout, g->rank(), g->world_size());
    if (inner_loss) return inner_loss(h, wte, vocab_size, mine);
    // The tied head's logits of the shard's positions (rows >= V of a padded wte never
    // predicted), then the mean over the shard's tokens.
    const Tensor head = wte.size(0) == vocab_size ? wte : slice(wte, 0, 0, vocab_size);
    return cross_entropy(view(matmul(h, transpose(head, 0, 1)), {-1, vocab_size}),
                         mine.reshape({-1}));
  };
  ops.description =
      detail::str("context parallel (cp=", group.world_size(), ", ", layout_name(layout), ")",
                  inner.description.empty() ? "" : " + " + inner.description);
  return ops;
}

}  // namespace tt::cp
