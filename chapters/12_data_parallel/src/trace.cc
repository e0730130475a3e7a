// The step timeline as Chrome trace-event JSON (tt/trace.h): TraceWriter. One event's JSON,
// trace_event_json, is exercise ch12.5 (solutions/12_data_parallel/trace_event.cc).
#include "tt/trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tt/error.h"
#include "tt/nvtx.h"

namespace tt::trace {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kHost = 0, kKernels = 1, kCollectives = 2, kCpuKernels = 3;
/// Lane k >= 1 of the collectives (an all-reduce started while k others were in flight).
constexpr int kMoreCollectives = 4;

std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string s;
  for (const Shape& shape : shapes) s += (s.empty() ? "" : " ") + shape_str(shape);
  return s;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// A metadata event ("ph":"M") naming a process or a thread.
nlohmann::json name_event(const char* what, int pid, int tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

const char* thread_name(int tid) {
  switch (tid) {
    case kHost:
      return "host";
    case kKernels:
      return "kernels";
    case kCollectives:
      return "collectives";
    case kCpuKernels:
      return "cpu kernels";
    default:
      return tid >= kMoreCollectives ? "collectives (overlapping)" : "other";
  }
}

TraceWriter::TraceWriter(Device device, dist::ProcessGroup* group)
    : device_(device), group_(group), profiler_(device) {
  if (group_ != nullptr) {
    rank_ = group_->rank();
    if (device_.is_cuda() && dist::ProcessGroup::built_with_nccl())
      anchor_ = zeros({1}, {.device = device_});
    group_->barrier();
  }
  origin_ = Clock::now();
}

void TraceWriter::begin_step(int64_t step) {
  TT_CHECK(!in_step_, "TraceWriter::begin_step(", step, "): step ", step_, " is still open");
  step_ = step;
  in_step_ = true;
  nvtx::push(("step " + std::to_string(step)).c_str());
  // On CUDA the mark and the profiler's first event are recorded back to back on the compute
  // stream: the collectives' device times (from the mark) and the kernels' (from that event)
  // share one origin.
  if (anchor_.defined()) step_mark_ = group_->mark(anchor_);
  profiler_.start();
}

void TraceWriter::end_step(const dist::Reducer* reducer) {
  TT_CHECK(in_step_, "TraceWriter::end_step: no step is open (call begin_step first)");
  in_step_ = false;
  const Clock::time_point host_end = Clock::now();
  profiler_.stop();
  nvtx::pop();
  const double step_ts = us_since_origin(profiler_.host_start());
  const bool cuda = device_.is_cuda();
  const std::string name = "step " + std::to_string(step_);
  add({name,
       "step",
       'X',
       step_ts,
       us_since_origin(host_end) - step_ts,
       rank_,
       kHost,
       {{"clock", "host: begin_step .. end_step"}}});
  if (cuda) {  // the device's view of the same step, enclosing its kernels
    add({name,
         "step",
         'X',
         step_ts,
         profiler_.step_seconds() * 1e6,
         rank_,
         kKernels,
         {{"clock", "device: CUDA events on the compute stream"}}});
  }
  for (const prof::KernelRecord& r : profiler_.records()) {
    const bool on_device = r.device.is_cuda();
    add({r.op,
         "op",
         'X',
         step_ts + r.start_seconds * 1e6,
         r.seconds * 1e6,
         rank_,
         cuda && !on_device ? kCpuKernels : kKernels,
         {{"shapes", shapes_text(r.shapes)},
          {"device", r.device.str()},
          {"bytes", fixed(r.bytes, 0)},
          {"flops", fixed(r.flops, 0)}}});
  }
  if (reducer == nullptr) return;
  // The end of backward: on CUDA where the GPU ran its last kernel (the mark finalize_backward
  // records first), on the CPU when finalize_backward was called.
  if (reducer->backward_end_mark() && step_mark_) {
    add({"backward end",
         "mark",
         'i',
         step_ts + reducer->backward_end_mark()->ms_since(*step_mark_) * 1e3,
         0,
         rank_,
         kKernels,
         {}});
  } else if (!reducer->timeline().empty()) {
    add({"backward end",
         "mark",
         'i',
         us_since_origin(reducer->finalize_called()),
         0,
         rank_,
         kHost,
         {}});
  }
  const auto& buckets = reducer->buckets();
  const auto& timeline = reducer->timeline();
  std::vector<double> lane_end;  // per lane, when its last all-reduce ended
  for (std::size_t b = 0; b < timeline.size(); ++b) {
    const dist::BucketTiming& t = timeline[b];
    const std::string bytes =
        std::to_string(buckets[b].numel * static_cast<int64_t>(dtype_size(buckets[b].dtype)));
    const std::string comm_name = "all_reduce bucket " + std::to_string(b);
    add({"bucket " + std::to_string(b) + " ready",
         "comm",
         'i',
         us_since_origin(t.ready),
         0,
         rank_,
         kHost,
         {{"bytes", bytes}}});
    double begin_us = us_since_origin(t.started), end_us = us_since_origin(t.finished);
    std::string clock = "host: MPI_Iallreduce started .. first seen complete";
    if (t.device_begin && t.device_end && step_mark_) {
      begin_us = step_ts + t.device_begin->ms_since(*step_mark_) * 1e3;
      end_us = step_ts + t.device_end->ms_since(*step_mark_) * 1e3;
      clock = "device: CUDA events on the NCCL stream";
    }
    // All-reduces in flight at once (MPI's nonblocking ones) go to separate lanes, so that the
    // events of one thread nest (a viewer stacks a thread's events by containment).
    std::size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > begin_us) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(0);
    lane_end[lane] = std::max(begin_us, end_us);
    add({comm_name,
         "comm",
         'X',
         begin_us,
         std::max(0.0, end_us - begin_us),
         rank_,
         lane == 0 ? kCollectives : kMoreCollectives + static_cast<int>(lane) - 1,
         {{"bytes", bytes},
          {"params", std::to_string(buckets[b].entries.size())},
          {"clock", clock}}});
  }
}

TraceWriter::Span::Span(TraceWriter& writer, std::string name)
    : writer_(writer), name_(std::move(name)), begin_(Clock::now()) {
  nvtx::push(name_.c_str());
}

TraceWriter::Span::~Span() {
  nvtx::pop();
  const double begin = writer_.us_since_origin(begin_);
  writer_.add({name_,
               "phase",
               'X',
               begin,
               writer_.us_since_origin(Clock::now()) - begin,
               writer_.rank(),
               kHost,
               {}});
}

void TraceWriter::add(TraceEvent event) {
  event.pid = rank_;
  events_.push_back(std::move(event));
}

double TraceWriter::us_since_origin(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

std::string TraceWriter::json() const {
  nlohmann::json list = nlohmann::json::array();
  const std::string where = device_.is_cuda() ? device_.str() : "cpu";
  list.push_back(
      name_event("process_name", rank_, 0, "rank " + std::to_string(rank_) + " (" + where + ")"));
  std::vector<int> tids;
  for (const TraceEvent& e : events_) {
    if (std::find(tids.begin(), tids.end(), e.tid) == tids.end()) tids.push_back(e.tid);
  }
  std::sort(tids.begin(), tids.end());
  for (int tid : tids) list.push_back(name_event("thread_name", rank_, tid, thread_name(tid)));
  // Sorted per thread by start, an enclosing event (longer) before what it encloses: the order
  // in which the viewers nest complete events.
  std::vector<const TraceEvent*> sorted;
  for (const TraceEvent& e : events_) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const TraceEvent* a, const TraceEvent* b) {
    if (a->tid != b->tid) return a->tid < b->tid;
    if (a->ts_us != b->ts_us) return a->ts_us < b->ts_us;
    return a->dur_us > b->dur_us;
  });
  for (const TraceEvent* e : sorted) list.push_back(nlohmann::json::parse(trace_event_json(*e)));
  nlohmann::json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  return doc.dump(1);
}

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text << '\n';
  out.close();
  TT_CHECK(out.good(), "TraceWriter::write: cannot write ", path);
}

}  // namespace

void TraceWriter::write(const std::string& path) const {
  const int n = group_ != nullptr ? group_->world_size() : 1;
  if (n == 1) {
    write_file(path, json());
    return;
  }
  const std::string part = path + ".rank" + std::to_string(rank_);
  write_file(part, json());
  group_->barrier();
  if (rank_ == 0) {
    nlohmann::json merged = {{"traceEvents", nlohmann::json::array()}, {"displayTimeUnit", "ms"}};
    for (int r = 0; r < n; ++r) {
      const std::string file = path + ".rank" + std::to_string(r);
      std::ifstream in(file);
      TT_CHECK(in.good(), "TraceWriter::write: rank ", r, "'s part ", file,
               " is not readable from rank 0 (do the ranks share a file system?)");
      const nlohmann::json doc = nlohmann::json::parse(in);
      for (const auto& e : doc.at("traceEvents")) merged["traceEvents"].push_back(e);
      in.close();
      std::remove(file.c_str());
    }
    write_file(path, merged.dump(1));
  }
  group_->barrier();
}

}  // namespace tt::trace
