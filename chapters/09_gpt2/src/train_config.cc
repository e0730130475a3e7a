// The configuration of a training run (tt/train_config.h).
#include "tt/train_config.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "tt/checkpoint.h"
#include "tt/cli.h"
#include "tt/error.h"
#include "tt/tensor.h"

namespace tt::train {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string num(int64_t v) {
  return std::to_string(v);
}

/// a * b, or a tt::Error naming both flags when it overflows int64.
int64_t checked_product(int64_t a, const char* what_a, int64_t b, const char* what_b) {
  int64_t r = 0;
  TT_CHECK(!__builtin_mul_overflow(a, b, &r), what_a, " x ", what_b, " = ", a, " x ", b,
           " overflows a 64-bit integer; choose smaller values");
  return r;
}

void bind(ArgParser& args, TrainConfig& c) {
  args.option("--data", &c.data).option("--out", &c.out).option("--device", &c.device);
  args.option("--threads", &c.threads).option("--init-llmc", &c.init_llmc);
  args.option("--layers", &c.n_layer).option("--heads", &c.n_head).option("--channels", &c.n_embd);
  args.option("--n-kv-head", &c.n_kv_head);
  args.option("--block-size", &c.block_size).option("--B", &c.B).option("--T", &c.T);
  args.option("--total-batch", &c.total_batch).option("--steps", &c.steps);
  args.option("--lr", &c.lr).option("--min-lr-frac", &c.min_lr_frac);
  args.option("--warmup", &c.warmup).option("--weight-decay", &c.weight_decay);
  args.option("--clip", &c.clip).option("--beta1", &c.beta1).option("--beta2", &c.beta2);
  args.option("--seed", &c.seed).option("--max-seconds", &c.max_seconds);
  args.option("--eval-every", &c.eval_every).option("--eval-batches", &c.eval_batches);
  args.option("--sample-every", &c.sample_every).option("--sample-tokens", &c.sample_tokens);
  args.option("--temperature", &c.temperature).option("--top-k", &c.top_k);
  args.option("--checkpoint-every", &c.checkpoint_every).flag("--resume", &c.resume);
  args.flag("--overwrite", &c.overwrite).option("--override", &c.overrides);
  args.flag("--print-device", &c.print_device);
  args.option("--log-every", &c.log_every).option("--peak-tflops", &c.peak_tflops);
  args.flag("--tf32", &c.tf32).option("--kill-after-step", &c.kill_after_step);
  args.option("--precision", &c.precision).flag("--recompute", &c.recompute);
  args.option("--attention", &c.attention).option("--fused", &c.fused);
  args.option("--profile-step", &c.profile_step);
  args.option("--zero", &c.zero).flag("--cuda-graph", &c.cuda_graph);
  args.option("--tp", &c.tp).flag("--sequence-parallel", &c.sequence_parallel);
  args.option("--cp", &c.cp);
  args.option("--pp", &c.pp).option("--micro-batches", &c.micro_batches);
  args.option("--schedule", &c.schedule).option("--chunks", &c.chunks);
  args.option("--pp-partition", &c.pp_partition);
  args.option("--trace", &c.trace).option("--trace-steps", &c.trace_steps);
}

void check_nonnegative(int64_t v, const char* flag) {
  TT_CHECK(v >= 0, flag, " must be >= 0, got ", v);
}

void check_finite_at_least(double v, double lo, const char* flag) {
  TT_CHECK(std::isfinite(v) && v >= lo, flag, " must be a finite number >= ", lo, ", got ", v);
}

/// The overridable flags (ResumeRule::kOverride), for --override NAME.
const std::vector<std::string>& overridable_flags() {
  static const std::vector<std::string> flags = {"--steps",  "--lr",           "--min-lr-frac",
                                                 "--warmup", "--weight-decay", "--clip",
                                                 "--beta1",  "--beta2",        "--precision"};
  return flags;
}

/// The --override names as flags ("steps" and "--steps" alike; comma lists split).
std::set<std::string> override_set(const std::vector<std::string>& overrides) {
  std::set<std::string> out;
  for (const std::string& o : overrides) {
    for (const std::string& name : split_list(o)) {
      out.insert(name.starts_with("--") ? name : "--" + name);
    }
  }
  return out;
}

/// What every rank must agree on: the record and the flags that steer the start.
std::vector<ConfigEntry> rank_entries(const TrainConfig& c, int64_t ranks) {
  std::vector<ConfigEntry> e = c.record(ranks);
  std::string overrides;
  for (const std::string& o : override_set(c.overrides))
    overrides += (overrides.empty() ? "" : ",") + o;
  e.push_back({"--resume", c.resume ? "1" : "0", ResumeRule::kFree});
  e.push_back({"--overwrite", c.overwrite ? "1" : "0", ResumeRule::kFree});
  e.push_back({"--override", overrides, ResumeRule::kFree});
  return e;
}

uint64_t entry_hash(const ConfigEntry& e) {
  const std::string line = e.key + "=" + e.value + "\n";
  return ckpt::fnv1a64(line.data(), line.size());
}

}  // namespace

std::string TrainConfig::usage(const std::string& program) {
  return "usage: " + program +
         " [options]\n"
         "data and output:\n"
         "  --data DIR            shards and tokenizer from tt_prepare_data (data/fortunes)\n"
         "  --out DIR             run directory: train.csv, loss.png, samples.txt, checkpoint,\n"
         "                        model.bin; locked while a run uses it (a second run fails)\n"
         "  --device D            auto | cpu | cuda (auto: cuda when a GPU and the CUDA\n"
         "                        backend and every kernel of a training step exist)\n"
         "  --print-device        print the device --device resolves to (cpu, cuda:0) and exit\n"
         "  --threads N           CPU threads (default: OMP_NUM_THREADS or all cores)\n"
         "model:\n"
         "  --layers L --heads NH --channels C   (4, 4, 128)\n"
         "  --n-kv-head N         key/value heads of grouped-query attention, dividing --heads\n"
         "                        (train_llama; 0, the default: = --heads, multi-head)\n"
         "  --block-size N        longest context (default: T)\n"
         "  --init-llmc FILE      start from an llm.c model file (e.g. gpt2_124M.bin)\n"
         "batch and schedule:\n"
         "  --B N --T N           micro-batch rows and sequence length (16, 64)\n"
         "  --total-batch N       tokens per optimizer step, a multiple of B*T; the rest\n"
         "                        is gradient accumulation (default B*T, N*B*T on N ranks)\n"
         "  --steps N             optimizer steps (300)\n"
         "  --lr X --min-lr-frac F --warmup N   AdamW peak lr, cosine floor as a fraction\n"
         "                        of it, warmup steps (1e-3, 0.1, 20)\n"
         "  --weight-decay X --clip X --beta1 X --beta2 X   (0.1, 1.0, 0.9, 0.95; clip 0: none)\n"
         "  --seed N              model init, data order and sampling (1337)\n"
         "  --max-seconds N       stop (and save) after N seconds of training (0: no limit)\n"
         "evaluation, sampling, checkpoints:\n"
         "  --eval-every N --eval-batches N      validation loss (50, 8)\n"
         "  --sample-every N      also sample every N steps (default: start, middle, end)\n"
         "  --sample-tokens N --temperature X --top-k K   (48, 0.8, 40)\n"
         "  --checkpoint-every N  save <out>/checkpoint.ttckpt every N steps (and at the end)\n"
         "  --resume              continue from <out>/checkpoint.ttckpt (exactly: same\n"
         "                        batches, same results as an uninterrupted run). The\n"
         "                        checkpoint records the run's options: a change of the model,\n"
         "                        the batch or --seed is refused, listing what differs\n"
         "  --override NAME       with --resume: accept a change of NAME, one of steps, lr,\n"
         "                        min-lr-frac, warmup, weight-decay, clip, beta1, beta2,\n"
         "                        precision (repeatable, or NAME,NAME; e.g. more --steps)\n"
         "  --overwrite           start a new run in an --out that holds an earlier run's\n"
         "                        checkpoint (replacing it; without this the run refuses)\n"
         "  --log-every N         print a log line every N steps (1)\n"
         "  --kill-after-step N   testing: kill -9 itself right after logging step N and the\n"
         "                        memory line (a crash to try --resume on; train.csv is cut\n"
         "                        back to the checkpoint)\n"
         "  --precision P         fp32 | tf32 | bf16 (default: " +
         std::string(program == "train_llama"
                         ? "fp32 on every device; bf16 only\n"
                           "                        when asked"
                         : "bf16 on a GPU where chapter 11's\n"
                           "                        bf16 operations run, fp32 elsewhere") +
         "). tf32: float32 GEMMs on the\n"
         "                        GPU use TF32 tensor cores (inputs rounded to 10-bit mantissas;\n"
         "                        off by default, as in PyTorch). bf16: chapter 11's mixed\n"
         "                        precision (operation set \"bf16\": bf16 GEMMs and attention,\n"
         "                        float32 weights, residual stream, statistics and loss; a\n"
         "                        GEMM left in float32, e.g. --tp's logits, uses TF32)\n"
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
         "data parallel (mpirun -np N " +
         program +
         " ..., needs chapter 12):\n"
         "  --zero 0|1            0: DDP (gradients averaged once per step); 1: ZeRO-1 (AdamW\n"
         "                        state sharded over the ranks; also valid in one process). Both\n"
         "                        on the CPU, or one GPU per rank, cuda:local_rank, through NCCL.\n"
         "                        --B is per rank: N ranks train like one process with --B N*B;\n"
         "                        --total-batch must be a multiple of N*B*T. Every rank must get\n"
         "                        the same options (compared at start)\n"
         "tensor parallel (mpirun -np N " +
         program +
         " ..., needs chapter 13):\n"
         "  --tp K                split every layer over K ranks (Megatron: attention by heads,\n"
         "                        the MLP, the vocabulary); K must divide N and --heads; the N/K\n"
         "                        groups are data-parallel replicas (DDP). --B is per replica.\n"
         "                        Checkpoints hold whole tensors: resume at any --tp\n"
         "  --sequence-parallel   with --tp: LayerNorm and residual regions sharded along the\n"
         "                        sequence (--T divisible by K)\n"
         "context parallel (mpirun -np N " +
         program +
         " ..., needs chapter 16):\n"
         "  --cp K                split every sequence over K ranks (zigzag shards, ring\n"
         "                        attention); K must divide N, --T divisible by 2K; the N/K\n"
         "                        groups are data-parallel replicas (DDP). --B is per replica.\n"
         "                        With --tp J: dp x cp x tp grids (J K divides N); with --pp\n"
         "                        P: dp x pp x cp x tp (each stage's ranks split the sequence)\n"
         "pipeline parallel (mpirun -np N " +
         program +
         " ..., needs chapter 14):\n"
         "  --pp P                cut the layer stack into P stages on P ranks (stages balanced\n"
         "                        by cost; embedding on the first, head on the last). With --tp\n"
         "                        K the N ranks form a grid dp x pp x tp (tp innermost: rank =\n"
         "                        (dp * P + pp) * K + tp), P*K must divide N. --B is per replica\n"
         "  --micro-batches M     cut each batch of --B rows into M micro-batches (M divides B)\n"
         "                        that stream through the stages; bubble (P-1)/(M+P-1)\n"
         "  --schedule S          afab | 1f1b | interleaved (default 1f1b). interleaved: --chunks\n"
         "                        V model chunks per rank (default 2), micro-batches per step a\n"
         "                        multiple of P and >= 2P. Checkpoints hold whole tensors:\n"
         "                        resume at any --pp and --tp\n"
         "  --chunks V            model chunks per rank for --schedule interleaved\n"
         "  --pp-partition K      how the blocks are weighed before the cut: flops (the FLOP\n"
         "                        model, the default: the same cut on every run) or measured\n"
         "                        (embedding, a block and the head timed on each rank's device\n"
         "                        with the run's operations, the ranks' median; not with --tp\n"
         "                        or --cp)\n"
         "tools (chapter 12's tools lab, when linked in):\n"
         "  --trace FILE          the first --trace-steps steps of the run as a Chrome trace\n"
         "                        (Perfetto, chrome://tracing): steps, kernels, DDP's all-reduces;\n"
         "                        one file for all ranks. Not with --cuda-graph or --profile-step\n"
         "  --trace-steps N       how many steps --trace records (default 3)\n"
         "exit status: 0 done, 1 error (message on stderr), 2 malformed command line, 3 stopped\n"
         "at a NaN/Inf loss or gradient norm (nothing written after the last good checkpoint)\n";
}

TrainConfig TrainConfig::parse(int argc, char** argv, const std::string& program) {
  TrainConfig c;
  ArgParser args(program, usage(program));
  bind(args, c);
  args.parse(argc, argv);
  c.validate();
  return c;
}

TrainConfig TrainConfig::parse_args(const std::vector<std::string>& argv) {
  TrainConfig c;
  ArgParser args("train_gpt2", usage("train_gpt2"));
  bind(args, c);
  TT_CHECK(args.parse_or_throw(argv), "TrainConfig::parse_args: --help has no configuration");
  c.validate();
  return c;
}

void TrainConfig::validate() {
  TT_CHECK(B > 0 && T > 0 && steps > 0, "--B, --T and --steps must be > 0, got ", B, ", ", T, ", ",
           steps);
  checked_product(B, "--B", T, "--T");
  TT_CHECK(n_layer > 0 && n_head > 0 && n_embd > 0, "--layers, --heads and --channels must be > 0");
  TT_CHECK(n_embd % n_head == 0, "--channels ", n_embd, " is not a multiple of --heads ", n_head);
  TT_CHECK(n_kv_head >= 0 && (n_kv_head == 0 || n_head % n_kv_head == 0), "--n-kv-head ", n_kv_head,
           " must divide --heads ", n_head, " (0: = --heads)");
  check_nonnegative(block_size, "--block-size");
  if (block_size == 0) block_size = T;
  TT_CHECK(T <= block_size, "--T ", T, " exceeds --block-size ", block_size);
  check_nonnegative(total_batch, "--total-batch");
  TT_CHECK(total_batch % (B * T) == 0, "--total-batch ", total_batch,
           " is not a multiple of B*T = ", B * T);
  TT_CHECK(warmup >= 0 && warmup < steps, "--warmup must be in [0, steps), got ", warmup);
  TT_CHECK(std::isfinite(lr) && lr > 0, "--lr must be a finite number > 0, got ", lr);
  TT_CHECK(std::isfinite(min_lr_frac) && min_lr_frac >= 0 && min_lr_frac <= 1,
           "--min-lr-frac must be in [0, 1], got ", min_lr_frac);
  check_finite_at_least(weight_decay, 0, "--weight-decay");
  check_finite_at_least(clip, 0, "--clip");
  TT_CHECK(std::isfinite(beta1) && beta1 >= 0 && beta1 < 1, "--beta1 must be in [0, 1), got ",
           beta1);
  TT_CHECK(std::isfinite(beta2) && beta2 >= 0 && beta2 < 1, "--beta2 must be in [0, 1), got ",
           beta2);
  check_finite_at_least(max_seconds, 0, "--max-seconds");
  TT_CHECK(threads >= 0, "--threads must be >= 0 (0: the default), got ", threads);
  check_nonnegative(eval_every, "--eval-every");
  TT_CHECK(eval_batches > 0, "--eval-batches must be > 0, got ", eval_batches);
  check_nonnegative(sample_every, "--sample-every");
  check_nonnegative(sample_tokens, "--sample-tokens");
  check_finite_at_least(temperature, 0, "--temperature");
  check_nonnegative(top_k, "--top-k");
  check_nonnegative(checkpoint_every, "--checkpoint-every");
  check_nonnegative(log_every, "--log-every");
  check_nonnegative(kill_after_step, "--kill-after-step");
  check_finite_at_least(peak_tflops, 0, "--peak-tflops");
  TT_CHECK(device == "auto" || device == "cpu" || device.starts_with("cuda"),
           "--device must be auto, cpu or cuda[:i], got '", device, "'");
  TT_CHECK(!(resume && overwrite),
           "--resume continues the run in --out and --overwrite replaces "
           "it: give one of them");
  TT_CHECK(overrides.empty() || resume, "--override applies to --resume only");
  for (const std::string& name : override_set(overrides)) {
    bool known = false;
    for (const std::string& f : overridable_flags()) known = known || f == name;
    std::string names;
    for (const std::string& f : overridable_flags()) names += " " + f.substr(2);
    TT_CHECK(known, "--override ", name.substr(2),
             ": not a flag a resumed run may change (those are:", names, ")");
  }
  TT_CHECK(attention == "flash" || attention == "naive" || attention == "auto",
           "--attention must be flash, naive or auto, got '", attention, "'");
  TT_CHECK(fused == "on" || fused == "off" || fused == "auto",
           "--fused must be on, off or auto, got '", fused, "'");
  TT_CHECK(precision.empty() || precision == "fp32" || precision == "tf32" || precision == "bf16",
           "--precision must be fp32, tf32 or bf16, got '", precision, "'");
  TT_CHECK(!tf32 || precision.empty() || precision == "tf32",
           "--tf32 means --precision tf32; it contradicts --precision ", precision);
  if (tf32) precision = "tf32";  // "" (no --precision): decided with the device
  tf32 = precision == "tf32";
  TT_CHECK(!recompute || precision.empty() || precision == "bf16",
           "--recompute needs --precision bf16 (chapter 11's \"bf16_recompute\")");
  TT_CHECK(precision != "bf16" || (attention == "auto" && fused == "auto"),
           "--precision bf16 uses chapter 11's operation set \"bf16\" as a whole; "
           "--attention and --fused choose among the float32 sets (fp32, tf32)");
  check_nonnegative(profile_step, "--profile-step");
  TT_CHECK(zero == 0 || zero == 1, "--zero must be 0 or 1, got ", zero);
  TT_CHECK(!cuda_graph || profile_step == 0,
           "--cuda-graph and --profile-step exclude each other (a replayed graph dispatches no "
           "operation for the profiler to see)");
  TT_CHECK(tp >= 1, "--tp must be >= 1, got ", tp);
  TT_CHECK(tp == 1 || (zero == 0 && !cuda_graph), "--tp ", tp,
           " excludes --zero 1 and --cuda-graph (the tensor-parallel strategy keeps "
           "AdamW's state whole on each rank and runs its steps eagerly)");
  TT_CHECK(!sequence_parallel || T % tp == 0, "--sequence-parallel gives each of the --tp ", tp,
           " ranks T/tp tokens: --T ", T, " is not divisible by it");
  TT_CHECK(cp >= 1, "--cp must be >= 1, got ", cp);
  TT_CHECK(cp == 1 || (!sequence_parallel && zero == 0 && !cuda_graph), "--cp ", cp,
           " excludes --sequence-parallel, --zero 1 and --cuda-graph (chapter 16's context "
           "parallelism: ring attention, DDP, --tp or --pp, eager steps)");
  TT_CHECK(cp == 1 || T % (2 * cp) == 0, "--cp ", cp, " cuts each sequence into ", 2 * cp,
           " zigzag chunks: --T ", T, " is not divisible by it");
  TT_CHECK(pp >= 1 && micro_batches >= 1 && chunks >= 0,
           "--pp and --micro-batches must be >= 1 and --chunks >= 0, got ", pp, ", ", micro_batches,
           ", ", chunks);
  // (validate() may run again: the resolved defaults "1f1b" and 1 count as not given.)
  TT_CHECK(
      pp > 1 || (micro_batches == 1 && (schedule.empty() || schedule == "1f1b") && chunks <= 1),
      "--micro-batches, --schedule and --chunks shape a pipeline: they need --pp > 1 (for "
      "gradient accumulation in one stage use --total-batch)");
  if (schedule.empty()) schedule = "1f1b";
  TT_CHECK(schedule == "afab" || schedule == "1f1b" || schedule == "interleaved",
           "--schedule must be afab, 1f1b or interleaved, got '", schedule, "'");
  if (chunks == 0) chunks = schedule == "interleaved" ? 2 : 1;
  TT_CHECK(schedule == "interleaved" ? chunks >= 2 : chunks == 1, "--chunks ", chunks,
           " with --schedule ", schedule,
           ": interleaved runs 2 or more model chunks per rank, afab and 1f1b one");
  if (pp_partition.empty()) pp_partition = "flops";
  TT_CHECK(pp_partition == "flops" || pp_partition == "measured",
           "--pp-partition must be flops or measured, got '", pp_partition, "'");
  TT_CHECK(pp_partition == "flops" || (pp > 1 && tp == 1 && cp == 1), "--pp-partition ",
           pp_partition,
           " weighs a pipeline's blocks: it needs --pp > 1, and times them unsplit (not with --tp "
           "or --cp), got --pp ",
           pp, " --tp ", tp, " --cp ", cp);
  TT_CHECK(B % micro_batches == 0, "--micro-batches ", micro_batches,
           " cuts each batch of --B rows into equal micro-batches: --B ", B,
           " is not a multiple of it");
  TT_CHECK(!init_llmc.empty() || pp * chunks <= n_layer, "--pp ", pp, " x --chunks ", chunks, " = ",
           pp * chunks, " pipeline stages for --layers ", n_layer,
           ": more stages than layers (every stage needs at least one block)");
  TT_CHECK(pp == 1 || (zero == 0 && !cuda_graph && !sequence_parallel), "--pp ", pp,
           " excludes --zero 1, --cuda-graph and --sequence-parallel (the pipeline keeps each "
           "stage's AdamW state whole, runs its steps eagerly and sends whole sequences)");
  TT_CHECK(trace_steps >= 1, "--trace-steps must be >= 1, got ", trace_steps);
  TT_CHECK(trace.empty() || (!cuda_graph && profile_step == 0),
           "--trace excludes --cuda-graph and --profile-step (the trace records the kernels "
           "each step dispatches with chapter 10's profiler)");
}

void TrainConfig::validate_for(int64_t ranks) const {
  const int64_t bt = checked_product(B, "--B", T, "--T");
  const int64_t global = checked_product(bt, "B*T", ranks, "ranks");
  TT_CHECK(total_batch % global == 0, "--total-batch ", total_batch,
           " is not a multiple of N*B*T = ", ranks, "*", B, "*", T,
           " (N ranks each read B rows of T tokens per micro-batch)");
}

int64_t TrainConfig::tokens_per_step(int64_t ranks) const {
  return total_batch > 0 ? total_batch : B * T * ranks;
}

int64_t TrainConfig::accumulation(int64_t ranks) const {
  return tokens_per_step(ranks) / (B * T * ranks);
}

std::vector<ConfigEntry> TrainConfig::record(int64_t ranks) const {
  using R = ResumeRule;
  return {
      // what the run is: the model, the data order and the global batch
      {"--layers", num(n_layer), R::kFixed},
      {"--heads", num(n_head), R::kFixed},
      {"--n-kv-head", num(n_kv_head), R::kFixed},
      {"--channels", num(n_embd), R::kFixed},
      {"--block-size", num(block_size), R::kFixed},
      {"--init-llmc", init_llmc, R::kFixed},
      {"--seed", std::to_string(seed), R::kFixed},
      {"--T", num(T), R::kFixed},
      {"--B x ranks", num(B * ranks), R::kFixed},
      {"tokens per step (--total-batch)", num(tokens_per_step(ranks)), R::kFixed},
      // the optimization: changes with --override
      {"--steps", num(steps), R::kOverride},
      {"--lr", num(lr), R::kOverride},
      {"--min-lr-frac", num(min_lr_frac), R::kOverride},
      {"--warmup", num(warmup), R::kOverride},
      {"--weight-decay", num(weight_decay), R::kOverride},
      {"--clip", num(clip), R::kOverride},
      {"--beta1", num(beta1), R::kOverride},
      {"--beta2", num(beta2), R::kOverride},
      {"--precision", precision, R::kOverride},
      // how it is run, logged and evaluated
      {"ranks", num(ranks), R::kFree},
      {"--B", num(B), R::kFree},
      {"--data", data, R::kFree},
      {"--out", out, R::kFree},
      {"--device", device, R::kFree},
      {"--threads", num(static_cast<int64_t>(threads)), R::kFree},
      {"--max-seconds", num(max_seconds), R::kFree},
      {"--eval-every", num(eval_every), R::kFree},
      {"--eval-batches", num(eval_batches), R::kFree},
      {"--sample-every", num(sample_every), R::kFree},
      {"--sample-tokens", num(sample_tokens), R::kFree},
      {"--temperature", num(temperature), R::kFree},
      {"--top-k", num(top_k), R::kFree},
      {"--checkpoint-every", num(checkpoint_every), R::kFree},
      {"--log-every", num(log_every), R::kFree},
      {"--kill-after-step", num(kill_after_step), R::kFree},
      {"--peak-tflops", num(peak_tflops), R::kFree},
      {"--recompute", recompute ? "1" : "0", R::kFree},
      {"--attention", attention, R::kFree},
      {"--fused", fused, R::kFree},
      {"--profile-step", num(profile_step), R::kFree},
      {"--zero", num(zero), R::kFree},
      {"--tp", num(tp), R::kFree},
      {"--sequence-parallel", sequence_parallel ? "1" : "0", R::kFree},
      {"--cp", num(cp), R::kFree},
      {"--pp", num(pp), R::kFree},
      {"--micro-batches", num(micro_batches), R::kFree},
      {"--schedule", schedule, R::kFree},
      {"--chunks", num(chunks), R::kFree},
      {"--pp-partition", pp_partition, R::kFree},
      {"--cuda-graph", cuda_graph ? "1" : "0", R::kFree},
      {"--trace", trace, R::kFree},
      {"--trace-steps", num(trace_steps), R::kFree},
  };
}

uint64_t TrainConfig::hash(int64_t ranks) const {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const ConfigEntry& e : record(ranks)) {
    if (e.rule == ResumeRule::kFree) continue;
    const std::string line = e.key + "=" + e.value + "\n";
    h = ckpt::fnv1a64(line.data(), line.size(), h);
  }
  return h;
}

std::string record_text(const std::vector<ConfigEntry>& record) {
  std::string text;
  for (const ConfigEntry& e : record) text += e.key + "=" + e.value + "\n";
  return text;
}

std::vector<std::pair<std::string, std::string>> parse_record_text(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::size_t eq = line.find('=');
    TT_CHECK(eq != std::string::npos, "run record: line '", line, "' has no '='");
    out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

nn::StateDict config_metadata(const TrainConfig& config, int64_t ranks) {
  const std::string text = record_text(config.record(ranks));
  std::vector<int64_t> bytes(text.begin(), text.end());
  const uint64_t h = config.hash(ranks);
  int64_t h_signed = 0;
  std::memcpy(&h_signed, &h, sizeof(h));
  return {{"config", from_vector(bytes, {static_cast<int64_t>(bytes.size())})},
          {"config_hash", from_vector(std::vector<int64_t>{h_signed}, {1})}};
}

std::string recorded_config(const nn::StateDict& metadata) {
  for (const auto& [name, t] : metadata) {
    if (name != "config") continue;
    TT_CHECK(t.dtype() == DType::kInt64 && t.dim() == 1,
             "run record: 'meta.config' must be a 1-D int64 tensor, got ", t.describe());
    const Tensor c = t.contiguous();
    std::string text;
    for (int64_t i = 0; i < c.numel(); ++i) text.push_back(static_cast<char>(c.data<int64_t>()[i]));
    return text;
  }
  return "";
}

std::vector<std::string> resume_conflicts(const std::string& recorded, const TrainConfig& now,
                                          int64_t ranks) {
  std::map<std::string, std::string> before;
  for (auto& [k, v] : parse_record_text(recorded)) before[k] = v;
  const std::set<std::string> allowed = override_set(now.overrides);
  std::vector<std::string> out;
  for (const ConfigEntry& e : now.record(ranks)) {
    if (e.rule == ResumeRule::kFree) continue;
    const auto it = before.find(e.key);
    const std::string was = it == before.end() ? std::string("(not recorded)") : it->second;
    if (was == e.value) continue;
    if (e.rule == ResumeRule::kOverride && allowed.count(e.key)) continue;
    auto shown = [](const std::string& v) { return v.empty() ? std::string("(none)") : v; };
    out.push_back(e.key + ": " + shown(was) + " in the checkpoint, " + shown(e.value) + " now" +
                  (e.rule == ResumeRule::kOverride
                       ? " (accept with --override " + e.key.substr(2) + ")"
                       : ""));
  }
  return out;
}

void check_same_on_all_ranks(const TrainConfig& config, gpt2::ParallelStrategy& parallel) {
  const int64_t ranks = parallel.world_size();
  if (ranks == 1) return;
  const int rank = parallel.rank();
  const double none = -std::numeric_limits<double>::infinity();
  // The maximum over the ranks of rank 0's value alone: a broadcast from rank 0.
  auto from_rank0 = [&](double v) { return parallel.maximum(rank == 0 ? v : none); };
  // Does this 64-bit hash equal rank 0's? (doubles hold 32-bit halves exactly)
  auto same_as_rank0 = [&](uint64_t h) {
    const double lo = static_cast<double>(h & 0xffffffffULL), hi = static_cast<double>(h >> 32);
    const double lo0 = from_rank0(lo), hi0 = from_rank0(hi);
    return lo == lo0 && hi == hi0;
  };
  const std::vector<ConfigEntry> entries = rank_entries(config, ranks);
  uint64_t all = 0xcbf29ce484222325ULL;
  for (const ConfigEntry& e : entries) {
    const std::string line = e.key + "=" + e.value + "\n";
    all = ckpt::fnv1a64(line.data(), line.size(), all);
  }
  const bool same = same_as_rank0(all);
  // The lowest rank that differs (-1: none).
  const double lowest = -parallel.maximum(same ? none : -static_cast<double>(rank));
  if (!std::isfinite(lowest)) return;
  const int bad = static_cast<int>(lowest);
  // Which entries differ on rank `bad` (each entry's hash against rank 0's, told by rank bad).
  std::string flags, values;
  for (const ConfigEntry& e : entries) {
    const bool differs = !same_as_rank0(entry_hash(e));
    if (parallel.maximum(rank == bad && differs ? 1.0 : 0.0) > 0) {
      flags += (flags.empty() ? "" : ", ") + e.key;
      values += (values.empty() ? "" : ", ") + e.key + " " + (e.value.empty() ? "(none)" : e.value);
    }
  }
  TT_THROW("rank ", bad, " was started with other options than rank 0 (every rank must get the ",
           "same flags): ", flags, "; here on rank ", rank, ": ", values);
}

}  // namespace tt::train
