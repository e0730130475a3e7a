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
// change of the optimization such as more --steps); tt/train_setup.h picks the device, the
// strategy and the data; tt/run_dir.h locks --out (a second run fails at once) and owns
// train.csv, the checkpoint, loss.png and samples.txt; tt/gpt2_family.h builds GPT-2's pieces
// (the model, its operation set, its samples); tt/trainer.h runs the loop.
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
//
// Pipeline parallel (chapter 14 linked in): `mpirun -np N train_gpt2 --pp P [--tp K]
// [--micro-batches M] [--schedule afab|1f1b|interleaved]` cuts the layer stack into P stages
// (the ParallelStrategy "pp": a grid dp x pp x tp, tp innermost), each batch of B rows into M
// micro-batches; the step is the strategy's (its StepRunner), the checkpoint whole tensors.
#include <cstdio>
#include <memory>

#include "tt/gpt2_family.h"
#include "tt/parallel.h"
#include "tt/run_dir.h"
#include "tt/train_config.h"
#include "tt/train_setup.h"
#include "tt/train_trace.h"
#include "tt/trainer.h"

namespace {

using namespace tt;

int run(train::TrainConfig o) {
  train::RunStart start = train::start_run(o);
  if (!start.parallel) return 0;  // --print-device
  const std::unique_ptr<gpt2::ParallelStrategy>& par = start.parallel;
  const Device device = start.device;
  gpt2::check_cuda_graph(o, device, *par);  // before the data is read
  // The run directory: locked by rank 0 for the whole run.
  train::RunDir dir(
      o.out, {.writer = par->is_logging_rank(), .resume = o.resume, .overwrite = o.overwrite});
  if (dir.removed_temp_files() > 0) {
    std::printf("removed %lld temporary file(s) (%.1f MiB) that an interrupted write left in %s\n",
                static_cast<long long>(dir.removed_temp_files()),
                static_cast<double>(dir.removed_temp_bytes()) / (1024.0 * 1024.0), o.out.c_str());
  }
  train::TrainData data(o, *par);
  gpt2::Gpt2Family gpt2(o, device, *par, data);
  train::TrainerParts parts = gpt2.parts();
  // --trace: chapter 12's Chrome trace of the first steps, on every rank (a collective).
  const std::unique_ptr<trace::TraceStepObserver> tracer =
      trace::trace_if_asked(o, device, *par, parts);
  train::Trainer trainer(o, dir, std::move(parts));
  trainer.resume();
  trainer.print_resume();
  gpt2.print_plan();
  gpt2.prepare_step();  // --cuda-graph: captured from the resumed state
  std::fflush(stdout);

  const train::TrainerResult r = trainer.run();
  trace::write_trace(tracer.get(), o.trace);  // every rank; rank 0 merges
  trainer.print_memory(device);
  if (par->is_logging_rank() && r.start != o.steps) {  // rank 0, something trained
    // A split model (--tp, --pp) has no whole copy on one rank: its checkpoint holds whole
    // tensors.
    const bool export_llmc = r.status == 0 && !par->splits_model();
    if (export_llmc) gpt2::save_llmc(gpt2.model(), dir.file("model.bin"));
    trainer.print_summary(r, export_llmc ? "llm.c model: " + dir.file("model.bin") : "");
  }
  // Last: finish() ends the process group, which nothing may use afterwards (every rank, on the
  // normal path; an error exits without it).
  par->finish();
  return r.status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(tt::train::TrainConfig::parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gpt2: %s\n", e.what());
    return 1;
  }
}
