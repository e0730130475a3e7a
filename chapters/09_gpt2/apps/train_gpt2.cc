// train_gpt2: trains a GPT-2 on token shards written by tt_prepare_data.
//
//   train_gpt2 [--data DIR] [--out DIR] [--device auto|cpu|cuda] [model] [batch] [schedule]
//              [--eval-every N] [--sample-every N] [--checkpoint-every N] [--resume]
//              [--attention flash|naive] [--fused on|off] [--profile-step N] [--cuda-graph] ...
//
// Run `train_gpt2 --help` for every option. Per step it logs loss, learning rate, gradient
// norm, milliseconds, tokens/s (and MFU on a GPU); a progress bar shows the ETA. It writes
// <out>/train.csv (one row per step, plus val_loss rows), <out>/loss.png (gnuplot, when
// installed), <out>/checkpoint.ttckpt (model + optimizer, atomic) and <out>/model.bin (llm.c
// format) at the end. A NaN/Inf loss or gradient stops the run before the update, so the last
// checkpoint stays the last good one (exit status 3); save_checkpoint also refuses NaN/Inf
// weights (exit status 1 with the error). See "Non-finite policy" in tt/train.h. --resume first
// cuts train.csv back to the checkpoint's step, so the log holds each step once.
//
// The app is thin: the training library of chapter 09 does the rest. tt/train_config.h parses
// and validates every flag before anything runs and records them in checkpoints (--resume
// refuses a changed model, batch or seed, listing what differs; --override NAME accepts a
// change of the optimization such as more --steps); tt/run_dir.h locks --out (a second run
// fails at once) and owns train.csv, the checkpoint, loss.png and samples.txt; tt/trainer.h
// runs the loop. What stays here is GPT-2's: the model, its operation sets, its samples.
//
// The model's operations come from the registry of tt/gpt2_ops.h: chapter 09's "reference" and,
// since this app links the top of the chapter chain, chapter 10's "fast" (FlashAttention and the
// fused ops). By default the fast ones are used wherever they are linked in and implemented (a
// tiny probe step says so; a learner build whose chapter 10 is still TODO falls back to the
// reference); --attention and --fused choose explicitly, and the start of the log says which.
// --precision bf16 trains with chapter 11's operation set "bf16" (mixed precision: bf16 GEMMs
// and attention, float32 master weights, residual stream, statistics and loss; its AdamW writes
// the weights' bf16 copies); the checkpoint holds the float32 parameters, so a bf16 run resumes
// exactly as a float32 one. Without --precision, bf16 is chosen on a GPU where that set runs
// (and --attention/--fused are not given), fp32 elsewhere; the log's "ops:" line says why.
// --cuda-graph runs each step through chapter 10's graphed step runner (registered with
// register_graphed_step_runner, tt/train.h): the same results, one graph launch per step.
//
// Data parallel (chapter 12 linked in): `mpirun -np N train_gpt2 ... [--zero 0|1]` trains with N
// processes through the ParallelStrategy "ddp" (--zero 0) or "zero1" (--zero 1) of
// tt/train_parallel.h. Each rank reads B rows of every global batch of N*B rows (DataLoader rank
// options), so N ranks with --B B train exactly like one process with --B N*B and the same
// --total-batch. Rank 0 prints, logs, samples and writes the files; the others are silent.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tt/backend.h"
#include "tt/cuda_matmul.h"
#include "tt/cuda_probe.h"
#include "tt/dataloader.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/optim.h"
#include "tt/parallel.h"
#include "tt/run_dir.h"
#include "tt/sampling.h"
#include "tt/shard_set.h"
#include "tt/timer.h"
#include "tt/tokenizer.h"
#include "tt/train.h"
#include "tt/train_config.h"
#include "tt/train_parallel.h"
#include "tt/trainer.h"

namespace fs = std::filesystem;
using namespace tt;
using namespace tt::gpt2;
using tt::train::TrainConfig;

namespace {

/// Why chapter 11's bf16 set (o.recompute: "bf16_recompute") cannot train on `device`, or ""
/// when it can: it is linked in and a tiny probe step of it (and of its AdamW) runs there.
std::string why_bf16_cannot_run(const TrainConfig& o, Device device) {
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

/// The operations of the run, and the log line that says which: chapter 11's "bf16" (or
/// "bf16_recompute") set for --precision bf16; otherwise (--attention, --fused) over chapter 09's
/// "reference" set and chapter 10's "fast" set. Without --precision (o.precision empty), decides
/// it first: bf16 on a GPU where the set runs (its tensor-core kernels need sm_80 or later)
/// unless --attention or --fused choose among the float32 sets, else fp32 (the log line says
/// why).
std::pair<ModelOps, std::string> choose_ops(TrainConfig& o, Device device) {
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

/// "auto": CUDA when a GPU, the CUDA backend and every kernel of a training step exist there,
/// else the CPU (saying why when a GPU is present). An explicit device must be usable.
Device pick_device(const std::string& name) {
  const bool gpu = has_backend(DeviceType::kCUDA) && cuda_device_count() > 0;
  std::string missing;
  for (const std::string& op : missing_training_kernels(DeviceType::kCUDA)) missing += " " + op;
  if (name == "auto") {
    if (gpu && !missing.empty()) {
      std::printf(
          "note: a GPU is present but CUDA kernels are missing (%s ); training on the "
          "CPU\n",
          missing.c_str());
    }
    return gpu && missing.empty() ? Device::cuda(0) : Device::cpu();
  }
  const Device d = Device::parse(name);
  if (d.is_cuda()) {
    TT_CHECK(gpu, "--device ", name, " but no CUDA device/backend is available (built with CUDA: ",
             built_with_cuda() ? "yes" : "no", ", devices: ", cuda_device_count(), ")");
    TT_CHECK(missing.empty(), "--device ", name,
             ": these kernels have no CUDA implementation yet:", missing);
  }
  return d;
}

/// Text of `ids` after the prompt on one line: newlines shown as " / ", the end-of-text token
/// (between fortunes) as " | ".
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

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

/// Shards <dir>/*_<split>_*.bin in name order.
///
/// The shards of `split` in the shard set <dir>, checked against the tokenizer train_gpt2 loads
/// (tt/shard_set.h: refuses another tokenizer's shards, unlisted shards, sets without manifest).
std::vector<std::string> find_shards(const std::string& dir, const std::string& split) {
  return shard_set_paths(dir, split, dir + "/tokenizer.ttbpe");
}

int run(TrainConfig o) {
  if (o.threads > 0) set_num_threads(o.threads);
  const Device picked = pick_device(o.device);
  if (o.print_device) {
    std::printf("%s\n", picked.str().c_str());
    return 0;
  }
  // One process, or N started by mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE).
  const bool mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  const std::unique_ptr<ParallelStrategy> par = make_parallel_strategy(o.zero == 1 ? "zero1"
                                                                       : mpi       ? "ddp"
                                                                                   : "single");
  const int64_t ranks = par->world_size();
  // Every rank was started with the same options (else: an error naming the rank that was not).
  train::check_same_on_all_ranks(o, *par);
  o.validate_for(ranks);
  // Several ranks on GPUs: each uses its own, cuda:local_rank (NCCL needs one GPU per rank).
  const Device device = picked.is_cuda() && ranks > 1 ? Device::cuda(par->local_rank()) : picked;
  TT_CHECK(device.index < cuda_device_count() || !device.is_cuda(), "rank ", par->rank(),
           " is local rank ", par->local_rank(), " but this machine has ", cuda_device_count(),
           " GPU(s): start at most that many processes per machine");
  if (o.cuda_graph) {  // checked before the data is read
    TT_CHECK(device.is_cuda(), "--cuda-graph needs --device cuda (a CUDA graph replays ",
             "GPU work), but the device is ", device.str());
    TT_CHECK(ranks == 1 && par->name() == "single",
             "--cuda-graph runs in one process: the graphed step updates without the "
             "data-parallel strategy, got '",
             par->name(), "' over ", ranks, " processes");
    TT_CHECK(has_graphed_step_runner(),
             "--cuda-graph needs chapter 10's graphed step (fast::GraphedTrainStep, "
             "tt/fast_step.h), which is not linked in");
  }
  const bool logging = par->is_logging_rank();
  if (!logging) {  // rank 0 speaks for every rank; errors still reach stderr
    TT_CHECK(std::freopen("/dev/null", "w", stdout) != nullptr, "cannot silence rank ", par->rank(),
             ": ", std::strerror(errno));
  }
  // The run directory: locked by rank 0 for the whole run.
  train::RunDir dir(o.out, {.writer = logging, .resume = o.resume, .overwrite = o.overwrite});
  if (dir.removed_temp_files() > 0) {
    std::printf("removed %lld temporary file(s) (%.1f MiB) that an interrupted write left in %s\n",
                static_cast<long long>(dir.removed_temp_files()),
                static_cast<double>(dir.removed_temp_bytes()) / (1024.0 * 1024.0), o.out.c_str());
  }

  // Data and tokenizer.
  const Tokenizer tok = Tokenizer::load(o.data + "/tokenizer.ttbpe");
  const int64_t V = tok.vocab_size();
  DataLoaderOptions dl;
  dl.batch_size = o.B;
  dl.seq_len = o.T;
  dl.vocab_size = V;
  dl.shuffle = true;
  dl.seed = o.seed;
  dl.rank = par->rank();  // this rank's B rows of each global batch of N*B rows
  dl.world_size = static_cast<int>(ranks);
  DataLoader train_data(find_shards(o.data, "train"), dl);
  dl.shuffle = false;
  DataLoader val_data(find_shards(o.data, "val"), dl);

  // Model.
  std::unique_ptr<GPT2> model;
  if (!o.init_llmc.empty()) {
    model = load_llmc(o.init_llmc);
    TT_CHECK(model->config().vocab_size == V, o.init_llmc, " has V = ", model->config().vocab_size,
             " but the tokenizer has ", V, " ids");
  } else {
    GPT2Config c;
    c.n_layer = o.n_layer;
    c.n_head = o.n_head;
    c.n_embd = o.n_embd;
    c.block_size = o.block_size;
    c.vocab_size = V;
    c.padded_vocab_size = (V + 63) / 64 * 64;
    model = std::make_unique<GPT2>(c, o.seed);
  }
  model->to(device);
  const auto [ops, ops_line] = choose_ops(o, device);
  model->set_ops(ops);
  std::unique_ptr<StepProfiler> profiler;
  if (o.profile_step > 0) {
    profiler = make_step_profiler(device);
    TT_CHECK(profiler != nullptr,
             "--profile-step needs chapter 10's profiler, which is not linked in");
  }
  const GPT2Config& cfg = model->config();
  TT_CHECK(o.T <= cfg.block_size, "T = ", o.T, " exceeds block_size ", cfg.block_size);
  optim::AdamWOptions ao;
  ao.lr = o.lr;
  ao.beta1 = o.beta1;
  ao.beta2 = o.beta2;
  // The strategy makes the ranks' parameters equal (rank 0's) and holds the optimizer state.
  const std::unique_ptr<optim::Optimizer> opt =
      par->make_optimizer(*model, param_groups(*model, o.weight_decay), ao, ops.adamw);
  const optim::WarmupCosineLR schedule(o.lr, o.lr * o.min_lr_frac, o.warmup, o.steps);
  const int64_t total_batch = o.tokens_per_step(ranks);
  const int64_t accum = o.accumulation(ranks);
  TrainStepOptions so;
  so.grad_accum_steps = accum;
  so.max_grad_norm = o.clip;
  so.parallel = par.get();

  const double flops_tok = flops_per_token(cfg, model->num_parameters(), o.T);
  cuda::set_allow_tf32(o.tf32);
  // H100 SXM dense peaks: FP32 67, TF32 495, BF16 989 TFLOP/s.
  const double gpu_peak = o.precision == "bf16" ? 989.0 : o.tf32 ? 495.0 : 67.0;
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : (device.is_cuda() ? gpu_peak : 0.0);

  // --cuda-graph: the graphed step in place of train_step (made below, after a --resume load).
  std::unique_ptr<StepRunner> runner;
  train::TrainerParts parts;
  parts.model = model.get();
  parts.optimizer = opt.get();
  parts.parallel = par.get();
  parts.schedule = &schedule;
  parts.next_train = [&] { return train_data.next(); };
  parts.evaluate = [&] {
    val_data.reset();
    return par->average(evaluate(
        *model, [&] { return val_data.next(); }, o.eval_batches));
  };
  parts.step = [&](const std::function<Batch()>& next) {
    return runner ? runner->step(next) : train_step(*model, *opt, next, so);
  };
  parts.sample = [&](int64_t step) {
    Generator gen(o.seed + static_cast<uint64_t>(step));  // seeded per step: resumable
    const std::vector<int64_t> ids = generate(*model, {static_cast<int64_t>(tok.eot_id())},
                                              o.sample_tokens, {o.temperature, o.top_k}, gen);
    return sample_text(tok, ids, 1);
  };
  parts.start_note =
      " (uniform guess: ln V = " + fmt("%.4f", std::log(static_cast<double>(V))) + ")";
  parts.title = "GPT-2 training";
  parts.profiler = profiler.get();
  parts.flops_per_token = flops_tok;
  parts.peak_flops = peak * 1e12 * static_cast<double>(ranks);  // MFU over every rank's device
  train::Trainer trainer(o, dir, std::move(parts));
  const int64_t start = trainer.resume();
  if (o.resume) {
    std::printf("resumed from %s at step %lld\n", dir.checkpoint_path().c_str(),
                static_cast<long long>(start));
  }
  if (!trainer.resume_note().empty()) std::printf("%s\n", trainer.resume_note().c_str());

  std::printf("model: GPT-2 %s, %.2fM parameters, device %s%s, %d threads\n", cfg.str().c_str(),
              static_cast<double>(model->num_parameters()) / 1e6, device.str().c_str(),
              o.precision == "bf16"        ? " (bf16 mixed precision)"
              : device.is_cuda() && o.tf32 ? " (TF32 GEMMs)"
                                           : "",
              num_threads());
  std::printf("data: %s (%lld train tokens, %lld batches/epoch), tokenizer %lld ids\n",
              o.data.c_str(), static_cast<long long>(train_data.num_tokens()),
              static_cast<long long>(train_data.batches_per_epoch()), static_cast<long long>(V));
  if (ranks > 1 || par->name() != "single") {
    std::printf("parallel: %s over %lld processes (B=%lld rows per rank, %lld per global batch)\n",
                par->name().c_str(), static_cast<long long>(ranks), static_cast<long long>(o.B),
                static_cast<long long>(o.B * ranks));
  }
  std::printf(
      "batch: B=%lld T=%lld, %lld tokens/step (grad accumulation %lld), %lld steps, "
      "AdamW lr %g warmup %lld cosine to %g\n",
      static_cast<long long>(o.B), static_cast<long long>(o.T), static_cast<long long>(total_batch),
      static_cast<long long>(accum), static_cast<long long>(o.steps), o.lr,
      static_cast<long long>(o.warmup), o.lr * o.min_lr_frac);
  std::printf("%s\n", ops_line.c_str());
  if (o.cuda_graph) runner = make_graphed_step_runner(*model, *opt, o.B, o.T, so);
  if (runner) std::printf("step: %s\n", runner->description().c_str());
  std::fflush(stdout);

  const train::TrainerResult r = trainer.run();
  trainer.print_memory(device);
  par->finish();  // every rank, on the normal path (an error exits without it)
  if (!logging || r.start == o.steps) return r.status;  // nothing trained: nothing rewritten
  if (r.status == 0) save_llmc(*model, dir.file("model.bin"));
  trainer.print_summary(r, r.status == 0 ? "llm.c model: " + dir.file("model.bin") : "");
  return r.status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(TrainConfig::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gpt2: %s\n", e.what());
    return 1;
  }
}
