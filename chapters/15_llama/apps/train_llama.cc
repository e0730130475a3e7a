// train_llama: trains a LLaMA-family model (tt/llama.h) on token shards written by
// tt_prepare_data, with chapter 09's training library: the same flags, log, checkpoints,
// --resume and data parallelism under mpirun as train_gpt2 (see its header comment), with
// LlamaFamily in place of Gpt2Family.
//
//   train_llama [every train_gpt2 flag: --data, --out, --layers, --heads, --n-kv-head,
//               --channels, --B, --T, --steps, ...]
//
// Under mpirun: DDP, ZeRO-1 (--zero 1) and, with chapter 16, --cp N (every sequence split over N
// ranks, ring attention; DP x CP). --tp and --pp are GPT-2's and are refused.
// --n-kv-head (default: --heads) sets grouped-query attention's key/value heads; the run record
// holds it like the other shape flags, so --resume with another value is refused by name.
// --precision fp32 (the default, on every device) | tf32 | bf16: bf16 is chapter 11's mixed
// precision on float32 master weights (LlamaFamily; --recompute and --cuda-graph are refused).
// --trace FILE records the first --trace-steps steps as chapter 12's Chrome trace, as in
// train_gpt2 (tools/trace_ops FILE: where a step's time went, per op).
#include <cstdio>
#include <memory>
#include <string>

#include "tt/llama_family.h"
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
  train::RunDir dir(
      o.out, {.writer = par->is_logging_rank(), .resume = o.resume, .overwrite = o.overwrite});
  train::TrainData data(o, *par);
  llama::LlamaFamily family(o, device, *par, data);
  train::TrainerParts parts = family.parts();
  const std::unique_ptr<trace::TraceStepObserver> tracer =
      trace::trace_if_asked(o, device, *par, parts);  // --trace: every rank (a collective)
  train::Trainer trainer(o, dir, std::move(parts));
  trainer.resume();
  trainer.print_resume();
  family.print_plan();
  std::fflush(stdout);
  const train::TrainerResult r = trainer.run();
  trace::write_trace(tracer.get(), o.trace);  // every rank; rank 0 merges
  trainer.print_memory(device);
  // Rank 0 saves the model in Hugging Face's format and sums up, when something was trained.
  const bool report = par->is_logging_rank() && r.start != o.steps;
  const std::string hf = dir.file("hf");
  if (report && r.status == 0) llama::save_hf(family.model(), hf);
  if (report) trainer.print_summary(r, r.status == 0 ? "Hugging Face model: " + hf : "");
  par->finish();  // last: nothing may use the process group afterwards
  return r.status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(tt::train::TrainConfig::parse(argc, argv, "train_llama"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_llama: %s\n", e.what());
    return 1;
  }
}
