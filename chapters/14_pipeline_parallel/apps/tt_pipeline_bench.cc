// tt_pipeline_bench: trains a GPT-2 shape as a pipeline (one stage per rank) on random tokens
// and measures what chapter 14 teaches: the bubble fraction from each rank's timeline against
// (p-1)/(v m + p - 1) and the idealized replay, tokens per second, peak activation chunks in
// flight and device memory per rank: what stays between steps (the rank's parameters and AdamW
// moments, "static"), its gradients, the allocator's peak, and the peak above static +
// gradients (the activations kept for the backward, their gradients in flight, workspaces:
// what AFAB and 1F1B differ in). Writes each rank's measured and replayed timelines (CSV, a
// gnuplot script, a PNG when gnuplot is installed) into --timeline-dir. --partition weighs the
// blocks before they are cut into stages: flops (the FLOP model, the default), measured (each
// part timed on the device with --ops, tt::pp::measure_gpt2_costs, agreed by the ranks) or
// uniform (--uniform-costs, kept for older scripts); the plan line prints the costs, the cut and
// the predicted largest stage against the mean. It also prints each rank's busy time and idle
// share, the idle share of the busiest rank (the slowest stage: its idle time is the fill and the
// drain alone) and the imbalance 1 - mean/max busy time (what the faster stages wait for it).
//
//   mpirun -np 4 tt_pipeline_bench --schedule 1f1b --micro-batches 8 --device cuda
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tt/backend.h"
#include "tt/cli.h"
#include "tt/dist.h"
#include "tt/generator.h"
#include "tt/pipeline.h"
#include "tt/timer.h"

namespace {

struct Args {
  int layers = 12, heads = 12, channels = 768, vocab = 50257;
  int64_t batch = 4, seq = 1024;
  int micro_batches = 8, chunks = 1, steps = 6, warmup = 2;
  std::string schedule = "1f1b", device = "cpu", ops = "reference", timeline_dir;
  std::string partition = "flops";
  bool uniform = false;  // --uniform-costs: --partition uniform
};

int run(const Args& a) {
  tt::dist::ProcessGroup& world = tt::dist::world();
  const int p = world.world_size(), rank = world.rank();
  tt::gpt2::GPT2Config config;
  config.n_layer = a.layers;
  config.n_head = a.heads;
  config.n_embd = a.channels;
  config.vocab_size = a.vocab;
  config.padded_vocab_size = (a.vocab + 127) / 128 * 128;
  config.block_size = a.seq;
  const tt::Device device =
      a.device == "cuda" ? tt::Device::cuda(world.local_rank()) : tt::Device::cpu();
  tt::pp::PipelineOptions options;
  options.schedule = tt::pp::parse_schedule_kind(a.schedule);
  options.micro_batches = a.micro_batches;
  options.chunks = a.chunks;
  options.timeline = true;
  // The costs on every rank alike (measured: a collective of the world, before the model).
  const tt::pp::PartitionKind partition =
      tt::pp::parse_partition_kind(a.uniform ? "uniform" : a.partition);
  const tt::gpt2::ModelOps ops = tt::gpt2::model_ops(a.ops);
  options.block_costs =
      tt::pp::gpt2_partition_costs(partition, world, config, device, ops, a.batch, a.seq);
  if (rank == 0) {
    const tt::pp::PipelineShape plan{p, a.micro_batches, a.chunks};
    std::printf("%s\n",
                tt::pp::describe_partition(
                    partition, options.block_costs,
                    tt::pp::gpt2_stage_layers(config, plan.virtual_stages(), options.block_costs))
                    .c_str());
    std::fflush(stdout);
  }
  tt::gpt2::GPT2 model(config, 1337);
  // This rank's stages only, before the model moves to its device (as train_gpt2 --pp does).
  const tt::pp::PipelineShape shape{p, a.micro_batches, a.chunks};
  tt::pp::GPT2Stages(model, shape, rank,
                     tt::pp::gpt2_stage_layers(config, shape.virtual_stages(), options.block_costs))
      .keep_only_own_parameters();
  model.to(device);
  model.set_ops(ops);  // e.g. chapter 10's "fast" (FlashAttention), chapter 11's "bf16"
  tt::pp::PipelineTrainer trainer(model, world, nullptr, options, a.batch, a.seq);
  tt::optim::AdamWOptions adam;
  adam.lr = 1e-4;
  tt::optim::AdamW optimizer(trainer.param_groups(0.1), adam);
  const tt::Allocator& allocator = tt::backend_for(device.type).allocator(device.index);
  // Parameters and moments: what this rank holds before its first step.
  const double static_bytes = static_cast<double>(allocator.stats().allocated);
  tt::Generator gen(42);
  const auto next_batch = [&] {
    std::vector<int64_t> tokens(static_cast<std::size_t>(a.batch * (a.seq + 1)));
    for (int64_t& t : tokens)
      t = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(config.vocab_size));
    std::vector<int64_t> x, y;
    for (int64_t b = 0; b < a.batch; ++b) {
      for (int64_t t = 0; t < a.seq; ++t) {
        x.push_back(tokens[static_cast<std::size_t>(b * (a.seq + 1) + t)]);
        y.push_back(tokens[static_cast<std::size_t>(b * (a.seq + 1) + t + 1)]);
      }
    }
    return tt::Batch{tt::from_vector(x, {a.batch, a.seq}), tt::from_vector(y, {a.batch, a.seq})};
  };

  double ms = 0, bubble = 0, busy = 0;
  int measured = 0;
  for (int s = 0; s < a.warmup + a.steps; ++s) {
    const auto r = trainer.step(optimizer, next_batch);
    if (s < a.warmup) continue;
    const tt::pp::Timeline& t = trainer.last().timeline;
    ms += t.span_ms;
    bubble += t.bubble();
    busy += t.busy_ms();
    ++measured;
    if (rank == 0 && s == a.warmup + a.steps - 1) std::printf("last loss %.4f\n", r.loss);
  }
  // Each rank's mean busy time, idle share and step time, on every rank (one all-gather): the
  // means over the ranks, and the busiest rank, the pipeline's slowest stage. Its idle share is
  // the bubble of the fill and the drain alone (theory's quantity, which assumes equal stages);
  // the mean over the ranks adds what the faster stages wait for the slowest, 1 - mean busy /
  // max busy of the work (the imbalance).
  const tt::Tensor per_rank = tt::empty({3 * p}, {.dtype = tt::DType::kFloat64});
  world.all_gather(
      per_rank, tt::from_vector<double>({busy / measured, bubble / measured, ms / measured}, {3}));
  double busy_max = 0, busy_sum = 0, bubble_critical = 0, bubble_sum = 0, ms_sum = 0;
  for (int r = 0; r < p; ++r) {
    const double* x = per_rank.data<double>() + 3 * r;
    busy_sum += x[0];
    bubble_sum += x[1];
    ms_sum += x[2];
    if (x[0] > busy_max) {
      busy_max = x[0];
      bubble_critical = x[1];
    }
  }
  const double step_ms = ms_sum / p, measured_bubble = bubble_sum / p;
  const double imbalance = busy_max > 0 ? 1.0 - busy_sum / p / busy_max : 0.0;
  std::vector<tt::pp::RankSchedule> all;
  for (int r = 0; r < p; ++r) all.push_back(tt::pp::make_schedule(options.schedule, shape, r));
  const auto replay = tt::pp::check_schedules(all, shape, 1.0 / a.chunks, 2.0 / a.chunks);
  // Memory per rank (MiB): static, gradients, allocator peak, peak above static + gradients.
  double grad_bytes = 0;
  for (const tt::Tensor& t : trainer.stages().parameters()) {
    if (t.grad().defined())
      grad_bytes += static_cast<double>(t.grad().numel()) * tt::dtype_size(t.grad().dtype());
  }
  const double mib = 1024.0 * 1024.0, peak = static_cast<double>(allocator.stats().peak_allocated);
  const tt::Tensor mine = tt::from_vector<double>(
      {static_bytes / mib, grad_bytes / mib, peak / mib, (peak - static_bytes - grad_bytes) / mib,
       double(trainer.last().peak_in_flight)},
      {5});
  const tt::Tensor memory = tt::empty({5 * p}, {.dtype = tt::DType::kFloat64});
  world.all_gather(memory, mine);
  if (rank == 0) {
    const double* m = memory.data<double>();
    double peak_sum = 0, above_max = 0, in_flight_max = 0;
    for (int r = 0; r < p; ++r) {
      const double* x = m + 5 * r;
      std::printf(
          "memory rank %d: static %.1f MiB (parameters, moments), gradients %.1f MiB, peak %.1f "
          "MiB, above static + gradients %.1f MiB (activations in flight); peak chunks in "
          "flight %.0f\n",
          r, x[0], x[1], x[2], x[3], x[4]);
      peak_sum += x[2];
      above_max = std::max(above_max, x[3]);
      in_flight_max = std::max(in_flight_max, x[4]);
    }
    const double theory = tt::pp::bubble_fraction(shape.stages, shape.micro_batches, shape.chunks);
    const double replayed = tt::pp::simulated_bubble(replay);
    const double tok_s = static_cast<double>(a.batch * a.seq * a.micro_batches) / (step_ms / 1e3);
    std::printf("ranks' busy ms / idle share:");
    for (int r = 0; r < p; ++r) {
      std::printf(" %d: %.2f / %.4f", r, per_rank.data<double>()[3 * r],
                  per_rank.data<double>()[3 * r + 1]);
    }
    std::printf("; bubble of the busiest rank %.4f, imbalance 1 - mean/max busy %.4f\n",
                bubble_critical, imbalance);
    std::printf(
        "pipeline %s %s (%s, B=%lld T=%lld, ops %s, partition %s): bubble measured %.4f, theory %.4f, replay "
        "%.4f; step %.2f ms, %.0f tok/s; mean peak memory %.1f MiB; activations above static + "
        "gradients: rank 0 %.1f MiB, max %.1f MiB; peak chunks in flight: rank 0 %.0f, max "
        "%.0f\n",
        a.schedule.c_str(), shape.str().c_str(), config.str().c_str(),
        static_cast<long long>(a.batch), static_cast<long long>(a.seq), a.ops.c_str(),
        tt::pp::partition_kind_name(partition), measured_bubble, theory, replayed, step_ms, tok_s,
        peak_sum / p, m[3], above_max, m[4], in_flight_max);
    // The same numbers as one CSV row (.devrun/ch14b.sh collects them).
    std::printf(
        "csv,%d,%d,%lld,%s,%s,%d,%d,%d,%.5f,%.5f,%.5f,%.3f,%.0f,%.1f,%.1f,%.1f,%.1f,%.0f,%.5f,%.5f\n",
        a.layers, a.channels, static_cast<long long>(a.batch), a.ops.c_str(), a.schedule.c_str(), p,
        a.micro_batches, a.chunks, measured_bubble, theory, replayed, step_ms, tok_s, peak_sum / p,
        m[0], m[3], above_max, m[4], bubble_critical, imbalance);
  }
  if (!a.timeline_dir.empty()) {
    const std::string base = a.timeline_dir + "/" + a.schedule + "_p" + std::to_string(p) + "_m" +
                             std::to_string(a.micro_batches) + "_rank" + std::to_string(rank);
    tt::pp::write_timeline_csv(trainer.last().timeline, base + ".csv");
    tt::pp::write_gnuplot_script(
        base + ".gnuplot", base + ".csv", base + ".png",
        "measured: " + a.schedule + " " + shape.str() + " rank " + std::to_string(rank));
    tt::pp::run_gnuplot(base + ".gnuplot");
    const tt::pp::Timeline ideal = tt::pp::simulated_timeline(replay[rank], rank);
    tt::pp::write_timeline_csv(ideal, base + "_theory.csv");
    tt::pp::write_gnuplot_script(base + "_theory.gnuplot", base + "_theory.csv",
                                 base + "_theory.png",
                                 "theory (t_b = 2 t_f): " + a.schedule + " " + shape.str() +
                                     " rank " + std::to_string(rank));
    tt::pp::run_gnuplot(base + "_theory.gnuplot");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  tt::ArgParser args(
      "tt_pipeline_bench",
      "usage: mpirun -np P tt_pipeline_bench [--schedule afab|1f1b|interleaved]\n"
      "  [--micro-batches M] [--chunks V] [--layers L] [--heads NH] [--channels C] [--vocab V]\n"
      "  [--batch B] [--seq T] [--steps N] [--warmup W] [--device cpu|cuda]\n"
      "  [--ops reference|fast|bf16] (the blocks' attention, linear layers and loss)\n"
      "  [--partition flops|measured|uniform] (how the blocks are weighed before the cut;\n"
      "  --uniform-costs: --partition uniform) [--timeline-dir DIR]\n");
  args.option("--schedule", &a.schedule)
      .option("--micro-batches", &a.micro_batches)
      .option("--chunks", &a.chunks)
      .option("--layers", &a.layers)
      .option("--heads", &a.heads)
      .option("--channels", &a.channels)
      .option("--vocab", &a.vocab)
      .option("--batch", &a.batch)
      .option("--seq", &a.seq)
      .option("--steps", &a.steps)
      .option("--warmup", &a.warmup)
      .option("--device", &a.device)
      .option("--ops", &a.ops)
      .option("--timeline-dir", &a.timeline_dir)
      .option("--partition", &a.partition)
      .flag("--uniform-costs", &a.uniform);
  args.parse(argc, argv);
  return tt::dist::run_on_every_rank("tt_pipeline_bench", [&] { return run(a); });
}
