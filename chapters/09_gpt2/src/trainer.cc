// The training loop (tt/trainer.h).
#include "tt/trainer.h"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "tt/backend.h"
#include "tt/checkpoint.h"
#include "tt/csv.h"
#include "tt/error.h"
#include "tt/progress.h"
#include "tt/timer.h"
#include "tt/train_setup.h"

namespace tt::train {

namespace {

constexpr auto fmt = format_number;

/// Peak resident set size of this process in bytes (VmHWM of /proc/self/status; 0 where that
/// file is missing).
int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6)) * 1024;  // "... kB"
  }
  return 0;
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, RunDir& dir, TrainerParts parts)
    : config_(config), dir_(dir), parts_(std::move(parts)) {
  TT_CHECK(parts_.model != nullptr && parts_.optimizer != nullptr && parts_.parallel != nullptr &&
               parts_.schedule != nullptr && parts_.next_train && parts_.step && parts_.evaluate,
           "Trainer: the model, optimizer, parallel strategy, schedule, next_train, step and "
           "evaluate parts are required");
  parts_.parallel->set_checkpoint_metadata(
      config_metadata(config_, parts_.parallel->data_world_size()));
}

int64_t Trainer::resume() {
  TT_CHECK(!resumed_, "Trainer::resume: call it once");
  resumed_ = true;
  if (!config_.resume) return start_ = 0;
  gpt2::ParallelStrategy& par = *parts_.parallel;
  const int64_t ranks = par.data_world_size();
  const std::string path = dir_.checkpoint_path();
  // The run's record first: nothing is loaded into the model when the options differ.
  const std::string recorded =
      recorded_config(ckpt::checkpoint_metadata(ckpt::read_file(path), path));
  if (recorded.empty()) {
    note_ = "note: " + path +
            " holds no record of its run's options (written before runs were recorded): "
            "they are not checked";
  } else {
    const std::vector<std::string> conflicts = resume_conflicts(recorded, config_, ranks);
    if (!conflicts.empty()) {
      std::string list;
      for (const std::string& c : conflicts) list += "\n  " + c;
      TT_THROW("--resume: these options differ from the run in ", path, ":", list,
               "\n(the model, the data order and the batch define a run and cannot change; start "
               "a new run with another --out, or with --overwrite)");
    }
  }
  par.load_checkpoint(path, *parts_.model, *parts_.optimizer);
  start_ = parts_.optimizer->step_count();
  TT_CHECK(start_ <= config_.steps, "--resume: the checkpoint ", path, " is at step ", start_,
           ", beyond --steps ", config_.steps,
           ": nothing to train (to train longer: --steps N --override steps with N > ", start_,
           ")");
  if (start_ == config_.steps) {
    note_ += std::string(note_.empty() ? "" : "\n") + "note: the checkpoint is at step " +
             std::to_string(start_) + " = --steps: the run is complete, nothing to train (to " +
             "train longer: --steps N --override steps)";
  }
  // Replay the data order: the same batches as an uninterrupted run.
  const int64_t accum = config_.accumulation(ranks);
  for (int64_t i = 0; i < start_ * accum; ++i) parts_.next_train();
  if (par.is_logging_rank()) dir_.cut_log_after(start_);
  return start_;
}

void Trainer::print_resume() const {
  if (config_.resume) {
    std::printf("resumed from %s at step %lld\n", dir_.checkpoint_path().c_str(),
                static_cast<long long>(start_));
  }
  if (!note_.empty()) std::printf("%s\n", note_.c_str());
}

TrainerResult Trainer::run() {
  namespace fs = std::filesystem;
  if (!resumed_) resume();
  gpt2::ParallelStrategy& par = *parts_.parallel;
  optim::Optimizer& opt = *parts_.optimizer;
  const TrainConfig& o = config_;
  const bool logging = par.is_logging_rank();
  const int64_t start = start_;
  TrainerResult result;
  result.start = result.step = start;
  if (start == o.steps) return result;  // complete (resume_note says so)

  // Rank 0 writes the run log; the other ranks write nothing.
  CsvWriter* csv = logging ? &dir_.open_log({"step", "loss", "lr", "grad_norm", "ms", "tok_per_s",
                                             "val_loss", "mfu"},
                                            o.resume && start > 0)
                           : nullptr;
  // The latest validation loss and its step.
  double val_loss = NAN;
  int64_t val_step = -1;
  auto sample_now = [&](int64_t step, ProgressBar* bar) {
    if (!logging || !parts_.sample) return;  // sampling is local to a rank: rank 0 shows it
    const std::string text = parts_.sample(step);
    const std::string line = "sample @ step " + std::to_string(step) + ": " + text;
    result.samples.emplace_back(
        fmt("step %5.0f, val loss ", static_cast<double>(step)) +
            (val_step == step ? fmt("%.4f", val_loss) : std::string("  -   ")),
        text);
    dir_.add_sample(step, text);
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
    const double v = val_loss = parts_.evaluate();
    val_step = 0;
    std::printf("step 0: val loss %.4f%s\n", v, parts_.start_note.c_str());
    if (csv != nullptr) csv->row({"0", "", "", "", "", "", CsvWriter::num(v), ""});
    sample_now(0, nullptr);
  }

  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> devnull(std::fopen("/dev/null", "w"),
                                                                &std::fclose);
  ProgressBar bar(o.steps - start, "train", logging ? stderr : devnull.get());
  Timer total;
  int64_t step = start;
  const std::vector<Tensor> params = parts_.model->parameters();
  const std::string ckpt_path = dir_.checkpoint_path();
  // Non-finite policy (tt/train.h): stop at once, write nothing more, exit with status 3.
  auto stop_nonfinite = [&](const std::string& what) {
    bar.println("step " + std::to_string(step + 1) + ": " + what +
                    "; stopping. The last good checkpoint is " +
                    (fs::exists(ckpt_path) ? ckpt_path : std::string("(none written yet)")),
                stderr);
    result.status = 3;
  };
  while (step < o.steps) {
    parts_.schedule->apply(opt);
    const double lr = opt.lr();
    const bool profiled = parts_.profiler != nullptr && step + 1 == o.profile_step;
    if (profiled) parts_.profiler->begin();
    if (parts_.observer != nullptr) parts_.observer->begin_step(step + 1);
    Timer t;
    const gpt2::TrainStepResult r = parts_.step(parts_.next_train);  // r.tokens: all ranks
    const double ms = t.elapsed_ms();
    if (parts_.observer != nullptr) parts_.observer->end_step(step + 1);
    if (profiled) bar.println(parts_.profiler->end());
    const std::string loss_norm =
        "loss " + fmt("%g", r.loss) + ", grad norm " + fmt("%g", r.grad_norm);
    if (!r.finite) {
      stop_nonfinite(loss_norm + " is not finite (the update was skipped)");
      break;
    }
    if (!gpt2::all_finite(params)) {
      stop_nonfinite(loss_norm + " was finite, but the update with lr " + fmt("%g", lr) +
                     " made the parameters NaN/Inf");
      break;
    }
    ++step;
    const double tok_s = static_cast<double>(r.tokens) / (ms / 1e3);
    const double mfu =
        parts_.peak_flops > 0 ? parts_.flops_per_token * tok_s / parts_.peak_flops : 0;
    // Under --max-seconds every rank must stop at the same step (checkpoints and evaluations
    // are collectives): the ranks agree on the longest elapsed time.
    const double elapsed = o.max_seconds > 0 ? par.maximum(total.elapsed_s()) : total.elapsed_s();
    const bool out_of_time = o.max_seconds > 0 && elapsed > o.max_seconds;
    std::string val_cell;
    if (o.eval_every > 0 && (step % o.eval_every == 0 || step == o.steps || out_of_time)) {
      const double v = val_loss = parts_.evaluate();
      val_step = step;
      val_cell = CsvWriter::num(v);
      bar.println("step " + std::to_string(step) + ": val loss " + fmt("%.4f", v));
    }
    if (csv != nullptr) {
      csv->row({std::to_string(step), CsvWriter::num(r.loss), CsvWriter::num(lr),
                CsvWriter::num(r.grad_norm), CsvWriter::num(ms), CsvWriter::num(tok_s), val_cell,
                parts_.peak_flops > 0 ? CsvWriter::num(mfu) : ""});
    }
    if (o.log_every > 0 && (step % o.log_every == 0 || step == o.steps)) {
      std::string line = "step " + std::to_string(step) + "/" + std::to_string(o.steps) +
                         " | loss " + fmt("%.4f", r.loss) + " | lr " + fmt("%.2e", lr) +
                         " | norm " + fmt("%.3f", r.grad_norm) + " | " + fmt("%.0f ms", ms) +
                         " | " + fmt("%.0f tok/s", tok_s);
      if (parts_.peak_flops > 0) line += " | MFU " + fmt("%.1f%%", 100 * mfu);
      bar.println(line);
    }
    if (step == o.kill_after_step) {  // a crash between two checkpoints
      // First the memory line a normal end prints (a measured run killed to skip its final
      // checkpoint still reports it; every rank reaches this step).
      const std::vector<Tensor> params = parts_.model->parameters();
      if (!params.empty()) print_memory(params.front().device());
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    bar.update(step - start, "loss " + fmt("%.3f", r.loss));
    if (wants_sample(step, elapsed, step == o.steps || out_of_time)) sample_now(step, &bar);
    if ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == o.steps ||
        out_of_time) {
      par.save_checkpoint(ckpt_path, *parts_.model, opt);  // every rank takes part; rank 0 writes
    }
    if (out_of_time) {
      bar.println("stopping after --max-seconds " + fmt("%g", o.max_seconds) + " at step " +
                  std::to_string(step) + " (resume with --resume)");
      result.out_of_time = true;
      break;
    }
  }
  bar.finish();
  result.step = step;
  result.seconds = total.elapsed_s();
  return result;
}

void Trainer::print_memory(Device device) const {
  gpt2::ParallelStrategy& par = *parts_.parallel;
  const double mib = 1024.0 * 1024.0;
  const double peak_tensors = par.maximum(
      static_cast<double>(backend_for(device.type).allocator(device.index).stats().peak_allocated));
  const double peak_rss = par.maximum(static_cast<double>(peak_rss_bytes()));
  const double opt_state =
      par.maximum(static_cast<double>(par.optimizer_state_bytes(*parts_.optimizer)));
  std::printf(
      "memory per rank (max over %d): peak tensors %.1f MiB, peak RSS %.1f MiB, optimizer "
      "state %.2f MiB (%s)\n",
      par.world_size(), peak_tensors / mib, peak_rss / mib, opt_state / mib, par.name().c_str());
}

void Trainer::print_summary(const TrainerResult& r, const std::string& model_file) const {
  if (!parts_.parallel->is_logging_rank()) return;
  const bool png = dir_.plot_loss(parts_.title);
  std::printf("trained %lld steps in %s\n", static_cast<long long>(r.step - r.start),
              format_duration(r.seconds).c_str());
  std::printf("run log: %s\n", dir_.log_path().c_str());
  std::printf("loss curve: %s\n", png ? dir_.file("loss.png").c_str() : "(gnuplot not found)");
  if (r.status == 0) {
    std::printf("checkpoint: %s (resume with --resume)%s%s\n", dir_.checkpoint_path().c_str(),
                model_file.empty() ? "" : ", ", model_file.c_str());
  }
  if (r.samples.size() >= 2) {  // what the model learned, one sample above the other
    std::printf("\nfirst and last sample (temperature %g, top-k %lld):\n", config_.temperature,
                static_cast<long long>(config_.top_k));
    for (const auto* s : {&r.samples.front(), &r.samples.back()}) {
      std::printf("  %s: %s\n", s->first.c_str(), s->second.c_str());
    }
  }
}

}  // namespace tt::train
