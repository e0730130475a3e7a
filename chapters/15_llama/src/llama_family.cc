// LLaMA's part of a training run (tt/llama_family.h).
#include "tt/llama_family.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/generate.h"
#include "tt/master_weights.h"
#include "tt/parallel.h"
#include "tt/train.h"

namespace tt::llama {

namespace {

std::map<std::string, StrategyLlamaLoss>& strategy_losses() {
  static std::map<std::string, StrategyLlamaLoss> losses;
  return losses;
}

}  // namespace

bool register_llama_strategy_loss(const std::string& name, StrategyLlamaLoss loss) {
  TT_CHECK(loss != nullptr, "register_llama_strategy_loss: an empty loss for '", name, "'");
  TT_CHECK(strategy_losses().emplace(name, std::move(loss)).second,
           "register_llama_strategy_loss: the strategy '", name, "' has a LLaMA loss already");
  return true;
}

LlamaFamily::LlamaFamily(train::TrainConfig& o, Device device, gpt2::ParallelStrategy& par,
                         train::TrainData& data)
    : config_(o), device_(device), parallel_(par), data_(data) {
  auto refuse = [](bool given, const char* flag) {
    TT_CHECK(!given, "train_llama: ", flag,
             " is not supported for LLaMA yet (chapter 15 trains eagerly, in float32 or with "
             "--precision bf16)");
  };
  refuse(o.recompute, "--recompute");
  refuse(o.cuda_graph, "--cuda-graph");
  refuse(!o.init_llmc.empty(), "--init-llmc");
  refuse(o.attention != "auto", "--attention");
  refuse(o.fused != "auto", "--fused");
  refuse(o.profile_step > 0, "--profile-step");
  if (o.precision.empty()) o.precision = o.tf32 ? "tf32" : "fp32";
  LlamaConfig c;
  c.vocab_size = data.tokenizer.vocab_size();
  c.dim = o.n_embd;
  c.n_layers = o.n_layer;
  c.n_heads = o.n_head;
  c.n_kv_heads = o.n_kv_head > 0 ? o.n_kv_head : o.n_head;
  c.ffn_dim = std::max<int64_t>(32, (8 * o.n_embd / 3 + 16) / 32 * 32);
  c.max_seq_len = o.block_size;
  c.norm_eps = 1e-5;
  model_ = std::make_unique<Llama>(c, o.seed);
  // The loss of this rank: the model's own where every rank holds a whole model and whole
  // sequences (one process, DDP, ZeRO-1: splits_model() is false), else the strategy's
  // (chapter 16's "cp": the rank's shard of every sequence, ring attention).
  if (!par.splits_model()) {
    loss_ = [](Llama& m, const Tensor& idx, const Tensor& targets) { return m.loss(idx, targets); };
  } else {
    const std::string strategy = par.name();
    const auto found = strategy_losses().find(strategy);
    TT_CHECK(found != strategy_losses().end(), "train_llama: the parallel strategy '", strategy,
             "' does not train a LLaMA yet: LLaMA trains in one process, with DDP or ZeRO-1 "
             "(--zero 1) under mpirun, or with --cp N (chapter 16); --tp, --pp and "
             "--sequence-parallel are GPT-2's");
    loss_ = found->second(par);
  }
  par.prepare_model(*model_);  // before the model moves to its device, as Gpt2Family
  model_->to(device);
  // --precision bf16 (asked for, never the default): chapter 11's mixed precision, float32
  // masters updated by a MasterWeightAdamW that writes the bfloat16 copies the GEMMs read.
  const bool bf16 = o.precision == "bf16";
  model_->set_mixed_precision(bf16);
  TT_CHECK(o.T <= c.max_seq_len, "train_llama: T = ", o.T, " exceeds --block-size ", c.max_seq_len);
  optim::AdamWOptions ao;
  ao.lr = o.lr;
  ao.beta1 = o.beta1;
  ao.beta2 = o.beta2;
  // Two AdamW groups: matrices and embeddings with weight decay, the norms' weights without.
  optimizer_ = par.make_optimizer(
      *model_, gpt2::param_groups(*model_, o.weight_decay), ao,
      bf16 ? gpt2::AdamWFactory(make_master_weight_adamw) : gpt2::AdamWFactory());
  schedule_ =
      std::make_unique<optim::WarmupCosineLR>(o.lr, o.lr * o.min_lr_frac, o.warmup, o.steps);
  step_options_.grad_accum_steps = o.accumulation(par.data_world_size());
  step_options_.max_grad_norm = o.clip;
  step_options_.parallel = &par;
  cuda::set_allow_tf32(o.allow_tf32());
}

train::TrainerParts LlamaFamily::parts() {
  train::TrainerParts parts;
  parts.model = model_.get();  // what checkpoints hold, with the optimizer
  parts.optimizer = optimizer_.get();
  parts.schedule = schedule_.get();
  parts.parallel = &parallel_;  // DDP / ZeRO-1 under mpirun, else one process
  parts.next_train = [this] { return data_.train.next(); };
  auto loss_of = [this](const Batch& b) {
    return loss_(*model_, b.inputs.to(device_), b.targets.to(device_));
  };
  parts.step = [this, loss_of](const std::function<Batch()>& next) {
    return gpt2::train_step(*optimizer_, loss_of, next, step_options_);
  };
  parts.evaluate = [this, loss_of] {
    data_.val.reset();
    autograd::NoGradGuard no_grad;
    double total = 0;
    for (int64_t i = 0; i < config_.eval_batches; ++i) total += loss_of(data_.val.next()).item();
    return parallel_.average(total /
                             static_cast<double>(std::max<int64_t>(1, config_.eval_batches)));
  };
  parts.sample = [this](int64_t step) {
    Generator gen(config_.seed + static_cast<uint64_t>(step));  // seeded per step: resumable
    const Tokenizer& tok = data_.tokenizer;
    GenerateOptions g;
    g.max_new_tokens = std::min<int64_t>(config_.sample_tokens, model_->config().max_seq_len - 1);
    g.sampling = {config_.temperature, config_.top_k, 1.0};
    const GenerateResult r = generate(*model_, {{static_cast<int64_t>(tok.eot_id())}}, g, gen);
    return gpt2::sample_text(tok, r.tokens[0], 0);
  };
  const double V = static_cast<double>(data_.tokenizer.vocab_size());
  parts.start_note = " (uniform guess: ln V = " + train::format_number("%.4f", std::log(V)) + ")";
  parts.title = "LLaMA training";
  const LlamaConfig& c = model_->config();
  // 6 N per token for the matrices, plus attention's 6 L T C (scores and values, forward and
  // backward, causal half of 12 L T C).
  parts.flops_per_token = 6.0 * static_cast<double>(model_->num_parameters()) +
                          6.0 * static_cast<double>(c.n_layers * config_.T * c.dim);
  parts.peak_flops = config_.device_peak_tflops(device_.is_cuda()) * 1e12 *
                     static_cast<double>(parallel_.world_size());
  return parts;
}

void LlamaFamily::print_plan() const {
  const bool bf16 = model_->mixed_precision();
  std::printf("model: LLaMA %s, %.2fM parameters, device %s%s, %d threads\n",
              model_->config().str().c_str(), static_cast<double>(model_->num_parameters()) / 1e6,
              device_.str().c_str(), bf16 ? " (bf16 mixed precision)" : "", num_threads());
  train::print_plan(config_, parallel_, data_);
  // Under --cp the strategy's loss (chapter 16) runs every layer's attention as a ring.
  const std::string cp =
      config_.cp > 1 ? ", context parallel (cp=" + std::to_string(config_.cp) + ", zigzag)" : "";
  if (bf16) {
    std::printf(
        "ops: bf16 mixed precision%s (chapter 11's: bf16 linear layers (weights: the bf16 copies "
        "AdamW writes), GQA attention on bf16 q/k/v, classifier on bf16 (float32 loss); "
        "RMSNorm, RoPE, SwiGLU and the residual stream in float32)%s\n",
        device_.is_cuda() ? "" : ", emulated on the CPU", cp.c_str());
  } else {
    std::printf("ops: float32 (RMSNorm, RoPE, SwiGLU, GQA of chapter 15)%s\n", cp.c_str());
  }
}

}  // namespace tt::llama
