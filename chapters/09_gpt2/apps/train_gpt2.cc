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
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tt/autograd.h"
#include "tt/backend.h"
#include "tt/checkpoint.h"
#include "tt/cli.h"
#include "tt/csv.h"
#include "tt/cuda_matmul.h"
#include "tt/cuda_probe.h"
#include "tt/dataloader.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/optim.h"
#include "tt/parallel.h"
#include "tt/progress.h"
#include "tt/sampling.h"
#include "tt/shard_set.h"
#include "tt/timer.h"
#include "tt/tokenizer.h"
#include "tt/train.h"
#include "tt/train_parallel.h"

namespace fs = std::filesystem;
using namespace tt;
using namespace tt::gpt2;

namespace {

struct Options {
  std::string data = "data/fortunes";
  std::string out = "runs/gpt2";
  std::string device = "auto";
  std::string init_llmc;  // start from an llm.c model file instead of a random init
  int64_t n_layer = 4, n_head = 4, n_embd = 128, block_size = 0;  // block_size 0: = T
  int64_t B = 16, T = 64, total_batch = 0;  // total_batch tokens per step (0: B*T*ranks)
  int64_t steps = 300, warmup = 20;
  double lr = 1e-3, min_lr_frac = 0.1, weight_decay = 0.1, clip = 1.0;
  double beta1 = 0.9, beta2 = 0.95;
  int64_t eval_every = 50, eval_batches = 8;
  int64_t sample_every = 0, sample_tokens = 48;  // 0: only at the start, middle and end
  double temperature = 0.8;
  int64_t top_k = 40;
  int64_t checkpoint_every = 0;  // 0: only at the end
  int64_t log_every = 1;
  bool resume = false;
  bool print_device = false;  // print the device --device resolves to, and exit
  uint64_t seed = 1337;
  int threads = 0;
  double peak_tflops = 0;          // MFU reference; 0: a default for GPUs, none on the CPU
  bool tf32 = false;               // float32 cuBLAS GEMMs may use TF32 tensor cores
  std::string precision;           // fp32 | tf32 | bf16 ("": fp32, or tf32 with --tf32)
  bool recompute = false;          // bf16: recompute each block's MLP in backward (chapter 11)
  double max_seconds = 0;          // stop early after this many seconds (0: no limit)
  int64_t kill_after_step = 0;     // testing: SIGKILL itself after logging this step (0: never)
  std::string attention = "auto";  // flash | naive | auto
  std::string fused = "auto";      // on | off | auto
  int64_t profile_step = 0;        // print the per-op profile of this step (0: none)
  int64_t zero = 0;                // under mpirun: 0 DDP, 1 ZeRO-1 (sharded AdamW state)
  bool cuda_graph = false;         // steps replayed as a CUDA graph (chapter 10)
};

const char* const kUsage =
    "usage: train_gpt2 [options]\n"
    "data and output:\n"
    "  --data DIR            shards and tokenizer from tt_prepare_data (data/fortunes)\n"
    "  --out DIR             run directory: train.csv, loss.png, checkpoint, model.bin\n"
    "  --device D            auto | cpu | cuda (auto: cuda when a GPU and the CUDA\n"
    "                        backend and every kernel of a training step exist)\n"
    "  --print-device        print the device --device resolves to (cpu, cuda:0) and exit\n"
    "  --threads N           CPU threads (default: OMP_NUM_THREADS or all cores)\n"
    "model:\n"
    "  --layers L --heads NH --channels C   (4, 4, 128)\n"
    "  --block-size N        longest context (default: T)\n"
    "  --init-llmc FILE      start from an llm.c model file (e.g. gpt2_124M.bin)\n"
    "batch and schedule:\n"
    "  --B N --T N           micro-batch rows and sequence length (16, 64)\n"
    "  --total-batch N       tokens per optimizer step, a multiple of B*T; the rest\n"
    "                        is gradient accumulation (default B*T, N*B*T on N ranks)\n"
    "  --steps N             optimizer steps (300)\n"
    "  --lr X --min-lr-frac F --warmup N   AdamW peak lr, cosine floor as a fraction\n"
    "                        of it, warmup steps (1e-3, 0.1, 20)\n"
    "  --weight-decay X --clip X --beta1 X --beta2 X   (0.1, 1.0, 0.9, 0.95)\n"
    "  --seed N              model init, data order and sampling (1337)\n"
    "  --max-seconds N       stop (and save) after N seconds of training\n"
    "evaluation, sampling, checkpoints:\n"
    "  --eval-every N --eval-batches N      validation loss (50, 8)\n"
    "  --sample-every N      also sample every N steps (default: start, middle, end)\n"
    "  --sample-tokens N --temperature X --top-k K   (48, 0.8, 40)\n"
    "  --checkpoint-every N  save <out>/checkpoint.ttckpt every N steps (and at the end)\n"
    "  --resume              continue from <out>/checkpoint.ttckpt (exactly: same\n"
    "                        batches, same results as an uninterrupted run)\n"
    "  --log-every N         print a log line every N steps (1)\n"
    "  --kill-after-step N   testing: kill -9 itself right after logging step N (a crash\n"
    "                        to try --resume on; train.csv is cut back to the checkpoint)\n"
    "  --precision P         fp32 | tf32 | bf16 (default: bf16 on a GPU where chapter 11's\n"
    "                        bf16 operations run, fp32 elsewhere). tf32: float32 GEMMs on the\n"
    "                        GPU use TF32 tensor cores (inputs rounded to 10-bit mantissas;\n"
    "                        off by default, as in PyTorch). bf16: chapter 11's mixed\n"
    "                        precision (operation set \"bf16\": bf16 GEMMs and attention,\n"
    "                        float32 weights, residual stream, statistics and loss)\n"
    "  --tf32                the same as --precision tf32\n"
    "  --recompute           with --precision bf16: recompute each block's MLP in backward\n"
    "                        instead of keeping GELU's input and output (less memory, one\n"
    "                        more MLP forward per step; operation set \"bf16_recompute\")\n"
    "fast path (chapter 10, when linked in):\n"
    "  --attention A         flash | naive | auto: FlashAttention on the packed qkv, or\n"
    "                        chapter 09's composition (auto: flash on CUDA when available)\n"
    "  --fused F             on | off | auto: the rest of chapter 10's \"fast\" operations\n"
    "                        (fused classifier, epilogues, residual+LayerNorm) or the\n"
    "                        reference ones (auto: on on CUDA when available)\n"
    "  --profile-step N      print the per-op profile (chapter 10's profiler) of step N\n"
    "  --cuda-graph          run each step as a CUDA graph (chapter 10's GraphedTrainStep:\n"
    "                        2 eager steps, then one capture, replayed with one launch per\n"
    "                        step; the same results bit for bit). Needs --device cuda and\n"
    "                        one process; not with --profile-step (a replay dispatches no op)\n"
    "  --peak-tflops X       peak TFLOP/s for MFU (default on a GPU, H100 dense: fp32 67,\n"
    "                        tf32 495, bf16 989)\n"
    "data parallel (mpirun -np N train_gpt2 ..., needs chapter 12):\n"
    "  --zero 0|1            0: DDP (gradients averaged once per step); 1: ZeRO-1 (AdamW\n"
    "                        state sharded over the ranks; also valid in one process). Both\n"
    "                        on the CPU, or one GPU per rank, cuda:local_rank, through NCCL.\n"
    "                        --B is per rank: N ranks train like one process with --B N*B;\n"
    "                        --total-batch must be a multiple of N*B*T\n"
    "exit status: 0 done, 1 error (message on stderr), 3 stopped at a NaN/Inf loss or\n"
    "gradient norm (nothing written after the last good checkpoint)\n";

Options parse(int argc, char** argv) {
  Options o;
  ArgParser args("train_gpt2", kUsage);
  args.option("--data", &o.data).option("--out", &o.out).option("--device", &o.device);
  args.option("--threads", &o.threads).option("--init-llmc", &o.init_llmc);
  args.option("--layers", &o.n_layer).option("--heads", &o.n_head).option("--channels", &o.n_embd);
  args.option("--block-size", &o.block_size).option("--B", &o.B).option("--T", &o.T);
  args.option("--total-batch", &o.total_batch).option("--steps", &o.steps);
  args.option("--lr", &o.lr).option("--min-lr-frac", &o.min_lr_frac);
  args.option("--warmup", &o.warmup).option("--weight-decay", &o.weight_decay);
  args.option("--clip", &o.clip).option("--beta1", &o.beta1).option("--beta2", &o.beta2);
  args.option("--seed", &o.seed).option("--max-seconds", &o.max_seconds);
  args.option("--eval-every", &o.eval_every).option("--eval-batches", &o.eval_batches);
  args.option("--sample-every", &o.sample_every).option("--sample-tokens", &o.sample_tokens);
  args.option("--temperature", &o.temperature).option("--top-k", &o.top_k);
  args.option("--checkpoint-every", &o.checkpoint_every).flag("--resume", &o.resume);
  args.flag("--print-device", &o.print_device);
  args.option("--log-every", &o.log_every).option("--peak-tflops", &o.peak_tflops);
  args.flag("--tf32", &o.tf32).option("--kill-after-step", &o.kill_after_step);
  args.option("--precision", &o.precision).flag("--recompute", &o.recompute);
  args.option("--attention", &o.attention).option("--fused", &o.fused);
  args.option("--profile-step", &o.profile_step);
  args.option("--zero", &o.zero).flag("--cuda-graph", &o.cuda_graph);
  args.parse(argc, argv);
  if (o.block_size == 0) o.block_size = o.T;
  TT_CHECK(o.B > 0 && o.T > 0 && o.steps > 0, "train_gpt2: --B, --T and --steps must be > 0");
  TT_CHECK(o.total_batch >= 0 && o.total_batch % (o.B * o.T) == 0, "train_gpt2: --total-batch ",
           o.total_batch, " is not a multiple of B*T = ", o.B * o.T);
  TT_CHECK(o.warmup >= 0 && o.warmup < o.steps, "train_gpt2: --warmup must be in [0, steps)");
  TT_CHECK(o.attention == "flash" || o.attention == "naive" || o.attention == "auto",
           "train_gpt2: --attention must be flash, naive or auto, got '", o.attention, "'");
  TT_CHECK(o.fused == "on" || o.fused == "off" || o.fused == "auto",
           "train_gpt2: --fused must be on, off or auto, got '", o.fused, "'");
  TT_CHECK(o.precision.empty() || o.precision == "fp32" || o.precision == "tf32" ||
               o.precision == "bf16",
           "train_gpt2: --precision must be fp32, tf32 or bf16, got '", o.precision, "'");
  TT_CHECK(!o.tf32 || o.precision.empty() || o.precision == "tf32",
           "train_gpt2: --tf32 means --precision tf32; it contradicts --precision ", o.precision);
  if (o.tf32) o.precision = "tf32";  // "" (no --precision): decided with the device, choose_ops
  o.tf32 = o.precision == "tf32";
  TT_CHECK(!o.recompute || o.precision.empty() || o.precision == "bf16",
           "train_gpt2: --recompute needs --precision bf16 (chapter 11's \"bf16_recompute\")");
  TT_CHECK(o.precision != "bf16" || (o.attention == "auto" && o.fused == "auto"),
           "train_gpt2: --precision bf16 uses chapter 11's operation set \"bf16\" as a whole; "
           "--attention and --fused choose among the float32 sets (fp32, tf32)");
  TT_CHECK(o.profile_step >= 0, "train_gpt2: --profile-step must be >= 0");
  TT_CHECK(o.zero == 0 || o.zero == 1, "train_gpt2: --zero must be 0 or 1, got ", o.zero);
  TT_CHECK(!o.cuda_graph || o.profile_step == 0,
           "train_gpt2: --cuda-graph and --profile-step exclude each other (a replayed graph "
           "dispatches no operation for the profiler to see)");
  return o;
}

/// Why chapter 11's bf16 set (o.recompute: "bf16_recompute") cannot train on `device`, or ""
/// when it can: it is linked in and a tiny probe step of it (and of its AdamW) runs there.
std::string why_bf16_cannot_run(const Options& o, Device device) {
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
std::pair<ModelOps, std::string> choose_ops(Options& o, Device device) {
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
             "train_gpt2: --recompute needs bf16, which is not the default here: ", no_bf16);
  } else if (o.precision == "bf16") {
    no_bf16 = why_bf16_cannot_run(o, device);
    TT_CHECK(no_bf16.empty(), "train_gpt2: --precision bf16: ", no_bf16);
  }
  if (o.precision == "bf16") {
    ModelOps bf16 = model_ops(o.recompute ? "bf16_recompute" : "bf16");
    std::string line = "ops: " + bf16.description + note;  // "bf16 mixed precision: ..."
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
    TT_CHECK(value != on || usable, "train_gpt2: ", flag, " ", on, ": ", why);
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

/// The shards of `split` in the shard set <dir>, checked against the tokenizer train_gpt2 loads
/// (tt/shard_set.h: refuses another tokenizer's shards, unlisted shards, sets without manifest).
std::vector<std::string> find_shards(const std::string& dir, const std::string& split) {
  return shard_set_paths(dir, split, dir + "/tokenizer.ttbpe");
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
    TT_CHECK(gpu, "train_gpt2: --device ", name,
             " but no CUDA device/backend is available (built with CUDA: ",
             built_with_cuda() ? "yes" : "no", ", devices: ", cuda_device_count(), ")");
    TT_CHECK(missing.empty(), "train_gpt2: --device ", name,
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

/// Writes <out>/loss.png from the CSV with gnuplot (pngcairo); returns false when gnuplot is
/// missing or fails.
bool plot_loss(const std::string& csv, const std::string& png) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  const std::string script = png + ".gnuplot";
  std::ofstream(script)
      << "set terminal pngcairo size 900,540\n"
      << "set output '" << png << "'\n"
      << "set datafile separator ','\n"
      << "set key autotitle columnhead\n"
      << "set title 'GPT-2 training'\nset xlabel 'step'\nset ylabel 'loss (nats/token)'\n"
      << "set grid\n"
      << "plot '" << csv << "' using 1:2 with lines lw 1.5 title 'train', "
      << "'' using 1:(column(7) > 0 ? column(7) : 1/0) with linespoints lw 2 pt 7 "
      << "title 'val'\n";
  const bool ok = std::system(("gnuplot '" + script + "' 2>/dev/null").c_str()) == 0;
  fs::remove(script);
  return ok;
}

/// For --resume: cuts the run log back to the checkpoint's `step`, keeping the header and the
/// rows of steps <= `step` (train and val rows alike) and dropping what a killed run logged after
/// its last checkpoint (and a last line cut off mid-write), so the resumed run appends each step
/// once. The log is replaced atomically (ckpt::write_file_atomic, as checkpoints are).
void truncate_log(const std::string& csv_path, int64_t step) {
  if (!fs::exists(csv_path)) return;
  std::ifstream in(csv_path, std::ios::binary);
  TT_CHECK(in, "train_gpt2: cannot read the run log '", csv_path, "'");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::string kept;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string_view line(text.data() + begin, end - begin);
    int64_t row_step = -1;
    const bool numbered =
        std::from_chars(line.data(), line.data() + line.size(), row_step).ec == std::errc();
    if (begin == 0 || (numbered && row_step <= step)) kept.append(line).push_back('\n');
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(kept.data());
  ckpt::write_file_atomic(csv_path, std::vector<std::byte>(bytes, bytes + kept.size()));
}

/// Peak resident set size of this process in bytes (VmHWM of /proc/self/status; 0 where that
/// file is missing).
int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6)) * 1024;  // "... kB"
  }
  return 0;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

int run(Options o) {
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
  // Several ranks on GPUs: each uses its own, cuda:local_rank (NCCL needs one GPU per rank).
  const Device device = picked.is_cuda() && ranks > 1 ? Device::cuda(par->local_rank()) : picked;
  TT_CHECK(device.index < cuda_device_count() || !device.is_cuda(), "train_gpt2: rank ",
           par->rank(), " is local rank ", par->local_rank(), " but this machine has ",
           cuda_device_count(), " GPU(s): start at most that many processes per machine");
  if (o.cuda_graph) {  // checked before the data is read
    TT_CHECK(device.is_cuda(),
             "train_gpt2: --cuda-graph needs --device cuda (a CUDA graph replays ",
             "GPU work), but the device is ", device.str());
    TT_CHECK(ranks == 1 && par->name() == "single",
             "train_gpt2: --cuda-graph runs in one process: the graphed step updates without the "
             "data-parallel strategy, got '",
             par->name(), "' over ", ranks, " processes");
    TT_CHECK(has_graphed_step_runner(),
             "train_gpt2: --cuda-graph needs chapter 10's graphed step (fast::GraphedTrainStep, "
             "tt/fast_step.h), which is not linked in");
  }
  const bool logging = par->is_logging_rank();
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> devnull(std::fopen("/dev/null", "w"),
                                                                &std::fclose);
  if (!logging) {  // rank 0 speaks for every rank; errors still reach stderr
    TT_CHECK(devnull && std::freopen("/dev/null", "w", stdout) != nullptr,
             "train_gpt2: cannot silence rank ", par->rank(), ": ", std::strerror(errno));
  }
  // Tokens per optimizer step; by default one micro-batch on every rank.
  const int64_t total_batch = o.total_batch > 0 ? o.total_batch : o.B * o.T * ranks;
  TT_CHECK(total_batch % (o.B * o.T * ranks) == 0, "train_gpt2: --total-batch ", total_batch,
           " is not a multiple of N*B*T = ", ranks, "*", o.B, "*", o.T,
           " (N ranks each read B rows of T tokens per micro-batch)");
  fs::create_directories(o.out);
  const std::string ckpt_path = o.out + "/checkpoint.ttckpt";
  const std::string csv_path = o.out + "/train.csv";

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
  DataLoader train(find_shards(o.data, "train"), dl);
  dl.shuffle = false;
  DataLoader val(find_shards(o.data, "val"), dl);

  // Model.
  std::unique_ptr<GPT2> model;
  if (!o.init_llmc.empty()) {
    model = load_llmc(o.init_llmc);
    TT_CHECK(model->config().vocab_size == V, "train_gpt2: ", o.init_llmc,
             " has V = ", model->config().vocab_size, " but the tokenizer has ", V, " ids");
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
             "train_gpt2: --profile-step needs chapter 10's profiler, which is not linked in");
  }
  const GPT2Config& cfg = model->config();
  TT_CHECK(o.T <= cfg.block_size, "train_gpt2: T = ", o.T, " exceeds block_size ", cfg.block_size);
  optim::AdamWOptions ao;
  ao.lr = o.lr;
  ao.beta1 = o.beta1;
  ao.beta2 = o.beta2;
  // The strategy makes the ranks' parameters equal (rank 0's) and holds the optimizer state.
  const std::unique_ptr<optim::Optimizer> opt_ptr =
      par->make_optimizer(*model, param_groups(*model, o.weight_decay), ao, ops.adamw);
  optim::Optimizer& opt = *opt_ptr;
  const optim::WarmupCosineLR schedule(o.lr, o.lr * o.min_lr_frac, o.warmup, o.steps);
  const int64_t accum = total_batch / (o.B * o.T * ranks);
  TrainStepOptions so;
  so.grad_accum_steps = accum;
  so.max_grad_norm = o.clip;
  so.parallel = par.get();

  int64_t start = 0;
  if (o.resume) {
    TT_CHECK(fs::exists(ckpt_path), "--resume: there is no checkpoint ", ckpt_path,
             " (a run saves one with --checkpoint-every N, at --max-seconds and at its end)");
    par->load_checkpoint(ckpt_path, *model, opt);
    start = opt.step_count();
    // Replay the data order: the same batches as an uninterrupted run.
    for (int64_t i = 0; i < start * accum; ++i) train.next();
    if (logging) truncate_log(csv_path, start);
    std::printf("resumed from %s at step %lld\n", ckpt_path.c_str(), static_cast<long long>(start));
  }
  const double flops_tok = flops_per_token(cfg, model->num_parameters(), o.T);
  cuda::set_allow_tf32(o.tf32);
  // H100 SXM dense peaks: FP32 67, TF32 495, BF16 989 TFLOP/s.
  const double gpu_peak = o.precision == "bf16" ? 989.0 : o.tf32 ? 495.0 : 67.0;
  const double peak = o.peak_tflops > 0 ? o.peak_tflops : (device.is_cuda() ? gpu_peak : 0.0);
  const double peak_all = peak * static_cast<double>(ranks);  // MFU over every rank's device

  std::printf("model: GPT-2 %s, %.2fM parameters, device %s%s, %d threads\n", cfg.str().c_str(),
              static_cast<double>(model->num_parameters()) / 1e6, device.str().c_str(),
              o.precision == "bf16"        ? " (bf16 mixed precision)"
              : device.is_cuda() && o.tf32 ? " (TF32 GEMMs)"
                                           : "",
              num_threads());
  std::printf("data: %s (%lld train tokens, %lld batches/epoch), tokenizer %lld ids\n",
              o.data.c_str(), static_cast<long long>(train.num_tokens()),
              static_cast<long long>(train.batches_per_epoch()), static_cast<long long>(V));
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
  // --cuda-graph: the graphed step in place of train_step (made after a --resume load).
  const std::unique_ptr<StepRunner> runner =
      o.cuda_graph ? make_graphed_step_runner(*model, opt, o.B, o.T, so) : nullptr;
  if (runner) std::printf("step: %s\n", runner->description().c_str());
  std::fflush(stdout);

  // Rank 0 writes the run log; the other ranks write nothing.
  std::optional<CsvWriter> csv;
  if (logging) {
    csv.emplace(csv_path,
                std::vector<std::string>{"step", "loss", "lr", "grad_norm", "ms", "tok_per_s",
                                         "val_loss", "mfu"},
                o.resume && start > 0);
  }
  auto next_train = [&] { return train.next(); };
  auto eval_now = [&] {
    val.reset();
    return par->average(evaluate(
        *model, [&] { return val.next(); }, o.eval_batches));
  };
  // The latest validation loss and its step; the samples of this run with their step and the
  // validation loss of that step (the first and the last are shown again at the end).
  double val_loss = NAN;
  int64_t val_step = -1;
  std::vector<std::pair<std::string, std::string>> samples;
  auto sample_now = [&](int64_t step, ProgressBar* bar) {
    if (!logging) return;  // sampling is local to a rank: rank 0 shows it
    Generator gen(o.seed + static_cast<uint64_t>(step));  // seeded per step: resumable
    SamplingOptions so2{o.temperature, o.top_k};
    const std::vector<int64_t> ids =
        generate(*model, {static_cast<int64_t>(tok.eot_id())}, o.sample_tokens, so2, gen);
    const std::string text = sample_text(tok, ids, 1);
    const std::string line = "sample @ step " + std::to_string(step) + ": " + text;
    samples.emplace_back(fmt("step %5.0f, val loss ", static_cast<double>(step)) +
                             (val_step == step ? fmt("%.4f", val_loss) : std::string("  -   ")),
                         text);
    if (bar != nullptr) {
      bar->println(line);
    } else {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  };
  // Samples at the start, the middle and the end: the middle is half the steps, or half of
  // --max-seconds when the time limit comes first.
  bool middle_done = false;
  auto wants_sample = [&](int64_t step, double elapsed, bool last) {  // step: completed steps
    if (last || (o.sample_every > 0 && step % o.sample_every == 0)) return true;
    const bool middle = step >= o.steps / 2 || (o.max_seconds > 0 && 2 * elapsed > o.max_seconds);
    if (middle && !middle_done) return middle_done = true;
    return false;
  };

  if (start == 0) {
    const double v = val_loss = eval_now();
    val_step = 0;
    std::printf("step 0: val loss %.4f (uniform guess: ln V = %.4f)\n", v,
                std::log(static_cast<double>(V)));
    if (csv) csv->row({"0", "", "", "", "", "", CsvWriter::num(v), ""});
    sample_now(0, nullptr);
  }

  ProgressBar bar(o.steps - start, "train", logging ? stderr : devnull.get());
  Timer total;
  int64_t step = start;
  int status = 0;
  const std::vector<Tensor> params = model->parameters();
  // Non-finite policy (tt/train.h): stop at once, write nothing more, exit with status 3.
  auto stop_nonfinite = [&](const std::string& what) {
    bar.println("step " + std::to_string(step + 1) + ": " + what +
                    "; stopping. The last good checkpoint is " +
                    (fs::exists(ckpt_path) ? ckpt_path : std::string("(none written yet)")),
                stderr);
    status = 3;
  };
  while (step < o.steps) {
    schedule.apply(opt);
    const double lr = opt.lr();
    const bool profiled = profiler && step + 1 == o.profile_step;
    if (profiled) profiler->begin();
    Timer t;
    const TrainStepResult r =  // r.tokens: all ranks
        runner ? runner->step(next_train) : train_step(*model, opt, next_train, so);
    const double ms = t.elapsed_ms();
    if (profiled) bar.println(profiler->end());
    const std::string loss_norm =
        "loss " + fmt("%g", r.loss) + ", grad norm " + fmt("%g", r.grad_norm);
    if (!r.finite) {
      stop_nonfinite(loss_norm + " is not finite (the update was skipped)");
      break;
    }
    if (!all_finite(params)) {
      stop_nonfinite(loss_norm + " was finite, but the update with lr " + fmt("%g", lr) +
                     " made the parameters NaN/Inf");
      break;
    }
    ++step;
    const double tok_s = static_cast<double>(r.tokens) / (ms / 1e3);
    const double mfu = peak > 0 ? flops_tok * tok_s / (peak_all * 1e12) : 0;
    // Under --max-seconds every rank must stop at the same step (checkpoints and evaluations
    // are collectives): the ranks agree on the longest elapsed time.
    const double elapsed = o.max_seconds > 0 ? par->maximum(total.elapsed_s()) : total.elapsed_s();
    const bool out_of_time = o.max_seconds > 0 && elapsed > o.max_seconds;
    std::string val_cell;
    if (o.eval_every > 0 && (step % o.eval_every == 0 || step == o.steps || out_of_time)) {
      const double v = val_loss = eval_now();
      val_step = step;
      val_cell = CsvWriter::num(v);
      bar.println("step " + std::to_string(step) + ": val loss " + fmt("%.4f", v));
    }
    if (csv) {
      csv->row({std::to_string(step), CsvWriter::num(r.loss), CsvWriter::num(lr),
                CsvWriter::num(r.grad_norm), CsvWriter::num(ms), CsvWriter::num(tok_s), val_cell,
                peak > 0 ? CsvWriter::num(mfu) : ""});
    }
    if (o.log_every > 0 && (step % o.log_every == 0 || step == o.steps)) {
      std::string line = "step " + std::to_string(step) + "/" + std::to_string(o.steps) +
                         " | loss " + fmt("%.4f", r.loss) + " | lr " + fmt("%.2e", lr) +
                         " | norm " + fmt("%.3f", r.grad_norm) + " | " + fmt("%.0f ms", ms) +
                         " | " + fmt("%.0f tok/s", tok_s);
      if (peak > 0) line += " | MFU " + fmt("%.1f%%", 100 * mfu);
      bar.println(line);
    }
    if (step == o.kill_after_step) std::raise(SIGKILL);  // a crash between two checkpoints
    bar.update(step - start, "loss " + fmt("%.3f", r.loss));
    if (wants_sample(step, elapsed, step == o.steps || out_of_time)) sample_now(step, &bar);
    if ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == o.steps ||
        out_of_time) {
      par->save_checkpoint(ckpt_path, *model, opt);  // every rank takes part; rank 0 writes
    }
    if (out_of_time) {
      bar.println("stopping after --max-seconds " + fmt("%g", o.max_seconds) + " at step " +
                  std::to_string(step) + " (resume with --resume)");
      break;
    }
  }
  bar.finish();
  // Memory of each rank (the largest over the ranks): peak bytes of the device allocator (every
  // tensor), peak resident set of the process (CPU), and the optimizer state it holds.
  const double mib = 1024.0 * 1024.0;
  const double peak_tensors = par->maximum(
      static_cast<double>(backend_for(device.type).allocator(device.index).stats().peak_allocated));
  const double peak_rss = par->maximum(static_cast<double>(peak_rss_bytes()));
  const double opt_state = par->maximum(static_cast<double>(par->optimizer_state_bytes(opt)));
  std::printf(
      "memory per rank (max over %lld): peak tensors %.1f MiB, peak RSS %.1f MiB, optimizer "
      "state %.2f MiB (%s)\n",
      static_cast<long long>(ranks), peak_tensors / mib, peak_rss / mib, opt_state / mib,
      par->name().c_str());
  par->finish();  // every rank, on the normal path (an error exits without it)
  if (!logging) return status;
  if (status == 0) save_llmc(*model, o.out + "/model.bin");
  const bool png = plot_loss(csv_path, o.out + "/loss.png");
  std::printf("trained %lld steps in %s\n", static_cast<long long>(step - start),
              format_duration(total.elapsed_s()).c_str());
  std::printf("run log: %s\n", csv_path.c_str());
  std::printf("loss curve: %s\n", png ? (o.out + "/loss.png").c_str() : "(gnuplot not found)");
  if (status == 0) {
    std::printf("checkpoint: %s (resume with --resume), llm.c model: %s/model.bin\n",
                ckpt_path.c_str(), o.out.c_str());
  }
  if (samples.size() >= 2) {  // what the model learned, one sample above the other
    std::printf("\nfirst and last sample (temperature %g, top-k %lld):\n", o.temperature,
                static_cast<long long>(o.top_k));
    for (const auto* s : {&samples.front(), &samples.back()}) {
      std::printf("  %s: %s\n", s->first.c_str(), s->second.c_str());
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gpt2: %s\n", e.what());
    return 1;
  }
}
