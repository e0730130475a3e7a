/// @file train_config.h
/// @brief The configuration of a training run (the training library, part 1 of 3; see also
/// tt/run_dir.h and tt/trainer.h): every flag of the training apps, parsed once with common/cli's
/// strict parser, validated before the first step, recorded in every checkpoint and hashed.
///
/// What the record is for:
///  - `--resume` compares the checkpoint's record with the new run's (resume_conflicts): a change
///    of what defines the run (the model, the data order, the batch) is refused with the list of
///    what differs; a change of the optimization (`--steps`, `--lr`, ...) needs `--override NAME`;
///    the rest (logging, evaluation, implementation choices) may change freely.
///  - under mpirun every rank compares its hash with rank 0's at start (check_same_on_all_ranks):
///    ranks started with different options fail at once, naming the rank and the options.
/// @code
///   tt::train::TrainConfig c = tt::train::TrainConfig::parse(argc, argv);  // exits 2 on a typo
///   c.validate();                  // throws tt::Error naming the flag and the allowed values
///   auto record = c.record(1);     // (key, value, rule) of one process
/// @endcode
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tt/module.h"
#include "tt/train_parallel.h"

namespace tt::train {

/// How `--resume` treats a change of one recorded value.
enum class ResumeRule {
  kFixed,     ///< defines the run (model, data order, batch): a change is refused
  kOverride,  ///< the optimization (steps, learning rate, ...): changes with --override NAME
  kFree,      ///< logging, evaluation, sampling, implementation: may change on every resume
};

/// One recorded value: `key` is the flag ("--lr"), or a derived quantity whose name says how it
/// is made ("--B x ranks"); `value` its text.
struct ConfigEntry {
  std::string key;    ///< the flag or derived quantity
  std::string value;  ///< its value as text (numbers with every digit: "0.001", "1337")
  ResumeRule rule;    ///< what --resume allows
};

/// Every option of a training run (the flags of train_gpt2; `train_gpt2 --help` documents them).
struct TrainConfig {
  // data and output
  std::string data = "data/fortunes";  ///< --data: shards and tokenizer (tt_prepare_data)
  std::string out = "runs/gpt2";       ///< --out: the run directory (tt/run_dir.h)
  std::string device = "auto";         ///< --device: auto | cpu | cuda[:i]
  bool print_device = false;           ///< --print-device: print the device and exit
  int threads = 0;                     ///< --threads: CPU threads (0: the default)
  // model (GPT-2)
  std::string init_llmc;  ///< --init-llmc: start from an llm.c model file
  int64_t n_layer = 4;    ///< --layers
  int64_t n_head = 4;     ///< --heads
  int64_t n_kv_head =
      0;                 ///< --n-kv-head: key/value heads of grouped-query attention (0: = --heads)
  int64_t n_embd = 128;  ///< --channels
  int64_t block_size = 0;  ///< --block-size (0: = T)
  // batch and schedule
  int64_t B = 16;             ///< --B: rows per rank and micro-batch
  int64_t T = 64;             ///< --T: tokens per row
  int64_t total_batch = 0;    ///< --total-batch tokens per step (0: B*T*ranks)
  int64_t steps = 300;        ///< --steps: optimizer steps of the whole run
  int64_t warmup = 20;        ///< --warmup steps
  double lr = 1e-3;           ///< --lr: peak learning rate
  double min_lr_frac = 0.1;   ///< --min-lr-frac: the cosine's floor as a fraction of lr
  double weight_decay = 0.1;  ///< --weight-decay (of the matrices and embeddings)
  double clip = 1.0;          ///< --clip: gradient-norm clipping threshold (0: none)
  double beta1 = 0.9;         ///< --beta1 of AdamW
  double beta2 = 0.95;        ///< --beta2 of AdamW
  uint64_t seed = 1337;       ///< --seed: model init, data order and sampling
  double max_seconds = 0;     ///< --max-seconds: stop (and save) after this long (0: no limit)
  // evaluation, sampling, checkpoints, logging
  int64_t eval_every = 50;             ///< --eval-every (0: at the start only)
  int64_t eval_batches = 8;            ///< --eval-batches per evaluation
  int64_t sample_every = 0;            ///< --sample-every (0: start, middle, end)
  int64_t sample_tokens = 48;          ///< --sample-tokens per sample
  double temperature = 0.8;            ///< --temperature (0: greedy)
  int64_t top_k = 40;                  ///< --top-k (0: all tokens)
  int64_t checkpoint_every = 0;        ///< --checkpoint-every (0: only at the end)
  int64_t log_every = 1;               ///< --log-every (0: no step lines)
  bool resume = false;                 ///< --resume from `OUT/checkpoint.ttckpt`
  bool overwrite = false;              ///< --overwrite an earlier run in --out
  std::vector<std::string> overrides;  ///< --override NAME[,NAME]: see ResumeRule
  int64_t kill_after_step = 0;         ///< --kill-after-step (testing)
  // precision and implementation
  double peak_tflops = 0;          ///< --peak-tflops for MFU (0: a GPU default, none on a CPU)
  bool tf32 = false;               ///< --tf32 (= --precision tf32)
  std::string precision;           ///< --precision fp32 | tf32 | bf16 ("": decided with device)
  bool recompute = false;          ///< --recompute (bf16)
  std::string attention = "auto";  ///< --attention flash | naive | auto
  std::string fused = "auto";      ///< --fused on | off | auto
  int64_t profile_step = 0;        ///< --profile-step N
  int64_t zero = 0;                ///< --zero 0 (DDP) | 1 (ZeRO-1)
  int64_t tp = 1;                  ///< --tp N: tensor-parallel size (chapter 13)
  bool sequence_parallel = false;  ///< --sequence-parallel (with --tp, chapter 13)
  int64_t cp = 1;                  ///< --cp N: context-parallel size (chapter 16)
  int64_t pp = 1;                  ///< --pp N: pipeline stages (chapter 14)
  int64_t micro_batches = 1;       ///< --micro-batches M: each batch of B rows cut in M (--pp)
  std::string schedule;            ///< --schedule afab | 1f1b | interleaved ("": 1f1b, --pp)
  int64_t chunks = 0;              ///< --chunks V per rank (0: 2 for interleaved, else 1)
  std::string pp_partition;        ///< --pp-partition flops | measured ("": flops, --pp)
  bool cuda_graph = false;         ///< --cuda-graph
  // tools (chapter 12's tools lab, when linked in)
  std::string trace;        ///< --trace FILE: the first steps as a Chrome trace ("": none)
  int64_t trace_steps = 3;  ///< --trace-steps N: how many steps --trace records

  /// The usage text of `program` (every flag, with its default).
  static std::string usage(const std::string& program);
  /// Parses argv with common/cli's strict parser (a malformed number, an unknown flag or a
  /// missing value prints the problem and exits 2; --help prints usage(program) and exits 0),
  /// then validate()s (throws tt::Error). `program` names the app in messages.
  static TrainConfig parse(int argc, char** argv, const std::string& program = "train_gpt2");
  /// parse() for argv without the program name, throwing tt::Error instead of exiting (tests).
  static TrainConfig parse_args(const std::vector<std::string>& args);

  /// Checks every value on its own and against the others (ranges, finite numbers, names, the
  /// products B*T and B*T*ranks without int64 overflow) and normalizes the aliases (block_size
  /// 0 becomes T, --tf32 becomes --precision tf32). Throws tt::Error naming the flag. Called by
  /// parse; call it again after changing fields by hand.
  void validate();
  /// The checks that need the number of processes (known once the strategy exists): B*T*ranks
  /// fits int64 and --total-batch is a multiple of it. Throws tt::Error.
  void validate_for(int64_t ranks) const;
  /// Tokens per optimizer step over all ranks: total_batch, or B*T*ranks when it is 0.
  int64_t tokens_per_step(int64_t ranks) const;
  /// Micro-batches per optimizer step on each rank (gradient accumulation).
  int64_t accumulation(int64_t ranks) const;
  /// Whether float32 GEMMs may use TF32 (cuda::set_allow_tf32): under --precision tf32, and under
  /// bf16, where the GEMMs left in float32 (e.g. --tp's vocab-parallel logits) stay finer than
  /// the bf16 operands of the others. Call after validate() (precision decided).
  bool allow_tf32() const { return tf32 || precision == "tf32" || precision == "bf16"; }
  /// The peak TFLOP/s of one device that MFU divides by: --peak-tflops when given, else on a
  /// GPU (`cuda`) the H100 SXM's dense peak of the run's precision (bf16 989, tf32 495, float32
  /// 67), and 0 on a CPU (no MFU). Call after validate() (precision decided).
  double device_peak_tflops(bool cuda) const {
    if (peak_tflops > 0) return peak_tflops;
    if (!cuda) return 0.0;
    return precision == "bf16" ? 989.0 : (tf32 || precision == "tf32") ? 495.0 : 67.0;
  }

  /// The run's record for `ranks` processes, in a fixed order: every flag, with derived
  /// layout-independent quantities ("--B x ranks", "tokens per step") in place of the per-rank
  /// batch, so that a checkpoint resumes under another number of ranks with the same global
  /// batch.
  std::vector<ConfigEntry> record(int64_t ranks) const;
  /// FNV-1a 64 hash of the record's fixed and overridable entries: equal hashes, same run.
  uint64_t hash(int64_t ranks) const;
};

/// The record as text, one "key=value" line per entry (what checkpoints store).
std::string record_text(const std::vector<ConfigEntry>& record);
/// Parses record_text's lines back into (key, value) pairs. Throws tt::Error on a line without
/// '='.
std::vector<std::pair<std::string, std::string>> parse_record_text(const std::string& text);

/// The checkpoint metadata of a run (ParallelStrategy::set_checkpoint_metadata): "config" (the
/// record text as int64 bytes) and "config_hash".
nn::StateDict config_metadata(const TrainConfig& config, int64_t ranks);
/// The record text stored by config_metadata in checkpoint metadata, or "" when it has none (a
/// checkpoint written before runs were recorded).
std::string recorded_config(const nn::StateDict& metadata);

/// What stands in the way of resuming a run recorded as `recorded` (record_text) with `now`:
/// one line per changed fixed entry, and per changed overridable entry not named in
/// now.overrides ("--lr: 0.001 in the checkpoint, 0.002 now"), plus a line per name in
/// now.overrides that is not an overridable flag. Empty: the resume may go on.
std::vector<std::string> resume_conflicts(const std::string& recorded, const TrainConfig& now,
                                          int64_t ranks);

/// Under several processes: compares every rank's record with rank 0's through `parallel`
/// (collective maxima of the hash, then of each entry's hash when they differ). Throws tt::Error,
/// on every rank, naming the first rank that differs and its differing flags ("rank 1 was
/// started with other options than rank 0: --steps, --lr"). Every rank must call it.
void check_same_on_all_ranks(const TrainConfig& config, gpt2::ParallelStrategy& parallel);

}  // namespace tt::train
