// The executor on a toy pipeline (virtual stage s multiplies by its weight w_s; the last one's
// loss is the sum of squares): every schedule, run under a short watchdog, gives the gradients
// of one process with gradient accumulation and never deadlocks; 1F1B keeps at most p - rank
// micro-batches in flight against AFAB's m; the timeline records every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/dist.h"
#include "tt/generator.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_reduce.h"
#include "tt/pipeline.h"
#include "tt/temp_dir.h"

namespace {

using tt::Tensor;
using tt::pp::PipelineShape;
using tt::pp::ScheduleKind;
namespace dist = tt::dist;

constexpr int64_t kRows = 3, kC = 5;

Tensor weight(int s) {
  tt::Generator gen(1000 + static_cast<uint64_t>(s));
  return tt::randn({kC}, gen).set_requires_grad();
}

Tensor data(int micro_batch) {
  tt::Generator gen(2000 + static_cast<uint64_t>(micro_batch));
  return tt::randn({kRows, kC}, gen);
}

// This rank's chunks of the toy model (every rank draws every weight, uses its own).
class ToyStages : public tt::pp::StageModule {
 public:
  ToyStages(const PipelineShape& shape, int rank) : shape_(shape), rank_(rank) {
    for (int s = 0; s < shape.virtual_stages(); ++s) weights.push_back(weight(s));
  }
  Tensor forward(int chunk, int micro_batch, const Tensor& input) override {
    const int s = tt::pp::virtual_stage_of(shape_, rank_, chunk);
    const Tensor y = tt::mul(s == 0 ? data(micro_batch) : input, weights[s]);
    return s == shape_.virtual_stages() - 1 ? tt::sum(tt::mul(y, y)) : y;
  }
  std::vector<Tensor> weights;

 private:
  PipelineShape shape_;
  int rank_;
};

// One process: every micro-batch through every stage, loss / m backpropagated.
struct Reference {
  std::vector<Tensor> weights;
  double loss_sum = 0;
};
Reference reference(int stages, int micro_batches) {
  Reference ref;
  for (int s = 0; s < stages; ++s) ref.weights.push_back(weight(s));
  for (int m = 0; m < micro_batches; ++m) {
    Tensor x = data(m);
    for (const Tensor& w : ref.weights) x = tt::mul(x, w);
    const Tensor loss = tt::sum(tt::mul(x, x));
    ref.loss_sum += loss.item();
    tt::autograd::backward(tt::mul(loss, 1.0 / micro_batches));
  }
  return ref;
}

double max_diff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    d = std::max(d, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
  }
  return d;
}

// The shapes each schedule is run with on a world of p ranks.
std::vector<std::pair<ScheduleKind, PipelineShape>> cases(int p) {
  std::vector<std::pair<ScheduleKind, PipelineShape>> out;
  for (int m : {4, 8}) {
    out.push_back({ScheduleKind::kAfab, {p, m, 1}});
    out.push_back({ScheduleKind::kOneFOneB, {p, m, 1}});
    if (p >= 2 && m % p == 0 && m >= 2 * p) out.push_back({ScheduleKind::kInterleaved, {p, m, 2}});
  }
  return out;
}

TEST(Ch14_Executor, EveryScheduleEqualsOneProcessUnderTheWatchdogMpi) {
  dist::ProcessGroup& world = dist::world();
  const int p = world.world_size(), r = world.rank();
  // A deadlock ends the process (status 124) after 30 s instead of hanging the test; the limit
  // is restored however the test ends.
  struct Limit {
    dist::ProcessGroup& group;
    double saved;
    ~Limit() { group.set_timeout_seconds(saved); }
  } limit{world, world.timeout_seconds()};
  world.set_timeout_seconds(30);
  for (const auto& [kind, shape] : cases(p)) {
    SCOPED_TRACE(std::string(tt::pp::schedule_kind_name(kind)) + " " + shape.str());
    ToyStages stages(shape, r);
    const tt::pp::ExecutorResult result =
        tt::pp::run_schedule(world, tt::pp::make_schedule(kind, shape, r), shape, stages,
                             {.activation_shape = {kRows, kC}, .activation_options = {}});
    const Reference ref = reference(shape.virtual_stages(), shape.micro_batches);
    for (int c = 0; c < shape.chunks; ++c) {
      const int s = tt::pp::virtual_stage_of(shape, r, c);
      ASSERT_TRUE(stages.weights[s].grad().defined()) << "virtual stage " << s;
      EXPECT_LE(max_diff(stages.weights[s].grad(), ref.weights[s].grad()), 1e-5)
          << "virtual stage " << s;
    }
    const bool last = r == tt::pp::place_of(shape, shape.virtual_stages() - 1).rank;
    EXPECT_NEAR(result.loss_sum, last ? ref.loss_sum : 0.0, 1e-4 * std::max(1.0, ref.loss_sum));
    // Activation memory: micro-batch chunks between their forward and their backward.
    if (kind == ScheduleKind::kAfab) {
      EXPECT_EQ(result.peak_in_flight, shape.micro_batches);
    }
    if (kind == ScheduleKind::kOneFOneB) {
      EXPECT_EQ(result.peak_in_flight, std::min(p - r, shape.micro_batches));
    }
  }
  world.barrier();
}

TEST(Ch14_Executor, ConnectPeersLinksEachNeighbourBothWaysMpi) {
  // One transfer per (peer, direction) the schedule uses: the neighbours on both sides, and
  // with chunks the wrap-around between the last rank and the first. Then the schedule runs.
  dist::ProcessGroup& world = dist::world();
  const int p = world.world_size(), r = world.rank();
  const tt::pp::ExecutorOptions options{.activation_shape = {kRows, kC}, .activation_options = {}};
  for (const auto& [kind, shape] : cases(p)) {
    SCOPED_TRACE(std::string(tt::pp::schedule_kind_name(kind)) + " " + shape.str());
    const tt::pp::RankSchedule schedule = tt::pp::make_schedule(kind, shape, r);
    const int links = tt::pp::connect_peers(world, schedule, shape, options);
    int expected = 0;
    if (p == 2) expected = 2;  // one peer, both directions (with chunks: still the one peer)
    if (p > 2) {
      const bool wraps = shape.chunks > 1;
      expected = (r > 0 || wraps ? 2 : 0) + (r < p - 1 || wraps ? 2 : 0);
    }
    EXPECT_EQ(links, expected);
    ToyStages stages(shape, r);
    tt::pp::run_schedule(world, schedule, shape, stages, options);
    const Reference ref = reference(shape.virtual_stages(), shape.micro_batches);
    const int s = tt::pp::virtual_stage_of(shape, r, 0);
    EXPECT_LE(max_diff(stages.weights[s].grad(), ref.weights[s].grad()), 1e-5);
  }
  world.barrier();
}

TEST(Ch14_Timeline, RecordsEveryOperationMpi) {
  dist::ProcessGroup& world = dist::world();
  const int p = world.world_size(), r = world.rank();
  const PipelineShape shape{p, 4, 1};
  const tt::pp::RankSchedule schedule = tt::pp::make_schedule(ScheduleKind::kOneFOneB, shape, r);
  ToyStages stages(shape, r);
  const tt::pp::ExecutorResult result =
      tt::pp::run_schedule(world, schedule, shape, stages, {{kRows, kC}, {}, /*timeline=*/true});
  const tt::pp::Timeline& t = result.timeline;
  EXPECT_EQ(t.rank, r);
  // One event per compute operation and one per batch of transfers.
  std::size_t expected = 0;
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const bool compute = tt::pp::is_compute(schedule[i].kind);
    if (compute || i == 0 || tt::pp::is_compute(schedule[i - 1].kind)) ++expected;
  }
  ASSERT_EQ(t.events.size(), expected);
  double previous_end = 0;
  int computes = 0;
  for (const auto& e : t.events) {
    EXPECT_LE(previous_end, e.start_ms + 1e-9);
    EXPECT_LE(e.start_ms, e.end_ms);
    previous_end = e.end_ms;
    computes += tt::pp::is_compute(e.op.kind) ? 1 : 0;
  }
  EXPECT_EQ(computes, 2 * shape.micro_batches);
  EXPECT_EQ(t.events.front().label, r == 0 ? "F0" : "rA0");
  EXPECT_GE(t.span_ms, previous_end);
  EXPECT_GT(t.busy_ms(), 0.0);
  EXPECT_GE(t.bubble(), 0.0);
  EXPECT_LT(t.bubble(), 1.0);

  // CSV and a gnuplot script per rank; the PNG when gnuplot is installed.
  tt::testing::TempDir dir;
  const std::string csv = dir.file("timeline.csv"), script = dir.file("timeline.gnuplot");
  tt::pp::write_timeline_csv(t, csv);
  std::ifstream in(csv);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  EXPECT_EQ(header, "rank,kind,label,micro_batch,chunk,start_ms,end_ms");
  const std::string prefix = std::to_string(r) + (r == 0 ? ",F,F0,0,0," : ",X,rA0,0,0,");
  EXPECT_EQ(first.rfind(prefix, 0), 0u) << first;
  tt::pp::write_gnuplot_script(script, csv, dir.file("timeline.png"), "rank " + std::to_string(r));
  if (tt::pp::run_gnuplot(script)) {
    EXPECT_GT(std::filesystem::file_size(dir.file("timeline.png")), 0u);
  }
  world.barrier();
}

TEST(Ch14_Timeline, SimulatedTimelineMatchesTheReplay) {
  const PipelineShape shape{4, 8, 1};
  std::vector<tt::pp::RankSchedule> s;
  for (int r = 0; r < 4; ++r) s.push_back(tt::pp::make_schedule(ScheduleKind::kOneFOneB, shape, r));
  const auto replay = tt::pp::check_schedules(s, shape);
  const double whole = tt::pp::simulated_bubble(replay);
  double mean = 0;
  for (int r = 0; r < 4; ++r) {
    tt::pp::Timeline t = tt::pp::simulated_timeline(replay[r], r, 2.0);
    EXPECT_EQ(t.events.size(), 16u);
    t.span_ms = 2.0 * (8 + 3) * 3;  // the whole replay: (m + p - 1)(t_f + t_b)
    mean += t.bubble() / 4;
  }
  EXPECT_NEAR(mean, whole, 1e-12);
}

}  // namespace
