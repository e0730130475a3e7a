// Chapter 12 demo: data-parallel training of an MLP on a synthetic 4-class problem, with DDP +
// AdamW (--zero 0) or ZeRO-1 AdamW (--zero 1), under mpirun or as one process:
//   mpirun -np 4 build/bin/tt_ddp_demo --zero 1
// Rank 0 prints the loss of the global batch, every rank's measured optimizer-state memory and
// the bytes each rank sent; with DDP also the bucket timeline of the last step: when each
// bucket's gradients were final and when its all-reduce started and finished, in ms from the
// start of backward (--bucket-kb sets the bucket capacity; small values give several buckets).
// On CUDA also the GPU's own timeline, from timing events: when each bucket's all-reduce ran on
// the NCCL stream and when backward's kernels ended, and how much of each all-reduce was hidden
// behind them. --layers/--hidden make a deeper, wider MLP (a backward of several ms on a GPU).
// --trace FILE writes the last --trace-steps steps (default 3) as a Chrome trace (tt/trace.h;
// open it in ui.perfetto.dev or chrome://tracing): one process per rank, the host's forward /
// backward / step phases, every kernel, and each bucket's all-reduce, so the overlap of the
// all-reduces with backward is visible. With TT_NVTX=1 ops and steps are NVTX ranges (tt/nvtx.h).
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "tt/backend.h"
#include "tt/cli.h"
#include "tt/ddp.h"
#include "tt/functional.h"
#include "tt/nn.h"
#include "tt/timer.h"
#include "tt/trace.h"
#include "tt/zero.h"

using namespace tt;

namespace {

/// Rows [begin, begin+n) of the global batch of step `step`: 256-dim points whose class is the
/// quadrant of (x0, x1). The global batch is the same on every rank (same seed).
std::pair<Tensor, Tensor> batch_rows(int64_t step, int64_t global, int64_t begin, int64_t n) {
  Generator gen(1000 + static_cast<uint64_t>(step));
  Tensor x = randn({global, 256}, gen);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < global; ++i) {
    y.push_back((x.at<float>({i, 0}) > 0 ? 1 : 0) + (x.at<float>({i, 1}) > 0 ? 2 : 0));
  }
  return {x.narrow(0, begin, n).contiguous(),
          from_vector<int64_t>(y, {global}).narrow(0, begin, n).contiguous()};
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

/// The bucket timeline of the last backward, relative to its start `t0`; `backward_end` is when
/// autograd::backward returned.
void print_timeline(const dist::Reducer& reducer, Clock::time_point t0,
                    Clock::time_point backward_end, bool cuda) {
  const double end = ms_since(t0, backward_end);
  std::printf(
      "bucket timeline of the last step (ms from the start of backward; backward took %.3f ms, "
      "sync_gradients returned at %.3f ms):\n",
      end, ms_since(t0, reducer.finalize_returned()));
  if (cuda) {
    std::printf(
        "(CUDA: host clock; kernels and NCCL run asynchronously, so 'ready' and 'started' are "
        "when the work was queued and 'finished' when a poll first saw NCCL's event)\n");
  }
  std::printf("bucket  params      KiB    ready  started  finished  hidden\n");
  const auto& buckets = reducer.buckets();
  const auto& timeline = reducer.timeline();
  for (std::size_t b = 0; b < timeline.size(); ++b) {
    const dist::BucketTiming& t = timeline[b];
    const double finished = ms_since(t0, t.finished);
    std::printf("%6zu  %6zu  %7.1f  %7.3f  %7.3f  %8.3f  %s\n", b, buckets[b].entries.size(),
                static_cast<double>(buckets[b].numel * 4) / 1024.0, ms_since(t0, t.ready),
                ms_since(t0, t.started), finished,
                finished <= end ? "yes" : "no (finished after backward)");
  }
}

/// The GPU timeline of the last backward (CUDA): ms of GPU time from `origin` (a mark queued
/// just before backward) to the start and end of each bucket's all-reduce on the NCCL stream and
/// to the end of backward's kernels; "hidden" is the part of each all-reduce before that end.
void print_device_timeline(const dist::Reducer& reducer, const dist::DeviceMark& origin,
                           Clock::time_point t0) {
  const double end = reducer.backward_end_mark()->ms_since(origin);
  std::printf(
      "GPU timeline of the last step (CUDA events; ms of GPU time from the start of backward): "
      "backward's kernels ended at %.3f ms\n",
      end);
  std::printf("bucket        bytes  ready(host)  comm start  comm end  hidden\n");
  const auto& buckets = reducer.buckets();
  const auto& timeline = reducer.timeline();
  double hidden_ms = 0, comm_ms = 0;
  for (std::size_t b = 0; b < timeline.size(); ++b) {
    const dist::BucketTiming& t = timeline[b];
    const double begin = t.device_begin->ms_since(origin), finish = t.device_end->ms_since(origin);
    const double hidden = dist::hidden_fraction(begin, finish, end);
    hidden_ms += hidden * (finish - begin);
    comm_ms += finish - begin;
    std::printf("%6zu  %11lld  %11.3f  %10.3f  %8.3f  %5.1f %%\n", b,
                static_cast<long long>(buckets[b].numel * 4), ms_since(t0, t.ready), begin, finish,
                100.0 * hidden);
  }
  std::printf("all-reduce GPU time %.3f ms, of which %.3f ms (%.1f %%) before backward ended\n",
              comm_ms, hidden_ms, comm_ms > 0 ? 100.0 * hidden_ms / comm_ms : 100.0);
}

}  // namespace

int main(int argc, char** argv) {
  int zero = 0;
  int64_t steps = 30, global_batch = 64, bucket_kb = dist::kDefaultBucketCapBytes / 1024;
  int64_t hidden = 1024, layers = 1;
  std::string device_name = "cpu", trace_path;
  int64_t trace_steps = 3;
  ArgParser args("tt_ddp_demo",
                 "usage: [mpirun -np N] tt_ddp_demo [--zero 0|1] [--steps 30] [--batch 64] "
                 "[--bucket-kb 25600] [--device cpu|cuda] [--hidden 1024] [--layers 1]\n"
                 "  --batch is the GLOBAL batch (rows over all ranks); it must divide by N\n"
                 "  --bucket-kb is DDP's bucket capacity in KiB (the timeline shows the buckets)\n"
                 "  --device cuda trains on GPU <local rank> (collectives through NCCL)\n"
                 "  --hidden H --layers L: 256-H-...-H-4 with L hidden layers (GELU)\n"
                 "  --trace FILE [--trace-steps 3]: the last steps as a Chrome trace (Perfetto)\n");
  args.option("--zero", &zero)
      .option("--steps", &steps)
      .option("--batch", &global_batch)
      .option("--bucket-kb", &bucket_kb)
      .option("--device", &device_name)
      .option("--hidden", &hidden)
      .option("--layers", &layers)
      .option("--trace", &trace_path)
      .option("--trace-steps", &trace_steps);
  args.parse(argc, argv);
  try {
    dist::ProcessGroup& g = dist::world();
    const int N = g.world_size(), r = g.rank();
    TT_CHECK(global_batch % N == 0, "tt_ddp_demo: --batch ", global_batch,
             " does not divide by the ", N, " ranks");
    const int64_t rows = global_batch / N;
    Generator init(static_cast<uint64_t>(r));  // different per rank: broadcast makes them equal
    TT_CHECK(hidden > 0 && layers > 0, "tt_ddp_demo: --hidden ", hidden, " and --layers ", layers,
             " must be positive");
    std::shared_ptr<nn::Module> model;
    if (layers == 1) {
      model = std::make_shared<nn::MLP>(256, hidden, 4, init);
    } else {  // the same first and last layers with L - 1 hidden-to-hidden layers between
      auto seq = std::make_shared<nn::Sequential>();
      for (int64_t l = 0; l < layers; ++l) {
        seq->push_back(std::make_shared<nn::Linear>(l == 0 ? 256 : hidden, hidden, true, init));
        seq->push_back(std::make_shared<nn::GELU>());
      }
      seq->push_back(std::make_shared<nn::Linear>(hidden, 4, true, init));
      model = seq;
    }
    Device device = Device::parse(device_name);
    if (device.is_cuda()) device = Device::cuda(g.local_rank());  // one GPU per rank
    model->to(device);
    Allocator& allocator = backend_for(device.type).allocator(device.index);
    const int64_t P = model->num_parameters();
    const optim::AdamWOptions adamw{.lr = 1e-3, .weight_decay = 0.0};

    // DDP (its bucket buffers: 4P bytes) first, then the optimizer, whose construction keeps
    // exactly its moments allocated: that difference is the measured optimizer state.
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    if (zero == 0) {
      ddp = std::make_unique<dist::DistributedDataParallel>(
          model, g, dist::DdpOptions{.bucket_cap_bytes = bucket_kb * 1024});
    }
    const std::size_t before = allocator.stats().allocated;
    std::unique_ptr<optim::AdamW> plain;
    std::unique_ptr<dist::ZeroAdamW> sharded;
    if (zero != 0) {
      sharded = std::make_unique<dist::ZeroAdamW>(model->parameters(), adamw, g);
    } else {
      plain = std::make_unique<optim::AdamW>(model->parameters(), adamw);
    }
    const auto state = static_cast<int64_t>(allocator.stats().allocated - before);
    if (r == 0) {
      // "256-1024-4", or "256-8x2048-4" for 8 hidden layers.
      const std::string widths =
          "256-" + (layers > 1 ? std::to_string(layers) + "x" : "") + std::to_string(hidden) + "-4";
      std::printf(
          "tt_ddp_demo: %d rank(s) (%s%s), %s, MLP %s (%lld parameters, %.2f MiB), "
          "global batch %lld = %d x %lld rows\n",
          N, g.backend_name().c_str(), device.is_cuda() ? " + nccl on cuda" : "",
          zero ? "ZeRO-1 AdamW" : "DDP + AdamW", widths.c_str(), static_cast<long long>(P),
          mib(4 * P), static_cast<long long>(global_batch), N, static_cast<long long>(rows));
    }
    // Every rank's measured state, printed by rank 0.
    Tensor mine = full({1}, static_cast<double>(state), {.dtype = DType::kInt64});
    Tensor all = zeros({N}, {.dtype = DType::kInt64});
    g.all_gather(all, mine);
    if (r == 0) {
      for (int q = 0; q < N; ++q) {
        std::printf(
            "rank %d: optimizer state %.2f MiB (measured; AdamW on one process: %.2f MiB)\n", q,
            mib(all.at<int64_t>({q})), mib(8 * P));
      }
    }

    TT_CHECK(trace_steps > 0, "tt_ddp_demo: --trace-steps ", trace_steps, " must be positive");
    std::unique_ptr<trace::TraceWriter> tracer;
    if (!trace_path.empty()) tracer = std::make_unique<trace::TraceWriter>(device, &g);
    Timer timer;
    Clock::time_point backward_start, backward_end;
    std::shared_ptr<dist::DeviceMark> backward_mark;  // CUDA: the GPU's start of backward
    for (int64_t step = 0; step < steps; ++step) {
      trace::TraceWriter* trace = tracer && step >= steps - trace_steps ? tracer.get() : nullptr;
      if (trace) trace->begin_step(step);
      auto [x_cpu, y_cpu] = batch_rows(step, global_batch, r * rows, rows);
      const Tensor x = x_cpu.to(device), y = y_cpu.to(device);
      Tensor loss;
      {
        std::optional<trace::TraceWriter::Span> span;
        if (trace) span.emplace(*trace, "forward");
        loss = cross_entropy(model->forward(x), y);
      }
      if (ddp) backward_mark = g.mark(loss);  // nullptr on the CPU
      backward_start = Clock::now();
      {
        std::optional<trace::TraceWriter::Span> span;
        if (trace) span.emplace(*trace, "backward");
        autograd::backward(loss);  // with DDP, the hooks start bucket all-reduces in here
      }
      backward_end = Clock::now();
      std::optional<trace::TraceWriter::Span> step_span;
      if (trace) step_span.emplace(*trace, sharded ? "ZeRO-1 step" : "sync_gradients + AdamW");
      if (sharded) {
        sharded->step();
        sharded->zero_grad();
      } else {
        ddp->sync_gradients();
        plain->step();
        plain->zero_grad();
      }
      step_span.reset();
      if (trace) trace->end_step(ddp ? &ddp->reducer() : nullptr);
      Tensor l = full({1}, loss.item(), {.dtype = DType::kFloat64});
      g.all_reduce(l, dist::ReduceOp::kAvg);  // the loss of the global batch
      if (r == 0 && (step % 5 == 0 || step + 1 == steps)) {
        std::printf("step %3lld  loss %.4f\n", static_cast<long long>(step), l.item());
      }
    }
    const double ms = timer.elapsed_ms() / static_cast<double>(steps);
    if (r == 0) {
      std::printf(
          "done: %lld steps, %.1f ms/step; rank 0 passed %.2f MiB to collectives, "
          "%.2f MiB sent with ring algorithms\n",
          static_cast<long long>(steps), ms, mib(g.bytes_communicated()), mib(g.ring_bytes()));
      if (ddp) print_timeline(ddp->reducer(), backward_start, backward_end, device.is_cuda());
      if (ddp && backward_mark)
        print_device_timeline(ddp->reducer(), *backward_mark, backward_start);
    }
    if (tracer) {
      tracer->write(trace_path);
      if (r == 0) {
        std::printf("trace of the last %lld step(s) written to %s (open in ui.perfetto.dev)\n",
                    static_cast<long long>(std::min(trace_steps, steps)), trace_path.c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tt_ddp_demo: %s\n", e.what());
    return 1;
  }
  dist::finalize();
  return 0;
}
