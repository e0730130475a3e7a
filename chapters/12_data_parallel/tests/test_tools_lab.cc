// The tools lab: one Chrome trace event (exercise ch12.5), the TraceWriter's timeline of a step
// (one process, and DDP under mpirun: one process per rank, the buckets' all-reduces), and the
// bus bandwidth of an all-reduce (exercise ch12.6).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "ch12_test_util.h"
#include "tt/bandwidth.h"
#include "tt/ddp.h"
#include "tt/trace.h"

using namespace tt;
using nlohmann::json;

namespace {

trace::TraceEvent complete_event() {
  return {"matmul", "op", 'X', 12.5, 3.25, 1, 1, {{"shapes", "[2, 3] [3, 4]"}, {"device", "cpu"}}};
}

}  // namespace

TEST(Ch12_5_TraceEvent, CompleteEventHasEveryFieldOfTheFormat) {
  const json j = json::parse(trace::trace_event_json(complete_event()));
  EXPECT_EQ(j.at("name"), "matmul");
  EXPECT_EQ(j.at("cat"), "op");
  EXPECT_EQ(j.at("ph"), "X");
  EXPECT_DOUBLE_EQ(j.at("ts").get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j.at("dur").get<double>(), 3.25);
  EXPECT_EQ(j.at("pid"), 1);
  EXPECT_EQ(j.at("tid"), 1);
  EXPECT_EQ(j.at("args").at("shapes"), "[2, 3] [3, 4]");
  EXPECT_EQ(j.at("args").at("device"), "cpu");
  EXPECT_FALSE(j.contains("s")) << j.dump();
}

TEST(Ch12_5_TraceEvent, InstantIsThreadScopedWithoutDurationAndArgsDefaultToAnObject) {
  trace::TraceEvent e{"bucket 0 ready", "comm", 'i', 7, 0, 3, 0, {}};
  const json j = json::parse(trace::trace_event_json(e));
  EXPECT_EQ(j.at("ph"), "i");
  EXPECT_EQ(j.at("s"), "t");
  EXPECT_FALSE(j.contains("dur")) << j.dump();
  EXPECT_EQ(j.at("pid"), 3);
  EXPECT_TRUE(j.at("args").is_object()) << j.dump();
  EXPECT_TRUE(j.at("args").empty()) << j.dump();
  // Names are JSON strings: quotes and backslashes are escaped, not pasted.
  e.name = "say \"hi\" \\ there";
  EXPECT_EQ(json::parse(trace::trace_event_json(e)).at("name"), e.name);
}

TEST(Ch12_5_TraceEvent, RejectsOtherPhasesAndBadTimesNamingTheEvent) {
  trace::TraceEvent e = complete_event();
  e.phase = 'B';
  EXPECT_TT_ERROR(trace::trace_event_json(e), "trace_event_json", "matmul");
  e = complete_event();
  e.dur_us = -1;
  EXPECT_TT_ERROR(trace::trace_event_json(e), "trace_event_json", "matmul");
  e = complete_event();
  e.ts_us = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TT_ERROR(trace::trace_event_json(e), "trace_event_json", "matmul");
}

namespace {

/// The events of a trace document that are not metadata ("ph":"M").
std::vector<json> timed_events(const json& doc) {
  std::vector<json> out;
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") != "M") out.push_back(e);
  }
  return out;
}

double end_of(const json& e) {
  return e.at("ts").get<double>() + (e.contains("dur") ? e.at("dur").get<double>() : 0.0);
}

/// EXPECTs the invariants of a trace: events of one (pid, tid) sorted by start; complete events of
/// one thread either nested or disjoint (what the viewers draw as a stack); every op inside a
/// step of its process.
void expect_well_formed(const json& doc) {
  const std::vector<json> events = timed_events(doc);
  std::map<std::pair<int, int>, std::vector<json>> threads;
  for (const json& e : events) threads[{e.at("pid"), e.at("tid")}].push_back(e);
  const double slack = 1e-3;  // microseconds: rounding of the doubles
  for (const auto& [key, list] : threads) {
    std::vector<const json*> stack;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& e = list[i];
      if (i > 0) {
        EXPECT_LE(list[i - 1].at("ts").get<double>(), e.at("ts").get<double>())
            << "pid " << key.first << " tid " << key.second << ": not sorted at " << e.dump();
      }
      if (e.at("ph") != "X") continue;
      while (!stack.empty() && end_of(*stack.back()) <= e.at("ts").get<double>() + slack) {
        stack.pop_back();
      }
      if (!stack.empty()) {
        EXPECT_LE(end_of(e), end_of(*stack.back()) + slack)
            << e.dump() << " overlaps " << stack.back()->dump() << " without nesting";
      }
      stack.push_back(&e);
    }
  }
  for (const json& e : events) {
    if (e.at("cat") != "op") continue;
    bool inside = false;
    for (const json& s : events) {
      inside = inside || (s.at("cat") == "step" && s.at("pid") == e.at("pid") &&
                          s.at("ts").get<double>() <= e.at("ts").get<double>() + slack &&
                          end_of(e) <= end_of(s) + slack);
    }
    EXPECT_TRUE(inside) << "op outside every step: " << e.dump();
  }
}

std::string temp_path(const std::string& name, int64_t id) {
  return (std::filesystem::temp_directory_path() /
          ("tt_" + name + "_" + std::to_string(id) + ".json"))
      .string();
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

}  // namespace

TEST(Ch12_5_TraceWriter, StepsOfOneProcessNestAndAreOrdered) {
  auto model = ch12_test::make_model(3);
  trace::TraceWriter writer(Device::cpu());
  for (int64_t step = 0; step < 2; ++step) {
    writer.begin_step(step);
    {
      trace::TraceWriter::Span span(writer, "forward+backward");
      ch12_test::forward_backward(*model, ch12_test::global_batch(step));
    }
    writer.end_step();
  }
  EXPECT_TT_ERROR(writer.end_step(), "end_step", "no step is open");
  const std::string path = temp_path("trace_one", getpid());
  writer.write(path);
  const json doc = read_json(path);
  std::filesystem::remove(path);
  expect_well_formed(doc);
  std::map<std::string, int> cats;
  std::set<std::string> ops;
  for (const json& e : timed_events(doc)) {
    ++cats[e.at("cat").get<std::string>()];
    if (e.at("cat") == "op") ops.insert(e.at("name").get<std::string>());
  }
  EXPECT_EQ(cats["step"], 2);
  EXPECT_EQ(cats["phase"], 2);
  EXPECT_GT(cats["op"], 10) << "forward and backward of an MLP dispatch many kernels";
  EXPECT_TRUE(ops.count("matmul") == 1) << "the Linear layers' matmuls are on the timeline";
  bool named = false;
  for (const json& e : doc.at("traceEvents")) {
    named = named || (e.at("ph") == "M" && e.at("name") == "thread_name" &&
                      e.at("args").at("name") == "kernels");
  }
  EXPECT_TRUE(named) << "thread 1 is named";
}

TEST(Ch12_5_TraceWriterMpi, DdpStepHasOneProcessPerRankAndItsAllReduces) {
  dist::ProcessGroup& g = dist::world();
  dist::DistributedDataParallel ddp(ch12_test::make_model(5), g, {.bucket_cap_bytes = 256});
  const int64_t rows = ch12_test::kGlobalBatch / g.world_size();
  // One file name for every rank: rank 0's pid.
  Tensor id = full({1}, static_cast<double>(getpid()), {.dtype = DType::kInt64});
  g.broadcast(id, 0);
  const std::string path = temp_path("trace_ddp", id.at<int64_t>({0}));
  {
    trace::TraceWriter writer(Device::cpu(), &g);
    for (int64_t step = 0; step < 2; ++step) {
      writer.begin_step(step);
      {
        trace::TraceWriter::Span span(writer, "backward");
        ch12_test::forward_backward(
            ddp.module(), ch12_test::rows(ch12_test::global_batch(step), g.rank() * rows, rows));
      }
      ddp.sync_gradients();
      writer.end_step(&ddp.reducer());
    }
    writer.write(path);
  }
  if (g.rank() == 0) {
    const json doc = read_json(path);
    expect_well_formed(doc);
    std::set<int> pids, comm_pids;
    int all_reduces = 0, ready = 0;
    for (const json& e : timed_events(doc)) {
      pids.insert(e.at("pid").get<int>());
      if (e.at("cat") == "comm" && e.at("ph") == "X") {
        ++all_reduces;
        comm_pids.insert(e.at("pid").get<int>());
        EXPECT_TRUE(e.at("tid") == 2 || e.at("tid") >= 4) << "a collectives thread: " << e.dump();
      }
      if (e.at("cat") == "comm" && e.at("ph") == "i") ++ready;
    }
    EXPECT_EQ(static_cast<int>(pids.size()), g.world_size());
    EXPECT_EQ(static_cast<int>(comm_pids.size()), g.world_size());
    const int buckets = static_cast<int>(ddp.reducer().buckets().size());
    EXPECT_GT(buckets, 1) << "256-byte buckets split the MLP";
    EXPECT_EQ(all_reduces, 2 * buckets * g.world_size()) << "2 steps, every bucket, every rank";
    EXPECT_EQ(ready, all_reduces);
    std::filesystem::remove(path);
  }
  g.barrier();
}

TEST(Ch12_6_BusBandwidth, IsAlgorithmBandwidthTimesTwoNMinusOneOverN) {
  // 1 GB in 10 ms: algbw 100 GB/s.
  EXPECT_DOUBLE_EQ(dist::algorithm_bandwidth(1'000'000'000, 0.01), 1e11);
  EXPECT_DOUBLE_EQ(dist::bus_bandwidth(1'000'000'000, 0.01, 2), 1e11);     // 2(1)/2 = 1
  EXPECT_DOUBLE_EQ(dist::bus_bandwidth(1'000'000'000, 0.01, 8), 1.75e11);  // 2(7)/8
  EXPECT_DOUBLE_EQ(dist::bus_bandwidth(1'000'000'000, 0.01, 4), 1.5e11);   // 2(3)/4
  EXPECT_DOUBLE_EQ(dist::bus_bandwidth(4096, 2e-6, 1), 0.0);               // nothing moves
  EXPECT_DOUBLE_EQ(dist::bus_bandwidth(0, 1e-3, 4), 0.0);
}

TEST(Ch12_6_BusBandwidth, RejectsImpossibleMeasurements) {
  EXPECT_TT_ERROR(dist::bus_bandwidth(1024, 0.0, 2), "bus_bandwidth", "seconds=0");
  EXPECT_TT_ERROR(dist::bus_bandwidth(1024, -1e-3, 2), "bus_bandwidth", "seconds=-0.001");
  EXPECT_TT_ERROR(dist::bus_bandwidth(-1, 1e-3, 2), "bus_bandwidth", "bytes=-1");
  EXPECT_TT_ERROR(dist::bus_bandwidth(1024, 1e-3, 0), "bus_bandwidth", "world_size=0");
  EXPECT_TT_ERROR(dist::bus_bandwidth(1024, std::numeric_limits<double>::infinity(), 2),
                  "bus_bandwidth", "seconds=inf");
}

// ----- the programs of the lab under mpirun -np 2 (plain tests: they start mpirun themselves) --

TEST(Ch12_6_AllreduceBenchApp, TwoRanksReportBusBandwidthPerSizeAsJson) {
  if (!dist::built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job to run";
  const std::string path = temp_path("busbw", getpid());
  const ch12_test::JobResult r = ch12_test::run_mpi_job(
      2, ch12_test::program_path("tt_allreduce_bench"),
      "--max-mib 1 --iters 1 --link-gbps 10 --json '" + path + "'", "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("busbw GB/s"), std::string::npos) << r.output;
  const json doc = read_json(path);
  std::filesystem::remove(path);
  EXPECT_EQ(doc.at("world_size"), 2);
  EXPECT_EQ(doc.at("backend"), "mpi");
  const json& rows = doc.at("rows");
  ASSERT_EQ(rows.size(), 6u) << "1 KiB .. 1 MiB, x4: " << doc.dump();
  int64_t bytes = 1024;
  for (const json& row : rows) {
    EXPECT_EQ(row.at("bytes"), bytes);
    bytes *= 4;
    // N = 2: 2(N-1)/N = 1, so busbw equals algbw, which is bytes / time.
    const double ms = row.at("ms"), algbw = row.at("algbw_gbps"), busbw = row.at("busbw_gbps");
    EXPECT_GT(ms, 0);
    EXPECT_NEAR(algbw, row.at("bytes").get<double>() / (ms * 1e-3) / 1e9, 1e-9 * algbw);
    EXPECT_NEAR(busbw, algbw, 1e-12 * algbw) << row.dump();
    EXPECT_GT(row.at("ring_busbw_gbps").get<double>(), 0) << row.dump();
  }
}

TEST(Ch12_5_DdpDemoTrace, TwoRanksWriteOneTraceOfTheirStepsAndAllReduces) {
  if (!dist::built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job to run";
  const std::string path = temp_path("ddp_demo_trace", getpid());
  const ch12_test::JobResult r = ch12_test::run_mpi_job(
      2, ch12_test::program_path("tt_ddp_demo"),
      "--layers 3 --hidden 64 --bucket-kb 16 --steps 4 --trace '" + path + "' --trace-steps 2",
      "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("trace of the last 2 step(s) written"), std::string::npos) << r.output;
  const json doc = read_json(path);
  std::filesystem::remove(path);
  expect_well_formed(doc);
  std::map<int, int> steps, all_reduces;
  std::set<std::string> phases;
  for (const json& e : timed_events(doc)) {
    if (e.at("cat") == "step") ++steps[e.at("pid").get<int>()];
    if (e.at("cat") == "comm" && e.at("ph") == "X") ++all_reduces[e.at("pid").get<int>()];
    if (e.at("cat") == "phase") phases.insert(e.at("name").get<std::string>());
  }
  EXPECT_EQ(steps, (std::map<int, int>{{0, 2}, {1, 2}})) << "2 traced steps on each rank";
  ASSERT_EQ(all_reduces.size(), 2u);
  EXPECT_EQ(all_reduces[0], all_reduces[1]);
  EXPECT_GE(all_reduces[0], 2 * 2) << "16 KiB buckets split the MLP into several";
  EXPECT_EQ(phases, (std::set<std::string>{"forward", "backward", "sync_gradients + AdamW"}));
}
