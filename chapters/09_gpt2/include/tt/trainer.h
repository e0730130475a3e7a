/// @file trainer.h
/// @brief The training loop of every model under every layout (the training library, part 3 of
/// 3; see also tt/train_config.h and tt/run_dir.h): data -> step -> evaluation, sampling and
/// checkpoint schedule, resume, logging.
///
/// The Trainer knows nothing of the model's family or of the parallel layout. A model family
/// supplies TrainerParts (its module, its step, its evaluation and its samples; GPT-2's are
/// made in apps/train_gpt2.cc), and a layout supplies the gpt2::ParallelStrategy through which
/// the step, the averages and the checkpoints go (chapter 12's "ddp" and "zero1"; later tensor,
/// pipeline and context parallelism plug in the same way). Every rank runs the same loop: the
/// collectives (evaluation, checkpoints, the --max-seconds agreement) happen at the same steps.
///
/// What one run does (each step numbered from 1; `start` is 0 or the checkpoint's step):
///  - before the first step: with --resume, the checkpoint's run record is compared with the
///    configuration (resume_conflicts: refused with the list of what differs), the state is
///    loaded, the training data replayed to the checkpoint's step and train.csv cut back to it;
///    a fresh run evaluates and samples at step 0;
///  - each step: the schedule's learning rate, the step (accumulation, clipping and the finite
///    check are the step's: gpt2::train_step or a StepRunner), the non-finite policy of tt/train.h
///    (stop with status 3, writing nothing), a CSV row, the log line, evaluation every
///    --eval-every steps, samples at the start, the middle and the end (or every
///    --sample-every), a checkpoint every --checkpoint-every steps and at the end, --max-seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tt/dataloader.h"
#include "tt/device.h"
#include "tt/gpt2_ops.h"
#include "tt/module.h"
#include "tt/optim.h"
#include "tt/run_dir.h"
#include "tt/train.h"
#include "tt/train_config.h"
#include "tt/train_parallel.h"

namespace tt::train {

/// Watches the training steps without knowing the model or the layout: the Trainer calls
/// begin_step before and end_step after each step's work (the forward and backward passes of
/// every micro-batch, the gradient synchronisation and the update), on every rank, before the
/// step's finite check, logging, evaluation and checkpoint. A hook for tools from later chapters
/// that the training library (chapter 09) cannot name: train_gpt2 plugs chapter 12's Chrome
/// trace (tt/trace.h) in here for `--trace FILE`.
/// @code
///   struct Timing : tt::train::StepObserver {
///     void begin_step(int64_t step) override { t = Clock::now(); }
///     void end_step(int64_t step) override { log(step, Clock::now() - t); }
///   };
///   parts.observer = &timing;
/// @endcode
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  /// Before step `step` (numbered from 1, as in the log) runs.
  virtual void begin_step(int64_t step) = 0;
  /// After step `step`'s update (also for a step whose loss or gradient was not finite).
  virtual void end_step(int64_t step) = 0;
};

/// What the Trainer drives: a model family's pieces, made by the app.
struct TrainerParts {
  nn::Module* model = nullptr;                  ///< saved in checkpoints
  optim::Optimizer* optimizer = nullptr;        ///< made by the strategy
  gpt2::ParallelStrategy* parallel = nullptr;   ///< the layout (never null)
  const optim::LRSchedule* schedule = nullptr;  ///< the learning rate of each step
  std::function<Batch()> next_train;            ///< this rank's next training micro-batch
  /// One optimizer step on micro-batches from `next_batch` (gpt2::train_step or a StepRunner).
  std::function<gpt2::TrainStepResult(const std::function<Batch()>& next_batch)> step;
  std::function<double()> evaluate;  ///< the validation loss, averaged over the ranks
  /// The text of a sample after `step` steps (called on the logging rank only); empty: none.
  std::function<std::string(int64_t step)> sample;
  std::string title = "training";  ///< the title of loss.png, e.g. "GPT-2 training"
  /// Appended to the log line of the validation loss at step 0 (e.g. the uniform guess ln V).
  std::string start_note;
  gpt2::StepProfiler* profiler = nullptr;  ///< profiles step --profile-step (may be null)
  double flops_per_token = 0;              ///< training FLOPs per token (MFU)
  double peak_flops = 0;                   ///< peak FLOP/s of all ranks together (0: no MFU)
  StepObserver* observer = nullptr;        ///< called around every step (may be null)
};

/// How a run ended.
struct TrainerResult {
  int status = 0;            ///< 0 done (or stopped by --max-seconds), 3 stopped at NaN/Inf
  int64_t start = 0;         ///< the step the run started from
  int64_t step = 0;          ///< the last completed step
  double seconds = 0;        ///< training time
  bool out_of_time = false;  ///< stopped by --max-seconds
  /// The samples of this run: ("step N, val loss X", text), in order.
  std::vector<std::pair<std::string, std::string>> samples;
};

/// The training loop (see the file comment).
class Trainer {
 public:
  /// A trainer of `parts` under `config`, writing into `dir` (on the logging rank). Throws
  /// tt::Error when a part is missing. Sets the strategy's checkpoint metadata to the run's
  /// record (config_metadata).
  Trainer(const TrainConfig& config, RunDir& dir, TrainerParts parts);

  /// With config.resume: checks the checkpoint's record against the configuration (throws
  /// tt::Error listing every refused difference), loads the state through the strategy, replays
  /// the training data to its step and cuts train.csv back to it. Throws when the checkpoint's
  /// step is beyond --steps. Returns the step training starts from (0 without --resume); call it
  /// once, before run().
  int64_t resume();
  /// A note on the resumed state for the log ("" when there is none to give), e.g. that the
  /// checkpoint has no record, or that the run is already complete.
  const std::string& resume_note() const { return note_; }
  /// Prints what resume() did ("resumed from PATH at step N", and resume_note()), if anything.
  void print_resume() const;
  /// Trains from the start step to --steps (or --max-seconds, or a non-finite step).
  TrainerResult run();
  /// Prints the memory of each rank, the largest over the ranks (a collective: every rank calls
  /// it): peak bytes of `device`'s allocator (every tensor), peak resident set of the process,
  /// and the optimizer state the rank holds.
  void print_memory(Device device) const;
  /// On the logging rank, after a run that trained: draws loss.png and prints the summary (steps
  /// trained and the time, the files, the first and last sample). `model_file`: what names the
  /// model file the app wrote, e.g. `llm.c model: OUT/model.bin` ("" when none).
  void print_summary(const TrainerResult& result, const std::string& model_file) const;

 private:
  const TrainConfig& config_;
  RunDir& dir_;
  TrainerParts parts_;
  int64_t start_ = 0;
  bool resumed_ = false;
  std::string note_;
};

}  // namespace tt::train
