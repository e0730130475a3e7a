// GPT-2's part of a training run (tt/gpt2_family.h).
#include "tt/gpt2_family.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "tt/backend.h"
#include "tt/cuda_matmul.h"
#include "tt/cuda_probe.h"
#include "tt/error.h"
#include "tt/parallel.h"
#include "tt/sampling.h"

namespace tt::gpt2 {

namespace {

/// Why chapter 11's bf16 set (o.recompute: "bf16_recompute") cannot train on `device`, or ""
/// when it can: it is linked in and a tiny probe step of it (and of its AdamW) runs there.
std::string why_bf16_cannot_run(const train::TrainConfig& o, Device device) {
  const std::string set = o.recompute ? "bf16_recompute" : "bf16";
  if (!has_model_ops(set)) {
    std::string sets;
    for (const std::string& name : model_ops_names()) sets += (sets.empty() ? "" : ", ") + name;
    return "chapter 11's operation set \"" + set + "\" is not linked in (linked sets: " + sets +
           ")";
  }
  try {
    const std::string todo = model_ops_not_implemented(model_ops(set), device);
    if (!todo.empty()) {
      return "chapter 11's operations are not implemented yet (" + todo.substr(0, todo.find('\n')) +
             ")";
    }
  } catch (const Error& e) {
    const std::string what = e.what();
    return "it does not run on " + device.str() +
           " (a tiny probe step failed: " + what.substr(0, what.find('\n')) + ")";
  }
  return "";
}

}  // namespace

OpsChoice choose_ops(train::TrainConfig& o, Device device) {
  std::string note;     // how the default precision was chosen
  std::string no_bf16;  // why bf16 cannot run ("" when it can or was not asked about)
  if (o.precision.empty()) {
    if (!device.is_cuda()) {
      no_bf16 = "on the CPU bf16 is emulated (ask with --precision bf16)";
    } else if (o.attention != "auto" || o.fused != "auto") {
      no_bf16 = "--attention/--fused pick a float32 set";
    } else {
      no_bf16 = why_bf16_cannot_run(o, device);
    }
    o.precision = no_bf16.empty() ? "bf16" : "fp32";
    note = no_bf16.empty() ? "; precision bf16: the default on a GPU"
                           : "; precision fp32: the default here (bf16 is not: " + no_bf16 + ")";
    TT_CHECK(!o.recompute || o.precision == "bf16",
             "--recompute needs bf16, which is not the default here: ", no_bf16);
  } else if (o.precision == "bf16") {
    no_bf16 = why_bf16_cannot_run(o, device);
    TT_CHECK(no_bf16.empty(), "--precision bf16: ", no_bf16);
  }
  if (o.precision == "bf16") {
    ModelOps bf16 = model_ops(o.recompute ? "bf16_recompute" : "bf16");
    // The set's description names its CUDA kernels (cuBLASLt, tensor cores); on the CPU the
    // same operations run as chapter 11's emulation, and the log says that instead.
    const std::string set = o.recompute ? "bf16_recompute" : "bf16";
    std::string line = "ops: " + bf16.description;
    if (!device.is_cuda()) {
      line = "ops: bf16 mixed precision, emulated on the CPU (chapter 11's operation set \"" + set +
             "\": bf16 roundings of the GEMM inputs and attention, float32 weights, stream and "
             "loss" +
             (o.recompute ? "; MLP recomputed in backward)" : ")");
    }
    line += note;
    return {std::move(bf16), line};
  }
  const bool linked = has_model_ops("fast");
  const ModelOps fast = linked ? model_ops("fast") : ModelOps{};
  const std::string todo = linked ? model_ops_not_implemented(fast, device) : "";
  const bool usable = linked && todo.empty();
  std::string why;  // why the fast set cannot be used
  if (!linked) {
    why = "chapter 10's \"fast\" operations are not linked in";
  } else if (!todo.empty()) {
    why = "chapter 10's \"fast\" operations are not implemented yet (" +
          todo.substr(0, todo.find('\n')) + ")";
  }
  // auto: the fast set on CUDA only (1.24x PyTorch's TF32 step on an H100). On the CPU it gains
  // little (the CPU mini step: 2189 vs 2252 ms on 2 threads; chapter 10 README, "Measured: the
  // GPT-2 124M step"), so there it is asked for explicitly and the CPU runs stay as documented.
  const bool auto_fast = usable && device.is_cuda();
  auto want = [&](const std::string& value, const char* flag, const char* on) {
    if (value == "auto") return auto_fast;
    TT_CHECK(value != on || usable, "", flag, " ", on, ": ", why);
    return value == on;
  };
  const bool flash = want(o.attention, "--attention", "flash");
  const bool fused = want(o.fused, "--fused", "on");
  ModelOps ops = fused ? fast : reference_model_ops();
  ops.attention = flash ? fast.attention : nullptr;
  std::string line = std::string("ops: attention ") + (flash ? "flash" : "naive") + ", fused " +
                     (fused ? "on" : "off") + " (";
  if (fused) {
    line += fast.description + (flash ? "" : "; attention: reference");
  } else {
    line += ops.description + (flash ? "; attention: FlashAttention of \"fast\"" : "");
  }
  line += ")";
  if (!usable && (o.attention == "auto" || o.fused == "auto")) line += "; " + why;
  if (usable && !auto_fast && (o.attention == "auto" || o.fused == "auto")) {
    line +=
        "; auto picks chapter 10's operations on CUDA only (on the CPU ask with "
        "--attention flash --fused on)";
  }
  return {std::move(ops), line + note};
}

std::string sample_text(const Tokenizer& tok, const std::vector<int64_t>& ids, std::size_t skip) {
  std::string text;
  std::vector<int32_t> piece;
  auto flush = [&] {
    text += tok.decode(piece);
    piece.clear();
  };
  for (std::size_t i = skip; i < ids.size(); ++i) {
    if (ids[i] == tok.eot_id()) {
      flush();
      text += " | ";
    } else {
      piece.push_back(static_cast<int32_t>(ids[i]));
    }
  }
  flush();
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      line += " / ";
    } else {
      line += c == '\t' ? ' ' : c;
    }
  }
  return line;
}

void check_cuda_graph(const train::TrainConfig& o, Device device, const ParallelStrategy& par) {
  if (!o.cuda_graph) return;  // checked before the data is read
  TT_CHECK(device.is_cuda(), "--cuda-graph needs --device cuda (a CUDA graph replays ",
           "GPU work), but the device is ", device.str());
  TT_CHECK(par.world_size() == 1 && par.name() == "single",
           "--cuda-graph runs in one process: the graphed step updates without the "
           "data-parallel strategy, got '",
           par.name(), "' over ", par.world_size(), " processes");
  TT_CHECK(has_graphed_step_runner(),
           "--cuda-graph needs chapter 10's graphed step (fast::GraphedTrainStep, "
           "tt/fast_step.h), which is not linked in");
}

Gpt2Family::Gpt2Family(train::TrainConfig& o, Device device, ParallelStrategy& par,
                       train::TrainData& data)
    : config_(o), device_(device), parallel_(par), data_(data) {
  TT_CHECK(o.n_kv_head == 0 || o.n_kv_head == o.n_head, "--n-kv-head ", o.n_kv_head,
           ": GPT-2 has multi-head attention (as many key/value heads as --heads ", o.n_head,
           "); grouped-query attention is chapter 15's LLaMA (train_llama)");
  const int64_t V = data.tokenizer.vocab_size();
  if (!o.init_llmc.empty()) {
    model_ = load_llmc(o.init_llmc);
    TT_CHECK(model_->config().vocab_size == V, o.init_llmc,
             " has V = ", model_->config().vocab_size, " but the tokenizer has ", V, " ids");
  } else {
    GPT2Config c;
    c.n_layer = o.n_layer;
    c.n_head = o.n_head;
    c.n_embd = o.n_embd;
    c.block_size = o.block_size;
    c.vocab_size = V;
    c.padded_vocab_size = (V + 63) / 64 * 64;
    model_ = std::make_unique<GPT2>(c, o.seed);
  }
  num_parameters_ = model_->num_parameters();
  par.prepare_model(*model_);  // --tp: this rank's parts of the parameters (chapter 13)
  model_->to(device);
  OpsChoice choice = choose_ops(o, device);
  ops_line_ = std::move(choice.line);
  ModelOps ops = par.model_ops(choice.ops);  // --tp: wrapped with the communication
  if (ops.description != choice.ops.description) ops_line_ += "; run as: " + ops.description;
  model_->set_ops(std::move(ops));
  if (o.profile_step > 0) {
    profiler_ = make_step_profiler(device, o.precision == "bf16");
    TT_CHECK(profiler_ != nullptr,
             "--profile-step needs chapter 10's profiler, which is not linked in");
  }
  TT_CHECK(o.T <= model_->config().block_size, "T = ", o.T, " exceeds block_size ",
           model_->config().block_size);
  optim::AdamWOptions ao;
  ao.lr = o.lr;
  ao.beta1 = o.beta1;
  ao.beta2 = o.beta2;
  // The strategy makes the ranks' parameters equal (rank 0's) and holds the optimizer state.
  optimizer_ =
      par.make_optimizer(*model_, param_groups(*model_, o.weight_decay), ao, choice.ops.adamw);
  schedule_ =
      std::make_unique<optim::WarmupCosineLR>(o.lr, o.lr * o.min_lr_frac, o.warmup, o.steps);
  step_options_.grad_accum_steps = o.accumulation(par.data_world_size());
  step_options_.max_grad_norm = o.clip;
  step_options_.parallel = &par;
  // --pp: the strategy runs the steps (the micro-batches through the stages of several ranks).
  runner_ = par.make_step_runner(*model_, *optimizer_, o.B, o.T, step_options_);
  // Under bf16 the GEMMs left in float32 (chapter 13's vocab-parallel logits and their
  // gradients: 31 of a TP2 step's 168 ms at fp32 on an H100) run as TF32.
  cuda::set_allow_tf32(o.allow_tf32());
}

train::TrainerParts Gpt2Family::parts() {
  const train::TrainConfig& o = config_;
  train::TrainerParts parts;
  parts.model = model_.get();
  parts.optimizer = optimizer_.get();
  parts.parallel = &parallel_;
  parts.schedule = schedule_.get();
  parts.next_train = [this] { return data_.train.next(); };
  parts.evaluate = [this] {
    data_.val.reset();
    const auto next = [this] { return data_.val.next(); };
    // --pp: through the stages (no rank holds the whole model).
    const std::optional<double> staged =
        runner_ ? runner_->evaluate(next, config_.eval_batches) : std::nullopt;
    return parallel_.average(staged ? *staged : evaluate(*model_, next, config_.eval_batches));
  };
  parts.step = [this](const std::function<Batch()>& next) {
    return runner_ ? runner_->step(next) : train_step(*model_, *optimizer_, next, step_options_);
  };
  // Sampling runs on rank 0 alone: not with a model split over the ranks.
  if (!parallel_.splits_model()) {
    parts.sample = [this](int64_t step) {
      Generator gen(config_.seed + static_cast<uint64_t>(step));  // seeded per step: resumable
      const Tokenizer& tok = data_.tokenizer;
      const std::vector<int64_t> ids =
          generate(*model_, {static_cast<int64_t>(tok.eot_id())}, config_.sample_tokens,
                   {config_.temperature, config_.top_k}, gen);
      return sample_text(tok, ids, 1);
    };
  }
  const double V = static_cast<double>(data_.tokenizer.vocab_size());
  parts.start_note = " (uniform guess: ln V = " + train::format_number("%.4f", std::log(V)) + ")";
  parts.title = "GPT-2 training";
  parts.profiler = profiler_.get();
  parts.flops_per_token = flops_per_token(model_->config(), num_parameters_, o.T);
  // MFU over every rank's device.
  parts.peak_flops =
      o.device_peak_tflops(device_.is_cuda()) * 1e12 * static_cast<double>(parallel_.world_size());
  return parts;
}

void Gpt2Family::print_plan() const {
  const train::TrainConfig& o = config_;
  std::printf("model: GPT-2 %s, %.2fM parameters, device %s%s, %d threads\n",
              model_->config().str().c_str(), static_cast<double>(num_parameters_) / 1e6,
              device_.str().c_str(),
              o.precision == "bf16"         ? " (bf16 mixed precision)"
              : device_.is_cuda() && o.tf32 ? " (TF32 GEMMs)"
                                            : "",
              num_threads());
  train::print_plan(o, parallel_, data_);
  std::printf("%s\n", ops_line_.c_str());
}

void Gpt2Family::prepare_step() {
  if (config_.cuda_graph) {
    runner_ = make_graphed_step_runner(*model_, *optimizer_, config_.B, config_.T, step_options_);
  }
  if (runner_) std::printf("step: %s\n", runner_->description().c_str());
}

}  // namespace tt::gpt2
