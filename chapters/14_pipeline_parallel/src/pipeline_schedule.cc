// Pipeline schedules as data (tt/pipeline_schedule.h): the AFAB and interleaved orders, the
// transfers between compute operations, and the replay that checks a set of schedules. The
// 1F1B order (ch14.1) and the bubble formula (ch14.4) are exercises (solutions/14_*).
#include "tt/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "tt/error.h"

namespace tt::pp {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return "F";
    case OpKind::kBackward:
      return "B";
    case OpKind::kSendActivation:
      return "sA";
    case OpKind::kRecvActivation:
      return "rA";
    case OpKind::kSendGradient:
      return "sG";
    case OpKind::kRecvGradient:
      return "rG";
  }
  return "?";
}

bool is_compute(OpKind kind) {
  return kind == OpKind::kForward || kind == OpKind::kBackward;
}

std::string PipeOp::str() const {
  std::string s = detail::str(op_kind_name(kind), micro_batch);
  if (chunk != 0) s += detail::str("c", chunk);
  return s;
}

const char* schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kAfab:
      return "afab";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k :
       {ScheduleKind::kAfab, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    if (name == schedule_kind_name(k)) return k;
  }
  TT_THROW("pipeline schedule: unknown schedule '", name, "' (known: afab, 1f1b, interleaved)");
}

std::string PipelineShape::str() const {
  return detail::str("p=", stages, " m=", micro_batches, " v=", chunks);
}

void PipelineShape::validate(ScheduleKind kind) const {
  const char* name = schedule_kind_name(kind);
  TT_CHECK(stages >= 1 && micro_batches >= 1 && chunks >= 1, "pipeline schedule ", name, " (",
           str(), "): stages, micro-batches and chunks must all be >= 1");
  if (kind != ScheduleKind::kInterleaved) {
    TT_CHECK(chunks == 1, "pipeline schedule ", name, " (", str(),
             "): one model chunk per rank (v = 1); use 'interleaved' for v > 1");
    return;
  }
  TT_CHECK(stages >= 2 && chunks >= 2, "pipeline schedule interleaved (", str(),
           "): needs p >= 2 stages and v >= 2 chunks per rank (with v = 1 it is 1f1b)");
  TT_CHECK(micro_batches % stages == 0 && micro_batches >= 2 * stages,
           "pipeline schedule interleaved (", str(),
           "): the number of micro-batches m = ", micro_batches,
           " must be a multiple of the number of stages p = ", stages,
           " and at least 2p (micro-batches go round the ranks in groups of p)");
}

namespace {

void check_rank(const char* fn, int stages, int micro_batches, int rank) {
  TT_CHECK(stages >= 1 && micro_batches >= 1 && rank >= 0 && rank < stages, fn, "(stages=", stages,
           ", micro_batches=", micro_batches, ", rank=", rank,
           "): needs p >= 1, m >= 1 and a rank in 0..p-1");
}

}  // namespace

std::vector<PipeOp> afab_order(int stages, int micro_batches, int rank) {
  check_rank("afab_order", stages, micro_batches, rank);
  std::vector<PipeOp> ops;
  for (int i = 0; i < micro_batches; ++i) ops.push_back({OpKind::kForward, i, 0});
  for (int i = 0; i < micro_batches; ++i) ops.push_back({OpKind::kBackward, i, 0});
  return ops;
}

std::vector<PipeOp> interleaved_order(int stages, int micro_batches, int chunks, int rank) {
  check_rank("interleaved_order", stages, micro_batches, rank);
  PipelineShape{stages, micro_batches, chunks}.validate(ScheduleKind::kInterleaved);
  const int p = stages, v = chunks, total = micro_batches * chunks;
  // The k-th forward (backward) of a rank: micro-batches in groups of p per chunk.
  const auto chunk_of = [&](int k, bool forward) {
    const int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  const auto micro_batch_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  std::vector<PipeOp> ops;
  const auto forward = [&](int k) {
    ops.push_back({OpKind::kForward, micro_batch_of(k), chunk_of(k, true)});
  };
  const auto backward = [&](int k) {
    ops.push_back({OpKind::kBackward, micro_batch_of(k), chunk_of(k, false)});
  };
  for (int k = 0; k < warmup; ++k) forward(k);
  for (int k = 0; k < total - warmup; ++k) {
    forward(k + warmup);
    backward(k);
  }
  for (int k = total - warmup; k < total; ++k) backward(k);
  return ops;
}

std::vector<PipeOp> compute_order(ScheduleKind kind, const PipelineShape& shape, int rank) {
  shape.validate(kind);
  switch (kind) {
    case ScheduleKind::kAfab:
      return afab_order(shape.stages, shape.micro_batches, rank);
    case ScheduleKind::kOneFOneB:
      return one_f_one_b_order(shape.stages, shape.micro_batches, rank);
    case ScheduleKind::kInterleaved:
      return interleaved_order(shape.stages, shape.micro_batches, shape.chunks, rank);
  }
  TT_THROW("compute_order: unknown schedule kind");
}

StagePlace place_of(const PipelineShape& shape, int virtual_stage) {
  TT_CHECK(virtual_stage >= 0 && virtual_stage < shape.virtual_stages(), "place_of(", virtual_stage,
           "): not a virtual stage of ", shape.str());
  return {virtual_stage % shape.stages, virtual_stage / shape.stages};
}

int virtual_stage_of(const PipelineShape& shape, int rank, int chunk) {
  TT_CHECK(rank >= 0 && rank < shape.stages && chunk >= 0 && chunk < shape.chunks,
           "virtual_stage_of(rank=", rank, ", chunk=", chunk, "): outside ", shape.str());
  return chunk * shape.stages + rank;
}

Transfer transfer_of(const PipeOp& op, const PipelineShape& shape, int rank) {
  TT_CHECK(!is_compute(op.kind), "transfer_of(", op.str(), "): not a transfer");
  const int s = virtual_stage_of(shape, rank, op.chunk);
  const int last = shape.virtual_stages() - 1;
  Transfer t;
  t.send = op.kind == OpKind::kSendActivation || op.kind == OpKind::kSendGradient;
  t.gradient = op.kind == OpKind::kSendGradient || op.kind == OpKind::kRecvGradient;
  // Activations flow up (s -> s+1), gradients down (s+1 -> s).
  const bool up = t.send != t.gradient;  // sA and rG talk to s+1; rA and sG to s-1
  const int other = up ? s + 1 : s - 1;
  TT_CHECK(other >= 0 && other <= last, "transfer_of(", op.str(), ") on rank ", rank,
           ": virtual stage ", s, " has no ", up ? "next" : "previous", " stage (", shape.str(),
           ")");
  t.peer = place_of(shape, other).rank;
  const int receiver = t.send ? other : s;
  t.tag = 2 * (receiver * shape.micro_batches + op.micro_batch) + (t.gradient ? 1 : 0);
  return t;
}

RankSchedule add_transfers(const std::vector<PipeOp>& compute, const PipelineShape& shape,
                           int rank) {
  const int last = shape.virtual_stages() - 1;
  // The receive an operation needs first, and the send of what it produces, if any.
  const auto input_of = [&](const PipeOp& op) -> std::optional<PipeOp> {
    const int s = virtual_stage_of(shape, rank, op.chunk);
    if (op.kind == OpKind::kForward && s > 0) {
      return PipeOp{OpKind::kRecvActivation, op.micro_batch, op.chunk};
    }
    if (op.kind == OpKind::kBackward && s < last) {
      return PipeOp{OpKind::kRecvGradient, op.micro_batch, op.chunk};
    }
    return std::nullopt;
  };
  const auto output_of = [&](const PipeOp& op) -> std::optional<PipeOp> {
    const int s = virtual_stage_of(shape, rank, op.chunk);
    if (op.kind == OpKind::kForward && s < last) {
      return PipeOp{OpKind::kSendActivation, op.micro_batch, op.chunk};
    }
    if (op.kind == OpKind::kBackward && s > 0) {
      return PipeOp{OpKind::kSendGradient, op.micro_batch, op.chunk};
    }
    return std::nullopt;
  };
  // The steps between batches: one operation each, or with chunks a forward and the backward
  // right after it (the steady state of interleaved 1F1B).
  std::vector<std::vector<PipeOp>> steps;
  for (std::size_t i = 0; i < compute.size(); ++i) {
    TT_CHECK(is_compute(compute[i].kind), "add_transfers: ", compute[i].str(),
             " is not a compute operation");
    const bool pair = shape.chunks > 1 && compute[i].kind == OpKind::kForward &&
                      i + 1 < compute.size() && compute[i + 1].kind == OpKind::kBackward;
    steps.push_back({compute[i]});
    if (pair) steps.back().push_back(compute[++i]);
  }
  RankSchedule out;
  const auto inputs_of = [&](const std::vector<PipeOp>& step) {
    for (const PipeOp& op : step) {
      if (auto in = input_of(op)) out.push_back(*in);
    }
  };
  for (std::size_t k = 0; k < steps.size(); ++k) {
    if (k == 0) inputs_of(steps[k]);
    out.insert(out.end(), steps[k].begin(), steps[k].end());
    for (const PipeOp& op : steps[k]) {
      if (auto o = output_of(op)) out.push_back(*o);
    }
    if (k + 1 < steps.size()) inputs_of(steps[k + 1]);
  }
  return out;
}

RankSchedule make_schedule(ScheduleKind kind, const PipelineShape& shape, int rank) {
  return add_transfers(compute_order(kind, shape, rank), shape, rank);
}

std::string format_schedule(const RankSchedule& schedule, bool compute_only) {
  std::string s;
  for (const PipeOp& op : schedule) {
    if (compute_only && !is_compute(op.kind)) continue;
    if (!s.empty()) s += ' ';
    s += op.str();
  }
  return s;
}

// ----- the replay ------------------------------------------------------------------------------

namespace {

// Where one rank of the replay is.
struct RankState {
  std::size_t pos = 0;                                   // next operation
  double time = 0;                                       // its clock
  bool posted = false;                                   // the batch at pos has been started
  double posted_at = 0;                                  // when
  std::size_t batch_end = 0;                             // one past the batch's last transfer
  std::vector<bool> done;                                // per transfer of the batch
  std::vector<double> done_at;                           // when each completed
  std::set<std::tuple<int, int, int>> computed;          // (kind, micro-batch, chunk) of F/B done
  std::set<std::pair<int, int>> activations, gradients;  // (micro-batch, chunk) received
};

}  // namespace

std::vector<std::vector<SimulatedOp>> check_schedules(const std::vector<RankSchedule>& schedules,
                                                      const PipelineShape& shape,
                                                      double forward_cost, double backward_cost) {
  const int p = shape.stages;
  TT_CHECK(static_cast<int>(schedules.size()) == p, "check_schedules: ", schedules.size(),
           " schedules for ", shape.str());
  const int last = shape.virtual_stages() - 1;
  // Every F and B of every chunk exactly once.
  for (int r = 0; r < p; ++r) {
    std::set<std::tuple<int, int, int>> seen;
    for (const PipeOp& op : schedules[r]) {
      if (!is_compute(op.kind)) continue;
      TT_CHECK(op.micro_batch >= 0 && op.micro_batch < shape.micro_batches && op.chunk >= 0 &&
                   op.chunk < shape.chunks,
               "check_schedules: rank ", r, ": ", op.str(), " is outside ", shape.str());
      TT_CHECK(seen.insert({static_cast<int>(op.kind), op.micro_batch, op.chunk}).second,
               "check_schedules: rank ", r, " runs ", op.str(), " twice");
    }
    TT_CHECK(static_cast<int>(seen.size()) == 2 * shape.micro_batches * shape.chunks,
             "check_schedules: rank ", r, " has ", seen.size(), " compute operations, not the ",
             2 * shape.micro_batches * shape.chunks,
             " (F and B of every micro-batch and chunk) of ", shape.str());
  }
  // The transfers between two ranks pair in list order (as NCCL pairs them): the k-th send
  // from a to b is the k-th receive of b from a.
  std::map<std::pair<int, int>, std::vector<int>> sent, received;
  for (int r = 0; r < p; ++r) {
    for (const PipeOp& op : schedules[r]) {
      if (is_compute(op.kind)) continue;
      const Transfer t = transfer_of(op, shape, r);
      (t.send ? sent[{r, t.peer}] : received[{t.peer, r}]).push_back(t.tag);
    }
  }
  TT_CHECK(sent == received,
           "check_schedules: the sends of some rank to another do not pair, in order, with the "
           "receives of that rank (",
           shape.str(), ")");

  std::vector<RankState> st(static_cast<std::size_t>(p));
  std::vector<std::vector<SimulatedOp>> timeline(static_cast<std::size_t>(p));
  const auto batch_end = [&](int r, std::size_t from) {
    std::size_t e = from;
    while (e < schedules[r].size() && !is_compute(schedules[r][e].kind)) ++e;
    return e;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      RankState& me = st[r];
      const RankSchedule& ops = schedules[r];
      while (me.pos < ops.size()) {
        const PipeOp& op = ops[me.pos];
        if (is_compute(op.kind)) {
          const int s = virtual_stage_of(shape, r, op.chunk);
          const std::pair<int, int> key{op.micro_batch, op.chunk};
          if (op.kind == OpKind::kForward) {
            TT_CHECK(s == 0 || me.activations.count(key), "check_schedules: rank ", r, " runs ",
                     op.str(), " before receiving its input activation (", shape.str(), ")");
          } else {
            TT_CHECK(
                me.computed.count({static_cast<int>(OpKind::kForward), op.micro_batch, op.chunk}),
                "check_schedules: rank ", r, " runs ", op.str(), " before its forward (",
                shape.str(), ")");
            TT_CHECK(s == last || me.gradients.count(key), "check_schedules: rank ", r, " runs ",
                     op.str(), " before receiving its output gradient (", shape.str(), ")");
          }
          const double cost = op.kind == OpKind::kForward ? forward_cost : backward_cost;
          timeline[r].push_back({op, me.time, me.time + cost});
          me.time += cost;
          me.computed.insert({static_cast<int>(op.kind), op.micro_batch, op.chunk});
          ++me.pos;
          progress = true;
          continue;
        }
        if (!me.posted) {
          me.posted = true;
          me.posted_at = me.time;
          me.batch_end = batch_end(r, me.pos);
          me.done.assign(me.batch_end - me.pos, false);
          me.done_at.assign(me.batch_end - me.pos, 0.0);
          progress = true;
        }
        // Pair each open transfer with the peer's matching one in the peer's open batch.
        for (std::size_t i = me.pos; i < me.batch_end; ++i) {
          if (me.done[i - me.pos]) continue;
          const Transfer t = transfer_of(ops[i], shape, r);
          RankState& peer = st[t.peer];
          if (!peer.posted) continue;
          for (std::size_t j = peer.pos; j < peer.batch_end; ++j) {
            if (peer.done[j - peer.pos]) continue;
            const Transfer u = transfer_of(schedules[t.peer][j], shape, t.peer);
            if (u.peer != r || u.tag != t.tag || u.send == t.send) continue;
            const double at = std::max(me.posted_at, peer.posted_at);
            me.done[i - me.pos] = peer.done[j - peer.pos] = true;
            me.done_at[i - me.pos] = peer.done_at[j - peer.pos] = at;
            progress = true;
            break;
          }
        }
        if (std::find(me.done.begin(), me.done.end(), false) != me.done.end()) break;
        double end = me.posted_at;
        for (std::size_t i = me.pos; i < me.batch_end; ++i) {
          end = std::max(end, me.done_at[i - me.pos]);
          const PipeOp& x = ops[i];
          if (x.kind == OpKind::kRecvActivation) me.activations.insert({x.micro_batch, x.chunk});
          if (x.kind == OpKind::kRecvGradient) me.gradients.insert({x.micro_batch, x.chunk});
        }
        me.time = end;
        me.pos = me.batch_end;
        me.posted = false;
        progress = true;
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < p; ++r) {
    if (st[r].pos < schedules[r].size()) {
      stuck += detail::str(" rank ", r, " waits in ", schedules[r][st[r].pos].str(), ";");
    }
  }
  TT_CHECK(stuck.empty(), "check_schedules: the schedules deadlock (", shape.str(), "):", stuck);
  return timeline;
}

double simulated_bubble(const std::vector<std::vector<SimulatedOp>>& timeline) {
  double span = 0;
  for (const auto& rank : timeline) {
    for (const SimulatedOp& op : rank) span = std::max(span, op.end);
  }
  if (span <= 0 || timeline.empty()) return 0;
  double idle = 0;
  for (const auto& rank : timeline) {
    double busy = 0;
    for (const SimulatedOp& op : rank) busy += op.end - op.start;
    idle += 1.0 - busy / span;
  }
  return idle / static_cast<double>(timeline.size());
}

}  // namespace tt::pp
