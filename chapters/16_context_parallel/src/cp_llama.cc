// Chapter 15's LLaMA under context parallelism (tt/context_parallel.h): the shard of every row
// at its global positions (RoPE), ring attention in every layer, the loss of the shard.
#include <string>
#include <utility>
#include <vector>

#include "tt/context_parallel.h"
#include "tt/error.h"
#include "tt/functional.h"
#include "tt/llama_ops.h"
#include "tt/mixed_precision.h"

namespace tt::cp {

namespace {

// The attention every layer of `model` has now (Llama::set_attention sets them all alike).
llama::AttentionFn current_attention(llama::Llama& model) {
  if (model.model->layers->size() == 0) return {};
  return model.model->layers->at<llama::LlamaDecoderLayer>(0).self_attn->attention;
}

// k [B, NKV, T, hs] repeated to g * NKV heads. bfloat16 repeats in float32: the backward sums
// the copies with `add`, which has no bfloat16 kernel on CUDA.
Tensor repeat_heads(const Tensor& k, int64_t g) {
  if (g == 1 || k.dtype() != DType::kBFloat16) return repeat_kv(k, g);
  return to_dtype(repeat_kv(to_dtype(k, DType::kFloat32), g), DType::kBFloat16);
}

}  // namespace

Tensor llama_context_parallel_loss(llama::Llama& model, const Tensor& idx, const Tensor& targets,
                                   dist::ProcessGroup& group, Layout layout) {
  const int n = group.world_size(), r = group.rank();
  TT_CHECK(idx.defined() && targets.defined() && idx.dim() == 2 && targets.shape() == idx.shape() &&
               idx.size(1) % num_chunks(layout, n) == 0,
           "cp::llama_context_parallel_loss (", group.where(),
           "): expected idx and targets [B, T] of one shape with T a multiple of the ",
           num_chunks(layout, n), " chunks of the ", layout_name(layout), " layout over ", n,
           " ranks, got idx ", idx.describe(), " and targets ", targets.describe());
  const int64_t B = idx.size(0), T = idx.size(1), Tl = T / n;
  const std::vector<int64_t> mine = shard_positions(layout, T, r, n);
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < B; ++b) rows.insert(rows.end(), mine.begin(), mine.end());
  const Tensor positions = from_vector(rows, {B, Tl}).to(idx.device());

  // Every layer attends through the ring for this call; the model's own attention comes back on
  // return, after an error too.
  struct Restore {
    llama::Llama& model;
    llama::AttentionFn previous;
    ~Restore() { model.set_attention(std::move(previous)); }
  } restore{model, current_attention(model)};
  dist::ProcessGroup* g = &group;
  model.set_attention([g, layout](const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t groups = q.size(1) / k.size(1);
    return ring_attention(q, repeat_heads(k, groups), repeat_heads(v, groups), *g, layout,
                          /*causal=*/true);
  });
  return model.loss_at(shard(idx, 1, layout, r, n), positions, shard(targets, 1, layout, r, n));
}

}  // namespace tt::cp
