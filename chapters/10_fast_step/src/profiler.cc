// The per-op profiler (tt/profiler.h): recording through the kernel observer of chapter 02,
// CUDA event pairs or wall-clock times, aggregation, FLOP counts, the table and the JSON. Reading
// the profile (read_profile) is exercise ch10.1, in profile_report.cc.
#include "tt/profiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "tt/cuda_matmul.h"  // cuda::allow_tf32
#include "tt/error.h"

#if TT_WITH_CUDA
#include <cuda_runtime_api.h>

#include "tt/cuda_device.h"
#endif

namespace tt::prof {

const char* bound_name(Bound bound) {
  switch (bound) {
    case Bound::kMemory:
      return "memory";
    case Bound::kCompute:
      return "compute";
    case Bound::kUnknown:
      break;
  }
  return "-";
}

double kernel_flops(const KernelCall& call) {
  const auto& t = call.tensors;
  const std::string& op = call.op;
  if (op == "matmul_lt_wgrad" && t.size() >= 2 && t[1].shape.size() == 2) {
    // dw [N, K] = dy [M, N]^T x [M, K]: N·K dot products of length M.
    return 2.0 * static_cast<double>(shape_numel(t[0].shape)) *
           static_cast<double>(t[1].shape.front());
  }
  if ((op.rfind("matmul", 0) == 0 || op == "gemm") && t.size() >= 2 && t[1].shape.size() >= 2) {
    // out [..., M, N] = a [..., M, K] @ b [..., K, N]: M·N dot products of length K, each K
    // multiplies and K adds ("gemm": the same, scaled by alpha and added to beta out).
    return 2.0 * static_cast<double>(shape_numel(t[0].shape)) *
           static_cast<double>(t[1].shape.back());
  }
  const bool fa_fwd = op == "flash_attention_forward", fa_bwd = op == "flash_attention_backward";
  if ((fa_fwd || fa_bwd) && !t.empty() && t[0].shape.size() == 4) {
    // t[0] is out (forward) or dq (backward), [B, NH, T, hs]. The causal half has T(T+1)/2
    // (query, key) pairs per head; each product over them costs 2·hs FLOPs per pair: S = QKᵀ and
    // O = PV forward; S again, dV, dP, dQ and dK backward.
    const Shape& s = t[0].shape;
    const double heads = static_cast<double>(s[0] * s[1]), n = static_cast<double>(s[2]);
    const double pair_products = heads * n * (n + 1) / 2 * 2.0 * static_cast<double>(s[3]);
    return (fa_fwd ? 2.0 : 5.0) * pair_products;
  }
  return 0;
}

// ----- CUDA events ----------------------------------------------------------------------------

/// A pool of timing events on one device: reused by every profile of the Profiler, so a
/// steady-state step creates none.
struct Profiler::CudaEvents {
#if TT_WITH_CUDA
  explicit CudaEvents(int device) : device(device) {}
  ~CudaEvents() {
    cuda::DeviceGuard guard(device);
    for (cudaEvent_t e : pool) cudaEventDestroy(e);
  }
  /// The index of an event recorded now on the device's stream (a new one when all are used).
  int record() {
    cuda::DeviceGuard guard(device);
    if (used == pool.size()) {
      cudaEvent_t e = nullptr;
      TT_CUDA_CHECK(cudaEventCreate(&e));
      pool.push_back(e);
    }
    TT_CUDA_CHECK(cudaEventRecord(pool[used], cuda::stream(device)));
    return static_cast<int>(used++);
  }
  /// Milliseconds between two recorded events (both must have completed).
  double seconds(int from, int to) const {
    float ms = 0;
    TT_CUDA_CHECK(cudaEventElapsedTime(&ms, pool[static_cast<std::size_t>(from)],
                                       pool[static_cast<std::size_t>(to)]));
    return static_cast<double>(ms) * 1e-3;
  }
  /// Waits until the event `i` has completed on the GPU.
  void wait(int i) const {
    cuda::count_host_sync();
    TT_CUDA_CHECK(cudaEventSynchronize(pool[static_cast<std::size_t>(i)]));
  }

  int device;
  std::vector<cudaEvent_t> pool;
  std::size_t used = 0;  // events recorded in the current profile
#endif
};

// ----- Profiler ----------------------------------------------------------------------------------

Profiler::Profiler(Device device) : device_(device) {}

Profiler::~Profiler() {
  if (running_) set_kernel_observer(previous_);
}

void Profiler::start() {
  TT_CHECK(!running_, "Profiler::start: already running (call stop() first)");
#if TT_WITH_CUDA
  if (device_.is_cuda() && !events_) events_ = std::make_unique<CudaEvents>(device_.index);
#else
  TT_CHECK(!device_.is_cuda(), "Profiler::start: cannot profile ", device_.str(),
           ": this build has no CUDA (TT_ENABLE_CUDA=OFF or no nvcc)");
#endif
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.clear();
    records_.clear();
    step_seconds_ = 0;
#if TT_WITH_CUDA
    if (events_) events_->used = 0;
#endif
  }
  step_begin_ = Clock::now();
#if TT_WITH_CUDA
  if (device_.is_cuda()) events_->record();  // event 0: the step start
#endif
  previous_ = set_kernel_observer(this);
  running_ = true;
}

void Profiler::stop() {
  TT_CHECK(running_, "Profiler::stop: not running (call start() first)");
  set_kernel_observer(previous_);
  running_ = false;
  std::lock_guard<std::mutex> lock(mutex_);
#if TT_WITH_CUDA
  if (device_.is_cuda()) {
    const int last = events_->record();
    events_->wait(last);  // the one synchronization: every earlier event has completed too
    step_seconds_ = events_->seconds(0, last);
    for (Pending& p : pending_) {
      if (p.event_begin >= 0) {
        p.record.seconds = events_->seconds(p.event_begin, p.event_end);
        p.record.start_seconds = events_->seconds(0, p.event_begin);
      }
    }
  }
#endif
  if (!device_.is_cuda())
    step_seconds_ = std::chrono::duration<double>(Clock::now() - step_begin_).count();
  for (Pending& p : pending_) {
    if (p.event_begin < 0) {
      p.record.seconds = std::chrono::duration<double>(p.end - p.begin).count();
      p.record.start_seconds = std::chrono::duration<double>(p.begin - step_begin_).count();
    }
    records_.push_back(std::move(p.record));
  }
  pending_.clear();
}

std::uint64_t Profiler::on_kernel_begin(const KernelCall& call) {
  Pending p;
  p.record.op = call.op;
  p.record.device = call.device;
  for (const KernelTensorArg& t : call.tensors) {
    p.record.bytes += static_cast<double>(t.bytes);
    p.record.shapes.push_back(t.shape);
  }
  p.record.flops = kernel_flops(call);
  std::lock_guard<std::mutex> lock(mutex_);
  if (call.device.is_cuda()) {
    TT_CHECK(device_ == call.device, "Profiler: kernel '", call.op, "' runs on ", call.device.str(),
             " but this profiler times ", device_.str());
#if TT_WITH_CUDA
    p.event_begin = events_->record();
#endif
  } else {
    p.begin = Clock::now();
  }
  pending_.push_back(std::move(p));
  return pending_.size() - 1;
}

void Profiler::on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (token >= pending_.size()) return;  // started before a start() that cleared the list
  Pending& p = pending_[token];
  if (!call.device.is_cuda()) {
    p.end = now;
    return;
  }
#if TT_WITH_CUDA
  try {
    p.event_end = events_->record();
  } catch (...) {
    // A failing cudaEventRecord leaves the call untimed; the CUDA error surfaces at stop().
    p.event_end = p.event_begin;
  }
#endif
}

std::vector<OpStats> Profiler::op_stats(GroupBy group) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OpStats> out;
  std::map<std::string, std::size_t> index;
  for (const KernelRecord& r : records_) {
    std::string name = r.op;
    if (group == GroupBy::kOpAndShapes) {
      for (const Shape& shape : r.shapes) name += " " + shape_str(shape);
    }
    if (r.device.type != device_.type)
      name += std::string(" [") + device_type_name(r.device.type) + "]";
    auto [it, inserted] = index.emplace(name, out.size());
    if (inserted) out.push_back(OpStats{name, 0, 0, 0, 0});
    OpStats& s = out[it->second];
    ++s.calls;
    s.seconds += r.seconds;
    s.bytes += r.bytes;
    s.flops += r.flops;
  }
  return out;
}

ProfileScope::ProfileScope(Profiler& profiler) : profiler_(profiler) {
  profiler_.start();
}

ProfileScope::~ProfileScope() {
  try {
    if (profiler_.running()) profiler_.stop();
  } catch (...) {
    // A destructor must not throw; stop() explicitly to see the error.
  }
}

// ----- output ------------------------------------------------------------------------------------

namespace {

double dispatched_seconds(const std::vector<ReportRow>& rows) {
  double s = 0;
  for (const ReportRow& r : rows) s += r.op.seconds;
  return s;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string format_profile_table(const std::vector<ReportRow>& rows, double step_seconds,
                                 const Peaks& peaks, std::size_t max_rows) {
  struct Column {
    const char* title;
    int width;
  };
  const std::size_t n = max_rows > 0 ? std::min(max_rows, rows.size()) : rows.size();
  int op_width = 30;
  for (std::size_t i = 0; i < n; ++i) {
    op_width = std::max(op_width, static_cast<int>(rows[i].op.op.size()));
  }
  const Column cols[] = {{"Op", op_width}, {"Calls", 7},     {"Total ms", 10}, {"% step", 8},
                         {"Avg us", 10},   {"GB moved", 10}, {"GB/s", 9},      {"TFLOP/s", 9},
                         {"FLOP/B", 8},    {"Bound", 8},     {"% of roof", 10}};
  std::ostringstream os;
  std::string rule;
  for (const Column& c : cols) rule += std::string(static_cast<std::size_t>(c.width), '-') + "  ";
  rule.resize(rule.size() - 2);
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const auto w = static_cast<std::size_t>(cols[i].width);
      std::string cell = cells[i];
      if (cell.size() > w) cell = cell.substr(0, w - 1) + "~";
      const std::string pad(w - cell.size(), ' ');
      out += (i == 0 ? cell + pad : pad + cell) + (i + 1 < cells.size() ? "  " : "");
    }
    os << out << '\n';
  };
  os << rule << '\n';
  std::vector<std::string> header;
  for (const Column& c : cols) header.emplace_back(c.title);
  line(header);
  os << rule << '\n';
  for (std::size_t i = 0; i < n; ++i) {
    const ReportRow& r = rows[i];
    const bool has_flops = r.op.flops > 0;
    line({r.op.op, std::to_string(r.op.calls), fixed(r.op.seconds * 1e3, 3),
          fixed(r.percent_of_step, 1) + "%",
          fixed(r.op.calls > 0 ? r.op.seconds * 1e6 / static_cast<double>(r.op.calls) : 0, 1),
          fixed(r.op.bytes / 1e9, 3), fixed(r.gb_per_s, 1),
          has_flops ? fixed(r.tflop_per_s, 2) : "-", has_flops ? fixed(r.intensity, 1) : "-",
          bound_name(r.bound),
          r.bound == Bound::kUnknown ? "-" : fixed(100 * r.fraction_of_peak, 1) + "%"});
  }
  if (n < rows.size()) {
    double rest = 0;
    for (std::size_t i = n; i < rows.size(); ++i) rest += rows[i].op.seconds;
    os << "... " << rows.size() - n << " more ops, " << fixed(rest * 1e3, 3) << " ms\n";
  }
  os << rule << '\n';
  const double dispatched = dispatched_seconds(rows);
  const double pct = step_seconds > 0 ? 100 * dispatched / step_seconds : 0;
  os << "Step: " << fixed(step_seconds * 1e3, 3)
     << " ms. Dispatched kernels: " << fixed(dispatched * 1e3, 3) << " ms (" << fixed(pct, 1)
     << "%). Not dispatched (copies, fills, allocation, host gaps): "
     << fixed((step_seconds - dispatched) * 1e3, 3) << " ms.\n";
  if (peaks.bytes_per_second > 0 && peaks.flops_per_second > 0) {
    os << "Roofline: " << fixed(peaks.bytes_per_second / 1e9, 0) << " GB/s, "
       << fixed(peaks.flops_per_second / 1e12, 1) << " TFLOP/s, ridge at "
       << fixed(peaks.flops_per_second / peaks.bytes_per_second, 1)
       << " FLOP/B. GB moved is a lower bound (each tensor argument counted once).\n";
  }
  return os.str();
}

Peaks default_peaks(Device device, bool bf16) {
  if (!device.is_cuda()) return {};
  if (bf16) return kH100Bf16;
  return cuda::allow_tf32() ? kH100Tf32 : kH100Fp32;
}

std::string profile_report(const Profiler& profiler, const Peaks& peaks, const std::string& what,
                           std::size_t top_shapes) {
  const double step = profiler.step_seconds();
  std::ostringstream os;
  os << "Per-op profile of " << what << " (" << profiler.records().size() << " kernel calls):\n"
     << format_profile_table(read_profile(profiler.op_stats(), step, peaks), step, peaks) << "\n"
     << "The same step by op and input shapes (top " << top_shapes << "):\n"
     << format_profile_table(
            read_profile(profiler.op_stats(Profiler::GroupBy::kOpAndShapes), step, peaks), step,
            peaks, top_shapes);
  return os.str();
}

std::string profile_json(const std::vector<ReportRow>& rows, double step_seconds,
                         const Peaks& peaks) {
  nlohmann::json j;
  j["step_ms"] = step_seconds * 1e3;
  j["dispatched_ms"] = dispatched_seconds(rows) * 1e3;
  j["peaks"] = {{"bytes_per_second", peaks.bytes_per_second},
                {"flops_per_second", peaks.flops_per_second}};
  nlohmann::json list = nlohmann::json::array();
  for (const ReportRow& r : rows) {
    list.push_back({{"op", r.op.op},
                    {"calls", r.op.calls},
                    {"total_ms", r.op.seconds * 1e3},
                    {"percent_of_step", r.percent_of_step},
                    {"bytes", r.op.bytes},
                    {"gb_per_s", r.gb_per_s},
                    {"flops", r.op.flops},
                    {"tflop_per_s", r.tflop_per_s},
                    {"intensity", r.intensity},
                    {"bound", bound_name(r.bound)},
                    {"fraction_of_peak", r.fraction_of_peak}});
  }
  j["rows"] = std::move(list);
  return j.dump(2);
}

}  // namespace tt::prof
