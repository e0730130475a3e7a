// Chapter 09's GPT-2 split over a tensor-parallel group in place (tt/tp_gpt2.h): the split of
// each parameter, the agreement of the ranks, the operation set that wraps a model's operations
// with the communication of tensor and sequence parallelism, and the whole-tensor state.
#include "tt/tp_gpt2.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tt/autograd.h"
#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/linear_bf16.h"
#include "tt/mixed_precision.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"
#include "tt/ops_nn.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/sequence_parallel.h"
#include "tt/tensor_parallel.h"

namespace tt::tp {

// The TensorImpl is shared by the handles, so it is edited in place, as Module::to moves memory
// in place (chapter 05).
void replace_(const Tensor& param, const Tensor& part) {
  TensorImpl& dst = *param.impl();
  const TensorImpl& src = *part.impl();
  dst.storage = src.storage;
  dst.shape = src.shape;
  dst.strides = src.strides;
  dst.offset = src.offset;
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* split_name(Split s) {
  switch (s) {
    case Split::kReplicated:
      return "replicated";
    case Split::kRows:
      return "rows";
    case Split::kColumns:
      return "columns";
    case Split::kQkvRows:
      return "q|k|v rows";
  }
  return "?";
}

// The ranks of `group` must split the same model the same way: each shares its view and every
// rank compares all of them (one small all-gather), so a difference is an error on every rank.
void check_agreement(const gpt2::GPT2Config& c, dist::ProcessGroup& group, const TpOptions& o) {
  static const char* const kNames[] = {"tp",
                                       "n_layer",
                                       "n_head",
                                       "n_embd",
                                       "vocab_size",
                                       "padded_vocab_size",
                                       "block_size",
                                       "sequence_parallel",
                                       "early_grad_reduce",
                                       "shard_whole_sequences",
                                       "regather_in_backward"};
  const std::vector<int64_t> mine = {group.world_size(),
                                     c.n_layer,
                                     c.n_head,
                                     c.n_embd,
                                     c.vocab_size,
                                     c.padded_vocab_size,
                                     c.block_size,
                                     o.sequence_parallel ? 1 : 0,
                                     o.early_grad_reduce ? 1 : 0,
                                     o.shard_whole_sequences ? 1 : 0,
                                     o.regather_in_backward ? 1 : 0};
  const auto k = static_cast<int64_t>(mine.size());
  Tensor all = empty({group.world_size(), k}, {DType::kInt64, Device::cpu()});
  group.all_gather(all, from_vector(mine, {k}));
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  std::string diffs;
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t r = 1; r < group.world_size(); ++r) {
      if (v[r * k + j] != v[j]) {
        diffs += detail::str(diffs.empty() ? "" : "; ", kNames[j], ": ", v[j], " on rank 0, ",
                             v[r * k + j], " on rank ", r);
      }
    }
  }
  TT_CHECK(diffs.empty(), "TensorParallelGPT2 (", group.where(),
           "): the ranks of the tensor-parallel group disagree on the model or the layout (", diffs,
           "); every rank must build the same GPT2 and split it the same way");
}

}  // namespace

// ----- splits ------------------------------------------------------------------------------

Split split_of(const std::string& name) {
  if (name == "wte.weight") return Split::kRows;
  if (ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_attn.bias")) {
    return Split::kQkvRows;
  }
  if (ends_with(name, ".c_proj.weight")) return Split::kColumns;
  if (ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_fc.bias")) return Split::kRows;
  return Split::kReplicated;
}

Tensor shard_tensor(const Tensor& full, Split split, int tp, int rank, const std::string& name) {
  const Tensor t = full.detach().contiguous();
  if (split == Split::kReplicated) return t.clone();
  const int64_t dim = split == Split::kColumns ? 1 : 0;
  const int64_t parts = split == Split::kQkvRows ? 3 * tp : tp;
  TT_CHECK(t.dim() > dim && t.size(dim) % parts == 0, "shard_tensor(", name, " ", t.describe(),
           ", ", split_name(split), ", tp=", tp, "): ", parts, " does not divide dim ", dim);
  if (split != Split::kQkvRows) {
    const int64_t n = t.size(dim) / tp;
    return t.narrow(dim, n * rank, n).contiguous().clone();
  }
  // q | k | v: rank r holds the rows of its heads in each of the three: [3, n, ...] -> [3, n/tp,
  // ...] -> [3n/tp, ...].
  const int64_t n = t.size(0) / 3, part = n / tp;
  Shape three = t.shape();
  three[0] = n;
  three.insert(three.begin(), 3);
  Shape out = t.shape();
  out[0] = 3 * part;
  return t.view(three).narrow(1, part * rank, part).contiguous().view(out).clone();
}

Tensor gather_tensor(const Tensor& part, Split split, dist::ProcessGroup& group) {
  const Tensor p = part.detach().contiguous();
  if (split == Split::kReplicated) return p.clone();
  const int64_t tp = group.world_size();
  Shape buffer_shape = p.shape();
  buffer_shape.insert(buffer_shape.begin(), tp);
  Tensor all = empty(buffer_shape, {p.dtype(), p.device()});  // [tp, part...]
  group.all_gather(all, p);
  Shape out = p.shape();
  if (split == Split::kRows) {
    out[0] *= tp;
    return all.view(out);
  }
  if (split == Split::kColumns) {  // [tp, out, in/tp] -> [out, tp, in/tp]
    out[1] *= tp;
    return all.permute({1, 0, 2}).contiguous().view(out);
  }
  // q | k | v rows: [tp, 3, n/tp, ...] -> [3, tp, n/tp, ...].
  Shape split_shape = buffer_shape;
  split_shape[1] /= 3;
  split_shape.insert(split_shape.begin() + 1, 3);
  std::vector<int64_t> perm(split_shape.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[0], perm[1]);
  out[0] *= tp;
  return all.view(split_shape).permute(perm).contiguous().view(out);
}

void check_splittable(const gpt2::GPT2Config& c, int tp) {
  TT_CHECK(tp >= 1, "TensorParallelGPT2: the tensor-parallel size must be >= 1, got ", tp);
  std::string problems;
  if (c.n_head % tp != 0) {
    problems += detail::str("n_head (NH) = ", c.n_head,
                            " is not divisible by tp (attention is split by heads: every rank "
                            "needs NH/tp whole heads)");
  }
  if (c.padded_vocab_size % tp != 0) {
    problems += detail::str(
        problems.empty() ? "" : "; ", "the padded vocabulary Vp = ", c.padded_vocab_size,
        " is not divisible by tp (wte is split by rows; pad V = ", c.vocab_size,
        " to a multiple of tp, e.g. ", padded_vocab_size(c.vocab_size, 64 * tp), ")");
  }
  TT_CHECK(problems.empty(), "TensorParallelGPT2: GPT-2 ", c.str(), " cannot be split over tp=", tp,
           ": ", problems);
}

// ----- the plan and the operations ---------------------------------------------------------

namespace {

enum class LayerKind { kColumn, kRow };

struct LayerPlan {
  LayerKind kind = LayerKind::kColumn;
  Tensor bias;  // a row-parallel layer's bias, added once after the reduction
};

}  // namespace

struct TensorParallelGPT2::Plan {
  dist::ProcessGroup* group = nullptr;
  bool sequence_parallel = false;
  bool early_grad_reduce = false;
  bool shard_whole_sequences = true;
  bool regather_in_backward = true;
  // The token dim of the sequence-parallel regions in the current forward (1: T/tp tokens of
  // each sequence, 0: B/tp whole sequences), picked by the embedding from the batch's shape:
  // every forward starts there.
  mutable int64_t token_dim = 1;
  VocabShard vocab;
  std::unordered_map<const nn::Linear*, LayerPlan> layers;

  const LayerPlan& layer(const nn::Linear& l) const {
    const auto it = layers.find(&l);
    TT_CHECK(it != layers.end(), "TensorParallelGPT2: a linear layer (", l.extra_repr(),
             ") that is not one of the split model's reached its operations");
    return it->second;
  }
  // A column-parallel layer on x: f or the all-gather of the tokens, then run(in). With
  // early_grad_reduce (and no SP) f's all-reduce starts in the layer's own backward, right after
  // its dx GEMM (chapter 11's LinearHooks::dgrad), and overlaps its weight-gradient GEMM; f's
  // backward then only waits for it. With SP and regather_in_backward the layer keeps only this
  // rank's tokens of its input (LinearHooks::pack) and all-gathers them again for its weight
  // gradient (unpack).
  template <typename Run>
  Tensor column(const Tensor& x, Run run) const {
    if (sequence_parallel) {
      const Tensor in = gather_from_sequence(x, *group, token_dim);
      if (!regather_in_backward) return run(in);
      const Tensor mine = x.detach();
      ScopedLinearHooks hooks(
          {.pack = [mine](const Tensor&) { return mine.to(DType::kBFloat16).contiguous(); },
           .unpack =
               [g = group, dim = token_dim](const Tensor& packed) {
                 return sequence_all_gather(packed, *g, dim).view({-1, packed.size(-1)});
               }});
      return run(in);
    }
    if (!early_grad_reduce) return run(copy_to_tp(x, *group));
    auto early = std::make_shared<EarlyGradReduce>();
    const Tensor in = copy_to_tp_early(x, *group, early);
    ScopedLinearHooks hooks(
        {.dgrad = [early, g = group](const Tensor& dx) { early->start(dx, *g); }});
    return run(in);
  }
  // Out of a row-parallel layer: g (sum), or the reduce-scatter to this rank's tokens.
  Tensor leave(const Tensor& y) const {
    return sequence_parallel ? reduce_scatter_to_sequence(y, *group, token_dim)
                             : reduce_from_tp(y, *group);
  }
};

TensorParallelGPT2::TensorParallelGPT2(gpt2::GPT2& model, dist::ProcessGroup& group,
                                       TpOptions options)
    : model_(&model), group_(&group), options_(options) {
  const gpt2::GPT2Config& c = model.config();
  const int tp = group.world_size();
  check_splittable(c, tp);
  TT_CHECK(model.wte->weight.size(0) == c.padded_vocab_size,
           "TensorParallelGPT2: the model is already split (wte is ", model.wte->weight.describe(),
           ", not [", c.padded_vocab_size, ", ", c.n_embd, "])");
  check_agreement(c, group, options);
  vocab_ = vocab_shard(c.padded_vocab_size, c.vocab_size, tp, group.rank());
  plan_ = std::make_shared<Plan>();
  plan_->group = &group;
  plan_->sequence_parallel = options.sequence_parallel;
  plan_->early_grad_reduce = options.early_grad_reduce;
  plan_->shard_whole_sequences = options.shard_whole_sequences;
  plan_->regather_in_backward = options.regather_in_backward;
  plan_->vocab = vocab_;
  for (const auto& [name, param] : model.named_parameters()) {
    TT_CHECK(!param.grad().defined(), "TensorParallelGPT2: split the model before training (", name,
             " has a gradient)");
    const Split s = split_of(name);
    if (s != Split::kReplicated) replace_(param, shard_tensor(param, s, tp, group.rank(), name));
  }
  for (const auto& [name, module] : model.named_modules()) {
    if (auto* attn = dynamic_cast<gpt2::CausalSelfAttention*>(module)) {
      attn->n_head /= tp;  // the heads of this rank
    } else if (auto* linear = dynamic_cast<nn::Linear*>(module)) {
      if (ends_with(name, "c_proj")) {  // row-parallel: the bias goes in after the reduction
        plan_->layers[linear] = {LayerKind::kRow, linear->bias};
        linear->bias = Tensor();
        linear->in_features /= tp;
      } else {
        plan_->layers[linear] = {LayerKind::kColumn, Tensor()};
        linear->out_features /= tp;
      }
    } else if (auto* embedding = dynamic_cast<nn::Embedding*>(module); embedding && name == "wte") {
      embedding->num_embeddings = vocab_.size;
    }
  }
  model.set_ops(wrap(model.ops()));
}

gpt2::ModelOps TensorParallelGPT2::wrap(gpt2::ModelOps base) const {
  std::shared_ptr<const Plan> plan = plan_;
  gpt2::ModelOps ops = base;
  ops.linear = [plan, base_linear = base.linear](const Tensor& x, nn::Linear& layer) {
    const LayerPlan& p = plan->layer(layer);
    auto run = [&](const Tensor& in) {
      return base_linear ? base_linear(in, layer) : layer.forward(in);
    };
    if (p.kind == LayerKind::kColumn) return plan->column(x, run);
    const Tensor y = plan->leave(run(x));
    if (!p.bias.defined()) return y;
    if (y.dtype() == p.bias.dtype()) return add(y, p.bias);
    // A mixed-precision set's bfloat16 output (chapter 11 adds the bias in its GEMM epilogue,
    // which runs before the reduction here): chapter 11's add_bias_bf16, the float32 bias added
    // in float32 and rounded once, in one pass (three, with two casts, before).
    if (y.dtype() == DType::kBFloat16 && p.bias.dtype() == DType::kFloat32) {
      return add_bias_bf16(y, p.bias);
    }
    return to_dtype(add(to_dtype(y, p.bias.dtype()), p.bias), y.dtype());
  };
  ops.linear_gelu = [plan, base_linear_gelu = base.linear_gelu](const Tensor& x,
                                                                nn::Linear& layer) {
    TT_CHECK(plan->layer(layer).kind == LayerKind::kColumn,
             "TensorParallelGPT2: linear_gelu on a row-parallel layer (", layer.extra_repr(), ")");
    return plan->column(x, [&](const Tensor& in) {
      return base_linear_gelu ? base_linear_gelu(in, layer) : gelu(layer.forward(in));
    });
  };
  ops.embed = [plan](const Tensor& idx, nn::Embedding& wte, nn::Embedding& wpe) {
    dist::ProcessGroup& group = *plan->group;
    const Tensor part = vocab_parallel_lookup(wte.weight, idx, plan->vocab.start);
    int64_t begin = 0, n = idx.size(1);
    Tensor x;
    if (plan->sequence_parallel) {  // the sum, and only this rank's tokens of it
      const bool whole = plan->shard_whole_sequences && idx.size(0) % group.world_size() == 0;
      plan->token_dim = whole ? 0 : 1;
      x = reduce_scatter_to_sequence(part, group, plan->token_dim);
      if (!whole) {  // positions [begin, begin + n) of every sequence
        n = x.size(1);
        begin = n * group.rank();
      }
    } else {
      x = reduce_from_tp(part, group);
    }
    const Tensor pos = arange(static_cast<double>(begin), static_cast<double>(begin + n), 1,
                              {DType::kInt64, idx.device()});
    return add(x, wpe.forward(pos));
  };
  // A base with a classifier of its own (chapter 10's fused one, chapter 11's bf16 one) gets its
  // vocab-parallel form: the fused classifier on this rank's rows, bfloat16 GEMMs under bf16.
  // The plain base gets exercise ch13.4 on this rank's float logits.
  ops.classifier_loss = [plan, fused = static_cast<bool>(base.classifier_loss)](
                            const Tensor& x, const Tensor& wte, int64_t vocab_size,
                            const Tensor& targets) {
    dist::ProcessGroup& group = *plan->group;
    Tensor h = plan->sequence_parallel ? gather_from_sequence(x, group, plan->token_dim)
                                       : copy_to_tp(x, group);
    if (fused) {
      return vocab_parallel_classifier_loss(h, wte, targets, plan->vocab, vocab_size, group);
    }
    h = to_dtype(h, wte.dtype());
    const Tensor logits = matmul(h, transpose(wte, 0, 1));  // [B, T, Vp/tp]: this rank's columns
    return vocab_parallel_cross_entropy(view(logits, {-1, plan->vocab.size}), targets.reshape({-1}),
                                        plan->vocab, vocab_size, group);
  };
  ops.description = detail::str(base.description.empty() ? "" : base.description + "; ",
                                "tensor parallel tp=", plan->group->world_size(),
                                plan->sequence_parallel ? ", sequence parallel" : "");
  return ops;
}

void TensorParallelGPT2::set_ops(gpt2::ModelOps base) {
  model_->set_ops(wrap(std::move(base)));
}

Tensor TensorParallelGPT2::logits(const Tensor& idx) {
  autograd::NoGradGuard no_grad;
  Tensor h = model_->hidden(idx);
  if (options_.sequence_parallel) h = gather_from_sequence(h, *group_, plan_->token_dim);
  const Tensor& w = model_->wte->weight;
  h = h.to(w.dtype());
  const Tensor all = gather_last_dim(matmul(h, transpose(w, 0, 1)), *group_);  // [B, T, Vp]
  return all.slice(-1, 0, model_->config().vocab_size).contiguous();
}

void TensorParallelGPT2::finish_backward() {
  if (!options_.sequence_parallel) return;
  if (!replicated_) {  // on the parameters' device, after any move of the model
    std::vector<Tensor> params;
    for (const auto& [name, p] : model_->named_parameters()) {
      if (split_of(name) == Split::kReplicated) params.push_back(p);
    }
    // One bucket per dtype (they are all float32 here): one all-reduce a step.
    std::vector<dist::Bucket> buckets =
        dist::assign_buckets(params, std::numeric_limits<int64_t>::max());
    replicated_ = std::make_unique<dist::Reducer>(std::move(params), std::move(buckets), *group_,
                                                  dist::ReduceOp::kSum);
  }
  replicated_->finalize_backward();  // marks every gradient ready, sums, hands the sums back
}

double TensorParallelGPT2::grad_norm() const {
  // Sums of squares on the gradients' device (chapter 05's kernel): the parts of split
  // parameters summed over the group, the replicated ones (the same on every rank) once.
  std::vector<Tensor> split, replicated;
  for (const auto& [name, p] : model_->named_parameters()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    (split_of(name) == Split::kReplicated ? replicated : split).push_back(g.contiguous());
  }
  auto sum_of_squares = [](const std::vector<Tensor>& ts) {
    return ts.empty()
               ? 0.0
               : call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", ts[0].device(), ts);
  };
  Tensor total = from_vector(std::vector<double>{sum_of_squares(split)}, {1});
  group_->all_reduce(total);
  return std::sqrt(total.item() + sum_of_squares(replicated));
}

Tensor TensorParallelGPT2::gather(const std::string& name, const Tensor& part) const {
  return gather_tensor(part, split_of(name), *group_);
}

Tensor TensorParallelGPT2::shard(const std::string& name, const Tensor& full) const {
  return shard_tensor(full, split_of(name), group_->world_size(), group_->rank(), name);
}

nn::StateDict TensorParallelGPT2::full_state_dict() const {
  nn::StateDict out;
  for (const auto& [name, p] : model_->named_parameters()) out.emplace_back(name, gather(name, p));
  for (const auto& [name, b] : model_->named_buffers()) out.emplace_back(name, b.detach().clone());
  return out;
}

void TensorParallelGPT2::load_full_state_dict(const nn::StateDict& full,
                                              const std::string& source) {
  nn::StateDict parts;
  for (const auto& [name, t] : full) parts.emplace_back(name, shard(name, t));
  nn::apply_state_dict(model_->state_dict(), parts, source);
}

namespace {

// The parameter name of each tensor `optimizer` updates, in its flat order ("state.<i>.").
std::vector<std::string> optimizer_parameter_names(const gpt2::GPT2& model,
                                                   const optim::Optimizer& optimizer) {
  std::unordered_map<const TensorImpl*, std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names[p.impl().get()] = name;
  std::vector<std::string> out;
  for (const optim::ParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params) {
      const auto it = names.find(p.impl().get());
      TT_CHECK(it != names.end(), "TensorParallelGPT2: the ", optimizer.name(), " updates ",
               p.describe(), ", which is not a parameter of the split model");
      out.push_back(it->second);
    }
  }
  return out;
}

// The parameter index i of a key "state.<i>.<what>", or -1 for other keys ("step", "lr").
int64_t state_index(const std::string& key) {
  if (key.rfind("state.", 0) != 0) return -1;
  const std::size_t dot = key.find('.', 6);
  return std::stoll(key.substr(6, dot == std::string::npos ? std::string::npos : dot - 6));
}

}  // namespace

nn::StateDict TensorParallelGPT2::full_optimizer_state(const optim::Optimizer& optimizer) const {
  const std::vector<std::string> names = optimizer_parameter_names(*model_, optimizer);
  nn::StateDict out;
  for (const auto& [key, t] : optimizer.state_dict()) {
    const int64_t i = state_index(key);
    out.emplace_back(key, i < 0 ? t.detach().clone() : gather(names.at(i), t));
  }
  return out;
}

void TensorParallelGPT2::load_full_optimizer_state(optim::Optimizer& optimizer,
                                                   const nn::StateDict& full,
                                                   const std::string& source) const {
  const std::vector<std::string> names = optimizer_parameter_names(*model_, optimizer);
  nn::StateDict parts;
  for (const auto& [key, t] : full) {
    const int64_t i = state_index(key);
    TT_CHECK(i < static_cast<int64_t>(names.size()), "TensorParallelGPT2: ", source, " has ", key,
             " but the optimizer updates ", names.size(), " tensors");
    parts.emplace_back(key, i < 0 ? t : shard(names[i], t));
  }
  optimizer.load_state_dict(parts, source);
}

std::string TensorParallelGPT2::describe() const {
  const gpt2::GPT2Config& c = model_->config();
  const int tp = group_->world_size();
  return detail::str("tp=", tp, " (rank ", group_->rank(), ")",
                     options_.sequence_parallel ? ", sequence parallel" : "", ", ", c.n_head / tp,
                     " heads of ", c.n_head, " and vocabulary rows ", vocab_.start, "..",
                     vocab_.start + vocab_.size - 1, " (", vocab_.valid, " tokens) here");
}

}  // namespace tt::tp
