// Pipeline parallelism (tt/pipeline.h): stage layouts of GPT-2, the executor and its timeline,
// GPT-2's stages and the pipeline's training step. partition_by_cost (ch14.3) and
// exchange_ops (ch14.2) are exercises (solutions/14_pipeline_parallel/).
#include "tt/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "tt/autograd.h"
#include "tt/backend.h"
#include "tt/cuda_probe.h"
#include "tt/dispatcher.h"
#include "tt/error.h"
#include "tt/generator.h"
#include "tt/ops_elementwise.h"
#include "tt/tp_gpt2.h"
#include "tt/train_setup.h"
#if TT_WITH_CUDA
#include "tt/cuda_ops.h"
#endif

namespace tt::pp {

namespace {

// A point in time: a device mark on CUDA (its compute stream), the host clock on the CPU.
struct Stamp {
  std::shared_ptr<dist::DeviceMark> mark;
  std::chrono::steady_clock::time_point host;
};

double ms_between(const Stamp& from, const Stamp& to) {
  if (to.mark && from.mark) return to.mark->ms_since(*from.mark);
  return std::chrono::duration<double, std::milli>(to.host - from.host).count();
}

// The median of `values` (not empty): the middle one, or the mean of the two middle ones.
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

// ----- stage partitioning ------------------------------------------------------------------

double max_part_cost(const std::vector<double>& costs, const std::vector<int>& boundaries) {
  double worst = 0;
  for (std::size_t i = 0; i + 1 < boundaries.size(); ++i) {
    double sum = 0;
    for (int l = boundaries[i]; l < boundaries[i + 1]; ++l) sum += costs.at(l);
    worst = std::max(worst, sum);
  }
  return worst;
}

std::vector<double> gpt2_block_costs(const gpt2::GPT2Config& config, int64_t seq_len) {
  config.validate();
  const double C = static_cast<double>(config.n_embd), T = static_cast<double>(seq_len);
  // Per token, forward + backward = 3 x forward: 6 FLOPs per weight of a block (12 C^2 + 13 C
  // weights) plus its attention (12 C T, as flops_per_token counts it).
  const double block = 6.0 * (12.0 * C * C + 13.0 * C) + 12.0 * C * T;
  // The head: [C] x [C, V] forward and its two backward matmuls; the embedding is a lookup.
  const double head = 6.0 * C * static_cast<double>(config.vocab_size);
  std::vector<double> costs(static_cast<std::size_t>(config.n_layer), block);
  costs.back() += head;
  return costs;
}

std::vector<StageLayers> gpt2_stage_layers(const gpt2::GPT2Config& config, int virtual_stages,
                                           const std::vector<double>& costs) {
  TT_CHECK(virtual_stages >= 1 && virtual_stages <= config.n_layer,
           "gpt2_stage_layers: ", virtual_stages, " pipeline stages (p x v) for a model of ",
           config.n_layer,
           " blocks: every stage needs at least one block (more stages than layers)");
  const std::vector<double> c = costs.empty() ? gpt2_block_costs(config, config.block_size) : costs;
  TT_CHECK(static_cast<int64_t>(c.size()) == config.n_layer, "gpt2_stage_layers: ", c.size(),
           " block costs for a model of ", config.n_layer, " blocks");
  const std::vector<int> b = partition_by_cost(c, virtual_stages);
  std::vector<StageLayers> layers;
  for (int s = 0; s < virtual_stages; ++s) {
    layers.push_back({b[s], b[s + 1], s == 0, s == virtual_stages - 1});
  }
  return layers;
}

// ----- measured costs ------------------------------------------------------------------------

double Gpt2MeasuredCosts::head_ms() const {
  return std::max(0.0, last_block_ms - block_ms);
}

std::vector<double> Gpt2MeasuredCosts::block_costs(int64_t n_layer) const {
  TT_CHECK(n_layer >= 1, "Gpt2MeasuredCosts::block_costs: a model of ", n_layer,
           " blocks (needs at least one)");
  std::vector<double> costs(static_cast<std::size_t>(n_layer), block_ms);
  costs.back() = last_block_ms;
  costs.front() += embedding_ms;
  return costs;
}

Gpt2MeasuredCosts measure_gpt2_costs(dist::ProcessGroup& group, const gpt2::GPT2Config& config,
                                     Device device, const gpt2::ModelOps& ops, int64_t rows,
                                     int64_t seq_len, int repeats) {
  config.validate();
  const std::string what =
      detail::str("measure_gpt2_costs (", group.where(), ", ", device.str(), ", ", config.str(),
                  ", micro-batch [", rows, ", ", seq_len, "], ", repeats, " repeats)");
  TT_CHECK(repeats >= 1, what, ": needs at least one timed repeat, got ", repeats);
  TT_CHECK(rows >= 1 && seq_len >= 1 && seq_len <= config.block_size, what,
           ": needs rows >= 1 and 1 <= seq_len <= block_size ", config.block_size);
  if (device.is_cuda()) {
    TT_CHECK(
        has_backend(DeviceType::kCUDA) && device.index >= 0 && device.index < cuda_device_count(),
        what, ": no such device (built with CUDA: ", built_with_cuda() ? "yes" : "no",
        ", CUDA devices on this machine: ", cuda_device_count(), ")");
  }
  // Two blocks: the first is a middle block (its stage hands the residual stream on), the
  // second the last (ln_f follows it; with a fused operation set its last add is fused with
  // ln_f). Every block of a GPT-2 has this shape, whatever n_layer is.
  gpt2::GPT2Config two = config;
  two.n_layer = 2;
  gpt2::GPT2 model(two, 1337);
  model.to(device);
  model.set_ops(ops);
  Generator gen(4242);
  std::vector<int64_t> ids(static_cast<std::size_t>(2 * rows * seq_len));
  for (int64_t& id : ids) {
    id = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(config.vocab_size));
  }
  const std::size_t half = ids.size() / 2;
  const Tensor idx =
      from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + half), {rows, seq_len})
          .to(device);
  const Tensor targets =
      from_vector(std::vector<int64_t>(ids.begin() + half, ids.end()), {rows, seq_len}).to(device);
  Tensor stream;  // a residual stream of real magnitudes: the embedding of idx
  {
    autograd::NoGradGuard no_grad;
    stream = model.embed(idx).contiguous();
  }
  const Tensor grad = full(stream.shape(), 1e-3, {.dtype = stream.dtype(), .device = device});
  const auto leaf = [&] {
    Tensor x = stream.detach();
    x.set_requires_grad(true);
    return x;
  };
  // The three parts, each forward and backward (the parameters' gradients accumulate, as they
  // do over a step's micro-batches).
  const std::vector<std::function<void()>> parts = {
      [&] { autograd::backward(model.embed(idx), grad); },
      [&] { autograd::backward(model.run_blocks(leaf(), 0, 1), grad); },
      [&] { autograd::backward(model.loss_from_hidden(model.run_blocks(leaf(), 1, 2), targets)); },
  };
  const Tensor probe = empty({1}, {.dtype = stream.dtype(), .device = device});
  const auto now = [&] { return Stamp{group.mark(probe), std::chrono::steady_clock::now()}; };
  for (int round = 0; round < 2; ++round) {  // warm-up: allocator, kernels' first launches
    for (const auto& part : parts) part();
    if (round == 0 && ops.adamw) {
      // One step with lr 0 gives mixed precision its bfloat16 weight copies (what every
      // training step after the first multiplies with), without changing the weights.
      optim::AdamWOptions zero_lr;
      zero_lr.lr = 0;
      ops.adamw(gpt2::param_groups(model, 0.0), zero_lr)->step();
    }
  }
  std::vector<std::vector<double>> ms(parts.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const Stamp start = now();
      parts[k]();
      ms[k].push_back(ms_between(start, now()));
    }
  }
  // Agreement: every rank's medians gathered, each part the median over the ranks.
  std::vector<double> mine;
  for (const std::vector<double>& m : ms) mine.push_back(median(m));
  const int n = group.world_size();
  const Tensor all = empty({3 * static_cast<int64_t>(n)}, {.dtype = DType::kFloat64});
  group.all_gather(all, from_vector(mine, {3}));
  const std::vector<double> gathered = all.to_vector<double>();
  double agreed[3];
  for (int k = 0; k < 3; ++k) {
    std::vector<double> over_ranks;
    for (int r = 0; r < n; ++r) over_ranks.push_back(gathered[static_cast<std::size_t>(3 * r + k)]);
    agreed[k] = median(over_ranks);
  }
  return {agreed[0], agreed[1], agreed[2]};
}

std::vector<double> measure_gpt2_block_costs(dist::ProcessGroup& group,
                                             const gpt2::GPT2Config& config, Device device,
                                             const gpt2::ModelOps& ops, int64_t rows,
                                             int64_t seq_len, int repeats) {
  return measure_gpt2_costs(group, config, device, ops, rows, seq_len, repeats)
      .block_costs(config.n_layer);
}

PartitionKind parse_partition_kind(const std::string& name) {
  if (name == "flops") return PartitionKind::kFlops;
  if (name == "measured") return PartitionKind::kMeasured;
  if (name == "uniform") return PartitionKind::kUniform;
  TT_THROW("parse_partition_kind: unknown partition '", name,
           "' (flops: the FLOP model, measured: timed on the device, uniform: 1 per block)");
}

const char* partition_kind_name(PartitionKind kind) {
  switch (kind) {
    case PartitionKind::kFlops:
      return "flops";
    case PartitionKind::kMeasured:
      return "measured";
    case PartitionKind::kUniform:
      return "uniform";
  }
  return "?";
}

std::vector<double> gpt2_partition_costs(PartitionKind kind, dist::ProcessGroup& group,
                                         const gpt2::GPT2Config& config, Device device,
                                         const gpt2::ModelOps& ops, int64_t rows, int64_t seq_len) {
  switch (kind) {
    case PartitionKind::kMeasured:
      return measure_gpt2_block_costs(group, config, device, ops, rows, seq_len);
    case PartitionKind::kUniform:
      return std::vector<double>(static_cast<std::size_t>(config.n_layer), 1.0);
    case PartitionKind::kFlops:
      break;
  }
  return gpt2_block_costs(config, seq_len);
}

std::string describe_partition(PartitionKind kind, const std::vector<double>& costs,
                               const std::vector<StageLayers>& layers) {
  const char* unit = kind == PartitionKind::kMeasured ? "ms"
                     : kind == PartitionKind::kFlops  ? "FLOPs/token"
                                                      : "units";
  std::string out =
      detail::str("partition ", partition_kind_name(kind), ": costs (", unit, ") per block:");
  for (double c : costs) out += " " + train::format_number("%.4g", c);
  double total = 0, worst = 0;
  for (std::size_t s = 0; s < layers.size(); ++s) {
    const StageLayers& l = layers[s];
    double sum = 0;
    for (int64_t b = l.begin; b < l.end; ++b) sum += costs.at(static_cast<std::size_t>(b));
    total += sum;
    worst = std::max(worst, sum);
    const std::string blocks = l.end - l.begin == 1
                                   ? detail::str("block ", l.begin)
                                   : detail::str("blocks ", l.begin, "-", l.end - 1);
    out +=
        detail::str(s ? "; " : "; cut: ", "stage ", s, " = ", l.embedding ? "embedding + " : "",
                    blocks, l.head ? " + head" : "", " (", train::format_number("%.4g", sum), ")");
  }
  const double mean = layers.empty() ? 0.0 : total / static_cast<double>(layers.size());
  return out + "; predicted max stage " + train::format_number("%.4g", worst) + " vs mean " +
         train::format_number("%.4g", mean) + " (max/mean " +
         train::format_number("%.3f", mean > 0 ? worst / mean : 0.0) + ")";
}

// ----- timeline ------------------------------------------------------------------------------

double Timeline::busy_ms() const {
  double busy = 0;
  for (const TimelineEvent& e : events) {
    if (is_compute(e.op.kind)) busy += e.end_ms - e.start_ms;
  }
  return busy;
}

double Timeline::bubble() const {
  return span_ms > 0 ? 1.0 - busy_ms() / span_ms : 0.0;
}

Timeline simulated_timeline(const std::vector<SimulatedOp>& ops, int rank, double unit_ms) {
  Timeline t;
  t.rank = rank;
  for (const SimulatedOp& op : ops) {
    t.events.push_back({op.op, op.op.str(), op.start * unit_ms, op.end * unit_ms});
    t.span_ms = std::max(t.span_ms, op.end * unit_ms);
  }
  return t;
}

void write_timeline_csv(const Timeline& timeline, const std::string& path) {
  std::ofstream out(path);
  TT_CHECK(out.good(), "write_timeline_csv: cannot open '", path, "' for writing");
  out << "rank,kind,label,micro_batch,chunk,start_ms,end_ms\n";
  for (const TimelineEvent& e : timeline.events) {
    const char* kind = e.op.kind == OpKind::kForward    ? "F"
                       : e.op.kind == OpKind::kBackward ? "B"
                                                        : "X";
    out << timeline.rank << ',' << kind << ',' << e.label << ',' << e.op.micro_batch << ','
        << e.op.chunk << ',' << e.start_ms << ',' << e.end_ms << '\n';
  }
  TT_CHECK(out.good(), "write_timeline_csv: writing '", path, "' failed");
}

void write_gnuplot_script(const std::string& script, const std::string& csv, const std::string& png,
                          const std::string& title) {
  std::ofstream out(script);
  TT_CHECK(out.good(), "write_gnuplot_script: cannot open '", script, "' for writing");
  // One row of boxes: x from start to end, colour by kind (F blue, B green, transfers grey),
  // the label of each compute box above it.
  out << "set terminal pngcairo size 1400,260\n"
      << "set output '" << png << "'\n"
      << "set datafile separator ','\n"
      << "set title '" << title << "' noenhanced\n"
      << "set xlabel 'ms'\nunset ytics\nset yrange [0:1.6]\nset key outside right\n"
      << "set style fill solid 0.8 border lc rgb 'black'\n"
      << "kind(k,x) = (strcol(2) eq k) ? x : 1/0\n"
      << "plot '" << csv << "' skip 1 using (kind('F',($6+$7)/2)):(0.5):(($7-$6)/2):(0.4) "
      << "with boxxyerror lc rgb '#4477cc' title 'F', \\\n"
      << "     '' skip 1 using (kind('B',($6+$7)/2)):(0.5):(($7-$6)/2):(0.4) "
      << "with boxxyerror lc rgb '#44aa66' title 'B', \\\n"
      << "     '' skip 1 using (kind('X',($6+$7)/2)):(0.5):(($7-$6)/2):(0.15) "
      << "with boxxyerror lc rgb '#bbbbbb' title 'transfers', \\\n"
      << "     '' skip 1 using (strcol(2) eq 'X' ? 1/0 : ($6+$7)/2):(1.1):3 with labels "
      << "font ',8' notitle\n";
  TT_CHECK(out.good(), "write_gnuplot_script: writing '", script, "' failed");
}

bool run_gnuplot(const std::string& script) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "gnuplot not found: %s not drawn (install gnuplot-nox)\n", script.c_str());
    return false;
  }
  if (std::system(("gnuplot '" + script + "'").c_str()) != 0) {
    std::fprintf(stderr, "gnuplot failed on %s\n", script.c_str());
    return false;
  }
  return true;
}

// ----- the executor --------------------------------------------------------------------------

ExecutorResult run_schedule(dist::ProcessGroup& group, const RankSchedule& schedule,
                            const PipelineShape& shape, StageModule& stage,
                            const ExecutorOptions& options) {
  const int rank = group.rank();
  TT_CHECK(group.world_size() == shape.stages, "run_schedule (rank ", rank, "): a group of ",
           group.world_size(), " ranks for a pipeline of ", shape.str());
  const int last = shape.virtual_stages() - 1;
  const double scale = 1.0 / static_cast<double>(shape.micro_batches);
  ExecutorResult result;
  StageBuffers buffers;
  std::vector<Tensor> losses;
  int in_flight = 0;

  const Tensor probe = empty({1}, options.activation_options);
  const auto now = [&] { return Stamp{group.mark(probe), std::chrono::steady_clock::now()}; };
  struct Pending {
    PipeOp op;
    std::string label;
    Stamp start, end;
  };
  std::vector<Pending> pending;
  Stamp begin;
  if (options.timeline) {
    group.barrier();  // every rank starts the step together
    begin = now();
  }

  for (std::size_t i = 0; i < schedule.size();) {
    const std::size_t at = i;
    const PipeOp op = schedule[i];
    Stamp start;
    if (options.timeline) start = now();
    if (op.kind == OpKind::kForward) {
      const int s = virtual_stage_of(shape, rank, op.chunk);
      const std::pair<int, int> key{op.micro_batch, op.chunk};
      Tensor input;
      if (s > 0) {
        const auto it = buffers.inputs.find(key);
        TT_CHECK(it != buffers.inputs.end(), "run_schedule (rank ", rank, "): ", op.str(),
                 " runs before its input was received");
        input = it->second;
      }
      const Tensor out = stage.forward(op.chunk, op.micro_batch, input);
      if (s == last) {
        TT_CHECK(out.defined() && out.numel() == 1, "run_schedule (rank ", rank, "): ", op.str(),
                 " on the last stage must return the loss (one element), got ",
                 out.defined() ? out.describe() : std::string("an undefined tensor"));
        losses.push_back(out.detach());          // read at the end: no host sync per F
        buffers.outputs[key] = mul(out, scale);  // gradient accumulation: d(loss / m)
      } else {
        TT_CHECK(out.defined() && out.shape() == options.activation_shape &&
                     out.dtype() == options.activation_options.dtype,
                 "run_schedule (rank ", rank, "): ", op.str(), " returned ",
                 out.defined() ? out.describe() : std::string("an undefined tensor"),
                 ", not the agreed activation shape ", options.activation_shape, " ",
                 dtype_name(options.activation_options.dtype));
        buffers.outputs[key] = out;
      }
      result.peak_in_flight = std::max(result.peak_in_flight, ++in_flight);
      ++i;
    } else if (op.kind == OpKind::kBackward) {
      const int s = virtual_stage_of(shape, rank, op.chunk);
      const std::pair<int, int> key{op.micro_batch, op.chunk};
      const auto out = buffers.outputs.find(key);
      TT_CHECK(out != buffers.outputs.end(), "run_schedule (rank ", rank, "): ", op.str(),
               " runs before its forward");
      if (s == last) {
        autograd::backward(out->second);
      } else {
        const auto g = buffers.output_grads.find(key);
        TT_CHECK(g != buffers.output_grads.end(), "run_schedule (rank ", rank, "): ", op.str(),
                 " runs before the gradient of its output was received");
        autograd::backward(out->second, g->second);
        buffers.output_grads.erase(g);
      }
      buffers.outputs.erase(out);
      if (s > 0) {
        const Tensor grad = buffers.inputs.at(key).grad();
        TT_CHECK(grad.defined(), "run_schedule (rank ", rank, "): ", op.str(),
                 " left no gradient in its input (does the stage use its input?)");
        buffers.input_grads[key] = grad;
        buffers.inputs.erase(key);
      }
      --in_flight;
      ++i;
    } else {
      // A batch: the run of transfers up to the next compute operation.
      std::size_t j = i;
      while (j < schedule.size() && !is_compute(schedule[j].kind)) ++j;
      const std::vector<PipeOp> batch(schedule.begin() + static_cast<std::ptrdiff_t>(i),
                                      schedule.begin() + static_cast<std::ptrdiff_t>(j));
      group.batch_send_recv(exchange_ops(batch, shape, rank, buffers, options.activation_shape,
                                         options.activation_options));
      for (const PipeOp& t : batch) {
        const std::pair<int, int> key{t.micro_batch, t.chunk};
        if (t.kind == OpKind::kRecvActivation) buffers.inputs.at(key).set_requires_grad(true);
        if (t.kind == OpKind::kSendGradient) buffers.input_grads.erase(key);
      }
      i = j;
    }
    if (options.timeline) {
      std::string label;
      for (std::size_t k = at; k < i; ++k) label += (label.empty() ? "" : "+") + schedule[k].str();
      pending.push_back({op, std::move(label), start, now()});
    }
  }
  for (const Tensor& loss : losses) result.loss_sum += loss.item();
  if (options.timeline) {
    group.barrier();
    const Stamp end = now();
    result.timeline.rank = rank;
    result.timeline.span_ms = ms_between(begin, end);
    for (const Pending& p : pending) {
      result.timeline.events.push_back(
          {p.op, p.label, ms_between(begin, p.start), ms_between(begin, p.end)});
    }
  }
  return result;
}

int connect_peers(dist::ProcessGroup& group, const RankSchedule& schedule,
                  const PipelineShape& shape, const ExecutorOptions& options) {
  const int rank = group.rank();
  std::set<std::pair<int, bool>> links;  // (peer, this side sends)
  for (const PipeOp& op : schedule) {
    if (is_compute(op.kind)) continue;
    const Transfer t = transfer_of(op, shape, rank);
    links.insert({t.peer, t.send});
  }
  if (links.empty()) return 0;
  // One past the largest tag of transfer_of: MPI cannot mix these up with the schedule's.
  const int tag = 2 * shape.virtual_stages() * shape.micro_batches;
  std::vector<dist::P2POp> ops;
  for (const auto& [peer, send] : links) {
    ops.push_back({send ? dist::P2POp::Kind::kSend : dist::P2POp::Kind::kRecv,
                   zeros(options.activation_shape, options.activation_options), peer, tag});
  }
  group.batch_send_recv(ops);
  return static_cast<int>(ops.size());
}

// ----- GPT-2's stages --------------------------------------------------------------------------

GPT2Stages::GPT2Stages(gpt2::GPT2& model, const PipelineShape& shape, int rank,
                       std::vector<StageLayers> layers)
    : model_(model), shape_(shape), rank_(rank), layers_(std::move(layers)) {
  TT_CHECK(static_cast<int>(layers_.size()) == shape_.virtual_stages(),
           "GPT2Stages: ", layers_.size(), " stage layouts for ", shape_.str());
  TT_CHECK(rank_ >= 0 && rank_ < shape_.stages, "GPT2Stages: rank ", rank_, " outside ",
           shape_.str());
}

void GPT2Stages::set_micro_batches(std::vector<Batch> batches) {
  TT_CHECK(static_cast<int>(batches.size()) == shape_.micro_batches, "GPT2Stages: ", batches.size(),
           " micro-batches for ", shape_.str());
  batches_ = std::move(batches);
}

Tensor GPT2Stages::forward(int chunk, int micro_batch, const Tensor& input) {
  TT_CHECK(micro_batch >= 0 && micro_batch < static_cast<int>(batches_.size()),
           "GPT2Stages::forward: micro-batch ", micro_batch, " of ", batches_.size(),
           " set (call set_micro_batches first)");
  return run_stage(virtual_stage_of(shape_, rank_, chunk), batches_[micro_batch], input);
}

Tensor GPT2Stages::run_stage(int stage, const Batch& batch, const Tensor& input) {
  TT_CHECK(stage >= 0 && stage < shape_.virtual_stages() && place_of(shape_, stage).rank == rank_,
           "GPT2Stages::run_stage: virtual stage ", stage, " is not one of rank ", rank_, "'s in ",
           shape_.str());
  const StageLayers& l = layers_[stage];
  // The model's own loop over the stage's blocks (and ln_f on the last): Block::forward, or the
  // operation set's fused loop (chapter 10's and 11's operations, chapter 13's split layers).
  const Tensor x =
      model_.run_blocks(l.embedding ? model_.embed(batch.inputs) : input, l.begin, l.end);
  return l.head ? model_.loss_from_hidden(x, batch.targets) : x;
}

int GPT2Stages::owner_of(const std::string& name) const {
  if (name.rfind("wte.", 0) == 0 || name.rfind("wpe.", 0) == 0) return 0;
  if (name.rfind("ln_f.", 0) == 0) return shape_.virtual_stages() - 1;
  if (name.rfind("h.", 0) == 0) {
    const int64_t block = std::atoll(name.c_str() + 2);
    for (std::size_t s = 0; s < layers_.size(); ++s) {
      if (block >= layers_[s].begin && block < layers_[s].end) return static_cast<int>(s);
    }
  }
  TT_THROW("GPT2Stages::owner_of: no stage holds parameter '", name, "'");
}

std::vector<Tensor> GPT2Stages::parameters() const {
  const bool has_head = place_of(shape_, shape_.virtual_stages() - 1).rank == rank_;
  std::vector<Tensor> out;
  for (const auto& [name, t] : model_.named_parameters()) {
    if (place_of(shape_, owner_of(name)).rank == rank_ || (has_head && name == "wte.weight")) {
      out.push_back(t);
    }
  }
  return out;
}

std::vector<Tensor> GPT2Stages::boundary_parameters() const {
  std::vector<Tensor> out;
  for (int s = 0; s < shape_.virtual_stages(); ++s) {
    const int64_t next = layers_[static_cast<std::size_t>(s)].end;
    if (place_of(shape_, s).rank != rank_ || next == model_.config().n_layer) continue;
    const std::string prefix = detail::str("h.", next, ".ln_1.");
    for (const auto& [name, t] : model_.named_parameters()) {
      if (name.starts_with(prefix)) out.push_back(t);
    }
  }
  return out;
}

void GPT2Stages::keep_only_own_parameters() {
  std::vector<Tensor> mine = parameters();
  for (const Tensor& t : boundary_parameters()) mine.push_back(t);
  for (const Tensor& t : model_.parameters()) {
    if (std::any_of(mine.begin(), mine.end(), [&](const Tensor& k) { return k.is_same(t); })) {
      continue;
    }
    t.set_grad(Tensor());
    // Every size 0, the number of dimensions kept (gpt2::param_groups sorts by it).
    tp::replace_(t, empty(Shape(static_cast<std::size_t>(t.dim()), 0), {t.dtype(), t.device()}));
  }
}

std::vector<optim::ParamGroup> GPT2Stages::param_groups(double weight_decay) const {
  return only_parameters(gpt2::param_groups(model_, weight_decay), parameters());
}

std::vector<optim::ParamGroup> only_parameters(std::vector<optim::ParamGroup> groups,
                                               const std::vector<Tensor>& keep) {
  for (optim::ParamGroup& g : groups) {
    std::erase_if(g.params, [&](const Tensor& t) {
      return std::none_of(keep.begin(), keep.end(), [&](const Tensor& k) { return k.is_same(t); });
    });
  }
  return groups;
}

// ----- context parallelism (chapter 16's operations) ------------------------------------------

namespace {

ContextParallelWrap& registered_wrap() {
  static ContextParallelWrap wrap;  // set at static-initialization time by chapter 16
  return wrap;
}

}  // namespace

bool register_context_parallel_wrap(ContextParallelWrap wrap) {
  TT_CHECK(wrap != nullptr, "register_context_parallel_wrap: an empty wrapping");
  TT_CHECK(registered_wrap() == nullptr,
           "register_context_parallel_wrap: a context-parallel wrapping is registered already");
  registered_wrap() = std::move(wrap);
  return true;
}

const ContextParallelWrap& context_parallel_wrap() {
  TT_CHECK(registered_wrap() != nullptr,
           "the pipeline with context parallelism (--pp with --cp) needs chapter 16's "
           "context-parallel operations (tt/context_parallel.h), which are not linked in");
  return registered_wrap();
}

// ----- the training step -----------------------------------------------------------------------

namespace {

// The pipeline's shape, validated for its schedule before anything else is built.
PipelineShape checked_shape(int stages, const PipelineOptions& o) {
  const PipelineShape shape{stages, o.micro_batches, o.chunks};
  shape.validate(o.schedule);
  return shape;
}

// The positions of a sequence of T tokens each rank of the cp group holds (T with none).
int64_t positions_per_rank(const PipelineOptions& o, int64_t T) {
  const int64_t cp = o.cp != nullptr ? o.cp->world_size() : 1;
  TT_CHECK(cp == 1 || T % (2 * cp) == 0, "PipelineTrainer (", o.cp->where(),
           "): context parallelism cuts each sequence of T = ", T, " tokens into 2 x cp = ", 2 * cp,
           " zigzag chunks: T is not divisible by it");
  return T / cp;
}

}  // namespace

PipelineTrainer::PipelineTrainer(gpt2::GPT2& model, dist::ProcessGroup& pp, dist::ProcessGroup* dp,
                                 PipelineOptions options, int64_t B, int64_t T)
    : model_(model),
      pp_(pp),
      dp_(dp),
      options_(std::move(options)),
      shape_(checked_shape(pp.world_size(), options_)),
      stages_(model, shape_, pp.rank(),
              gpt2_stage_layers(model.config(), shape_.virtual_stages(), options_.block_costs)),
      schedule_(make_schedule(options_.schedule, shape_, pp.rank())) {
  exec_.activation_shape = {B, positions_per_rank(options_, T), model.config().n_embd};
  exec_.activation_options = {model.wte->weight.dtype(), model.device()};
  exec_.timeline = options_.timeline;
  // The gradient norm counts a parameter split by tensor parallelism once per part (summed
  // over the tp group), a replicated one once.
  for (const auto& [name, t] : model.named_parameters()) {
    if (options_.tp != nullptr && tp::split_of(name) == tp::Split::kReplicated) {
      replicated_.push_back(t);
    }
  }
  // wte is used by the first stage (embedding) and the last (head): their gradients add up.
  if (shape_.stages > 1) {
    const int r = pp.rank();
    const bool ends =
        r == place_of(shape_, 0).rank || r == place_of(shape_, shape_.virtual_stages() - 1).rank;
    tied_ = pp.split(ends ? 0 : 1, r);
  }
  stages_.keep_only_own_parameters();            // a no-op when the strategy did it before
  connect_peers(pp_, schedule_, shape_, exec_);  // a collective of the pp group
}

gpt2::TrainStepResult PipelineTrainer::step(optim::Optimizer& optimizer,
                                            const std::function<Batch()>& next_batch) {
  const int m = shape_.micro_batches;
  const Device device = model_.device();
  std::vector<Batch> batches;
  gpt2::TrainStepResult r;
  for (int i = 0; i < m; ++i) {
    const Batch b = next_batch();
    r.tokens += b.inputs.numel();
    batches.push_back({b.inputs.to(device), b.targets.to(device)});
  }
  stages_.set_micro_batches(std::move(batches));
  optimizer.zero_grad();
  {
#if TT_WITH_CUDA
    // Token ids and targets checked by kernels, read once after the schedule: a check on the
    // host would synchronize the first and the last stage at every micro-batch, and a host that
    // waits for its GPU cannot queue the next operation ahead of it (chapter 10).
    cuda::IndexChecksGuard device_checks(cuda::IndexChecks::kDevice);
#endif
    last_ = run_schedule(pp_, schedule_, shape_, stages_, exec_);
  }
#if TT_WITH_CUDA
  if (device.is_cuda()) cuda::check_index_errors(device.index);
#endif

  const std::vector<Tensor> params = stages_.parameters();
  const Tensor& wte = model_.wte->weight;
  const int last_rank = place_of(shape_, shape_.virtual_stages() - 1).rank;
  const bool is_first = pp_.rank() == 0, is_last = pp_.rank() == last_rank;
  if (tied_ && (is_first || is_last)) {
    if (!wte.grad().defined()) wte.set_grad(zeros_like(wte));
    tied_->all_reduce(wte.grad());
  }
  if (dp_ != nullptr && dp_->world_size() > 1) {
    for (const Tensor& p : params) {
      if (!p.grad().defined()) p.set_grad(zeros_like(p));
      dp_->all_reduce(p.grad(), dist::ReduceOp::kAvg);
    }
  }
  // The mean loss lives on the last stage; the others add 0.
  const Tensor loss = full({1}, is_last ? last_.loss_sum / m : 0.0, {.dtype = DType::kFloat64});
  pp_.all_reduce(loss);
  if (dp_ != nullptr) dp_->all_reduce(loss, dist::ReduceOp::kAvg);
  r.loss = loss.item();
  // The global norm: each rank's sum of squares (wte counted on the first stage only); with
  // tensor parallelism the parts of split parameters summed over the tp group first.
  std::vector<Tensor> split, replicated;
  for (const Tensor& p : params) {
    if (!p.grad().defined() || (p.is_same(wte) && !is_first)) continue;
    const bool once = std::any_of(replicated_.begin(), replicated_.end(),
                                  [&](const Tensor& t) { return t.is_same(p); });
    (once ? replicated : split).push_back(p.grad());
  }
  const auto sum_of_squares = [&](const std::vector<Tensor>& grads) {
    return grads.empty() ? 0.0
                         : call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", device, grads);
  };
  Tensor sumsq = full({1}, sum_of_squares(split), {.dtype = DType::kFloat64});
  if (options_.tp != nullptr) options_.tp->all_reduce(sumsq);
  sumsq = full({1}, sumsq.item() + sum_of_squares(replicated), {.dtype = DType::kFloat64});
  pp_.all_reduce(sumsq);
  r.grad_norm = std::sqrt(sumsq.item());
  if (options_.max_grad_norm > 0) {
    const double coef = options_.max_grad_norm / (r.grad_norm + 1e-6);
    std::vector<Tensor> all;
    for (const Tensor& p : params) {
      if (p.grad().defined()) all.push_back(p.grad());
    }
    if (coef < 1 && !all.empty()) {
      call_kernel<optim::ScaleInplaceKernel>("scale_", device, all, coef);
    }
  }
  // The replicas' tokens (the cp ranks of a replica read the same rows).
  r.tokens *=
      dp_ != nullptr ? dp_->world_size() / (options_.cp ? options_.cp->world_size() : 1) : 1;
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  if (r.finite) optimizer.step();
  return r;
}

double PipelineTrainer::evaluate(const std::function<Batch()>& next_batch, int64_t num_batches) {
  TT_CHECK(num_batches >= 1, "PipelineTrainer::evaluate: num_batches must be >= 1, got ",
           num_batches);
  autograd::NoGradGuard no_grad;
  const int me = pp_.rank(), stages = shape_.virtual_stages();
  const Device device = model_.device();
  double sum = 0;
  for (int64_t i = 0; i < num_batches; ++i) {
    const Batch b = next_batch();
    const Batch batch{b.inputs.to(device), b.targets.to(device)};
    const Shape hidden{batch.inputs.size(0), positions_per_rank(options_, batch.inputs.size(1)),
                       model_.config().n_embd};
    Tensor x;  // the activation between virtual stages; the loss after the last
    for (int s = 0; s < stages; ++s) {
      const int rank = place_of(shape_, s).rank;
      const int from = s > 0 ? place_of(shape_, s - 1).rank : rank;
      if (rank != from && me == from) {  // the previous virtual stage's output, sent on
        TT_CHECK(x.shape() == hidden && x.dtype() == exec_.activation_options.dtype,
                 "PipelineTrainer::evaluate (", pp_.where(), "): virtual stage ", s - 1,
                 " returned ", x.describe(), ", not the hidden states ", hidden, " ",
                 dtype_name(exec_.activation_options.dtype));
        pp_.batch_send_recv({{dist::P2POp::Kind::kSend, x.contiguous(), rank, s}});
      } else if (rank != from && me == rank) {
        x = empty(hidden, exec_.activation_options);
        pp_.batch_send_recv({{dist::P2POp::Kind::kRecv, x, from, s}});
      }
      if (me == rank) x = stages_.run_stage(s, batch, x);
    }
    if (me == place_of(shape_, stages - 1).rank) sum += x.item();
  }
  // The last stage's mean; the others add 0. With context parallelism, each cp rank's loss is
  // its shard's mean (equal shards): their average is the sequences' mean.
  const Tensor loss = full({1}, sum / static_cast<double>(num_batches), {.dtype = DType::kFloat64});
  pp_.all_reduce(loss);
  if (options_.cp != nullptr) options_.cp->all_reduce(loss, dist::ReduceOp::kAvg);
  return loss.item();
}

namespace {

// The parameters of optimizer groups, flattened (the indices of "state.<i>.<name>").
std::vector<Tensor> flat(const std::vector<optim::ParamGroup>& groups) {
  std::vector<Tensor> out;
  for (const optim::ParamGroup& g : groups) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

// The name of parameter `t` of `model`.
std::string name_of(const gpt2::GPT2& model, const Tensor& t) {
  for (const auto& [name, p] : model.named_parameters()) {
    if (p.is_same(t)) return name;
  }
  TT_THROW("PipelineTrainer: ", t.describe(), " is not a parameter of the model");
}

// Splits "state.<i>.<name>" into i and name; false for "step", "lr".
bool parse_state_key(const std::string& key, std::size_t& index, std::string& name) {
  if (key.rfind("state.", 0) != 0) return false;
  const std::size_t dot = key.find('.', 6);
  TT_CHECK(dot != std::string::npos, "optimizer state: malformed key '", key, "'");
  index = static_cast<std::size_t>(std::stoull(key.substr(6, dot - 6)));
  name = key.substr(dot + 1);
  return true;
}

// The index in `params` of the tensor that is `t`, or -1.
int index_of(const std::vector<Tensor>& params, const Tensor& t) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].is_same(t)) return static_cast<int>(i);
  }
  return -1;
}

// `t` (pp rank `from`'s tensor; undefined elsewhere) on pp rank `to`, on `device`: its dtype and
// shape first (a small int64 message), then its data. Other ranks return `t`.
Tensor send_whole(dist::ProcessGroup& pp, const Tensor& t, int from, int to, Device device) {
  const int me = pp.rank();
  if (from == to || (me != from && me != to)) return t;
  constexpr int kMaxDims = 8;
  Tensor header = empty({kMaxDims + 2}, {.dtype = DType::kInt64, .device = device});
  if (me == from) {
    TT_CHECK(t.dim() <= kMaxDims, "PipelineTrainer::gather_state: ", t.describe(),
             " has more than ", kMaxDims, " dimensions");
    std::vector<int64_t> h(kMaxDims + 2, 0);
    h[0] = static_cast<int64_t>(t.dtype());
    h[1] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) h[static_cast<std::size_t>(2 + d)] = t.size(d);
    header = from_vector(h, {kMaxDims + 2}).to(device);
    const Tensor data = t.contiguous();
    pp.batch_send_recv({{dist::P2POp::Kind::kSend, header, to, 0}});
    pp.batch_send_recv({{dist::P2POp::Kind::kSend, data, to, 1}});
    return t;
  }
  pp.batch_send_recv({{dist::P2POp::Kind::kRecv, header, from, 0}});
  const std::vector<int64_t> h = header.to_vector<int64_t>();
  const Shape shape(h.begin() + 2, h.begin() + 2 + h[1]);
  Tensor out = empty(shape, {static_cast<DType>(h[0]), device});
  pp.batch_send_recv({{dist::P2POp::Kind::kRecv, out, from, 1}});
  return out;
}

// The entries of `state` by key.
std::map<std::string, Tensor> by_key(const nn::StateDict& state) {
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : state) out.emplace(key, t);
  return out;
}

const Tensor& lookup(const std::map<std::string, Tensor>& state, const std::string& key) {
  const auto it = state.find(key);
  TT_CHECK(it != state.end(), "PipelineTrainer: no state entry '", key,
           "' (a checkpoint of another model or optimizer?)");
  return it->second;
}

}  // namespace

nn::StateDict PipelineTrainer::gather_state(const optim::Optimizer* local,
                                            const tp::TensorParallelGPT2* split, bool collect) {
  const int me = pp_.rank();
  const Device device = model_.device();
  const bool receives = collect && (options_.tp == nullptr || options_.tp->rank() == 0);
  nn::StateDict out;
  // Parameter `name`'s tensor `mine` (of this rank when it trains it) made whole over tp on its
  // stage's ranks, then onto pp rank 0, as `key` on the CPU.
  const auto add = [&](const std::string& key, const std::string& name, const Tensor& mine) {
    if (!collect) return;
    const int owner = place_of(shape_, stages_.owner_of(name)).rank;
    Tensor whole;
    if (me == owner) whole = split != nullptr ? split->gather(name, mine) : mine;
    if (!receives) return;
    whole = send_whole(pp_, whole, owner, 0, device);
    if (me == 0) out.emplace_back(key, whole.detach().to(Device::cpu()).contiguous().clone());
  };
  for (const auto& [name, t] : model_.named_parameters()) add("model." + name, name, t);
  for (const auto& [name, t] : model_.named_buffers()) {
    if (me == 0 && receives)
      out.emplace_back("model." + name, t.detach().to(Device::cpu()).clone());
  }
  if (local == nullptr) return out;
  // The optimizer's state: step and lr as they are (the same on every rank), then each
  // parameter's moments under its index in the one-process order (gpt2::param_groups).
  const nn::StateDict state = local->state_dict();
  const std::map<std::string, Tensor> from = by_key(state);
  std::vector<std::string> state_names;  // "m", "v": those of the local parameter 0
  for (const auto& [key, t] : state) {
    std::size_t j = 0;
    std::string what;
    if (parse_state_key(key, j, what)) {
      if (j == 0) state_names.push_back(what);
    } else if (me == 0 && receives) {
      out.emplace_back("optimizer." + key, t.detach().to(Device::cpu()).clone());
    }
  }
  const std::vector<Tensor> mine = flat(local->param_groups());
  const std::vector<Tensor> all = flat(gpt2::param_groups(model_, 0.0));
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string name = name_of(model_, all[i]);
    const int owner = place_of(shape_, stages_.owner_of(name)).rank;
    const int j = me == owner ? index_of(mine, all[i]) : -1;
    TT_CHECK(me != owner || j >= 0, "PipelineTrainer::gather_state (", pp_.where(), "): ", name,
             " is not in this rank's optimizer");
    for (const std::string& what : state_names) {
      add(detail::str("optimizer.state.", i, ".", what), name,
          j >= 0 ? lookup(from, detail::str("state.", j, ".", what)) : Tensor());
    }
  }
  return out;
}

void PipelineTrainer::load_state(const nn::StateDict& state, optim::Optimizer* local,
                                 const tp::TensorParallelGPT2* split) {
  const std::map<std::string, Tensor> entries = by_key(state);
  // This rank's part of whole tensor `key` of parameter `name` into `target`.
  const auto fill = [&](const std::string& key, const std::string& name, const Tensor& target) {
    const Tensor& whole = lookup(entries, key);
    const Tensor value = split != nullptr ? split->shard(name, whole) : whole;
    TT_CHECK(value.shape() == target.shape() && value.dtype() == target.dtype(),
             "PipelineTrainer::load_state: '", key, "' is ", value.describe(),
             ", but this rank's tensor is ", target.describe());
    target.copy_(value);
  };
  const std::vector<Tensor> own = stages_.parameters();
  for (const auto& [name, t] : model_.named_parameters()) {
    if (index_of(own, t) >= 0) fill("model." + name, name, t);
  }
  for (const auto& [name, t] : model_.named_buffers()) t.copy_(lookup(entries, "model." + name));
  if (local == nullptr) return;
  const std::vector<Tensor> mine = flat(local->param_groups());
  const std::vector<Tensor> all = flat(gpt2::param_groups(model_, 0.0));
  for (const auto& [key, t] : local->state_dict()) {
    std::size_t j = 0;
    std::string what;
    if (!parse_state_key(key, j, what)) {
      t.copy_(lookup(entries, "optimizer." + key));  // step, lr
      continue;
    }
    const int i = index_of(all, mine.at(j));
    TT_CHECK(i >= 0, "PipelineTrainer::load_state: parameter ", j,
             " of this rank's optimizer is not one of the model's");
    fill(detail::str("optimizer.state.", i, ".", what), name_of(model_, mine[j]), t);
  }
}
}  // namespace tt::pp
