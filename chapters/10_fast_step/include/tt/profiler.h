/// @file profiler.h
/// @brief Measure first: a per-op profile of a training step — every dispatched kernel timed
/// (CUDA events on the device's stream, or the wall clock on the CPU), aggregated per op, read
/// against the roofline of the device, printed as a table and as JSON.
///
/// Use:
/// @code
/// prof::Profiler profiler(Device::cuda());
/// {
///   prof::ProfileScope scope(profiler);  // start() ... stop()
///   train_step();
/// }
/// const auto rows = prof::read_profile(profiler.op_stats(), profiler.step_seconds(),
///                                      prof::kH100Tf32);
/// std::cout << prof::format_profile_table(rows, profiler.step_seconds(), prof::kH100Tf32);
/// @endcode
///
/// The Profiler is a KernelObserver (tt/dispatcher.h): it sees exactly the kernels that go
/// through call_kernel(), forward and backward alike. It does not see what bypasses the registry:
/// the device backend's copies and fills (contiguous(), to(), zeros), allocations, host work and
/// idle gaps; their total is the step time minus the sum of the kernel times, which the table
/// prints as "not dispatched".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tt/dispatcher.h"

namespace tt::prof {

/// One timed kernel call.
struct KernelRecord {
  std::string op;             ///< op name it was dispatched with
  Device device;              ///< where it ran
  double seconds = 0;         ///< its time on the device's timeline
  double bytes = 0;           ///< lower bound of the bytes it moved (sum of tensor footprints)
  double flops = 0;           ///< floating-point operations (kernel_flops), 0 when not counted
  std::vector<Shape> shapes;  ///< shapes of its tensor arguments, in argument order
  /// When it started, in seconds from start() on the step's timeline (the device's stream for a
  /// CUDA kernel of the profiled device, the wall clock for a CPU kernel): what a timeline
  /// (tt/trace.h) places it by.
  double start_seconds = 0;
};

/// Every call of one op, aggregated: the raw material of a profile row.
struct OpStats {
  std::string op;      ///< op name (with " [cpu]" when it ran off the profiled CUDA device)
  int64_t calls = 0;   ///< number of calls
  double seconds = 0;  ///< total time of all calls
  double bytes = 0;    ///< total lower-bound bytes moved
  double flops = 0;    ///< total FLOPs (0 when the op's FLOPs are not counted)
};

/// The roofline of a device: its peak memory bandwidth and peak arithmetic rate. A zero peak
/// means unknown (rows are then not classified).
struct Peaks {
  double bytes_per_second = 0;  ///< peak DRAM bandwidth (bytes/s)
  double flops_per_second = 0;  ///< peak arithmetic rate (FLOP/s) of the precision used
};

/// NVIDIA H100 SXM5 80 GB datasheet: 3.35 TB/s HBM3, 67 TFLOP/s plain FP32 (CUDA cores).
inline constexpr Peaks kH100Fp32{3.35e12, 67e12};
/// The same with TF32 tensor cores: about 495 TFLOP/s dense (989 is the 2:4-sparse figure).
inline constexpr Peaks kH100Tf32{3.35e12, 494.7e12};
/// The same with BF16 tensor cores: about 989 TFLOP/s dense (chapter 11's mixed precision).
inline constexpr Peaks kH100Bf16{3.35e12, 989.4e12};

/// What limits an op on the roofline.
enum class Bound {
  kUnknown,  ///< the peaks are not known
  kMemory,   ///< arithmetic intensity below the ridge point: bandwidth is the ceiling
  kCompute,  ///< at or above the ridge point: the arithmetic rate is the ceiling
};

/// "memory", "compute" or "-".
const char* bound_name(Bound bound);

/// One row of a read profile (see read_profile).
struct ReportRow {
  OpStats op;                     ///< the op's aggregated calls
  double percent_of_step = 0;     ///< 100 * op.seconds / step time
  double gb_per_s = 0;            ///< achieved bandwidth, 1e9 bytes per second
  double tflop_per_s = 0;         ///< achieved arithmetic rate, 1e12 FLOP per second
  double intensity = 0;           ///< arithmetic intensity, FLOP per byte
  Bound bound = Bound::kUnknown;  ///< memory- or compute-bound on the roofline of the peaks
  double fraction_of_peak = 0;    ///< achieved rate / the peak that bounds the op (0..1)
};

/// Reads a profile (exercise ch10.1): the ops ranked by total time, each with its share of the
/// step, achieved bandwidth and FLOP rate, arithmetic intensity and roofline classification.
/// Throws tt::Error when step_seconds is not positive or a peak is negative.
std::vector<ReportRow> read_profile(std::vector<OpStats> ops, double step_seconds,
                                    const Peaks& peaks);

/// FLOPs of a dispatched call, from its shapes: 2·M·N·K per GEMM for "gemm" and the "matmul*"
/// ops (batch included: 2 · numel(out) · K, with K the last dim of the second argument; for
/// "matmul_lt_wgrad", dw [N, K] from dy [M, N], 2 · N · K · M), the useful (causal half) FLOPs
/// of "flash_attention_forward" (two products: 4·B·NH·hs·T(T+1)/2) and
/// "flash_attention_backward" (five: 10·B·NH·hs·T(T+1)/2); 0 for every other op (element-wise
/// and normalization ops do a few FLOPs per byte).
double kernel_flops(const KernelCall& call);

/// Records every kernel dispatched between start() and stop(). On CUDA each call is bracketed
/// by a pair of CUDA events recorded on the device's stream (events come from a pool kept across
/// steps); nothing waits for the GPU until stop(), which synchronizes once and resolves every
/// pair. On the CPU each call is timed with std::chrono::steady_clock.
class Profiler final : public KernelObserver {
 public:
  /// A profiler of one step on `device`: the step's timeline is the CUDA stream of that device,
  /// or the wall clock for the CPU. Kernels on the CPU during a CUDA profile are timed on the
  /// wall clock and reported as "op [cpu]".
  explicit Profiler(Device device = Device::cpu());
  ~Profiler() override;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Forgets the previous profile, marks the step start and installs this profiler as the
  /// kernel observer (remembering the previous one). Throws if already running, or for a CUDA
  /// device in a build without CUDA.
  void start();
  /// Marks the step end, restores the previous observer, waits once for the device and
  /// resolves the times. Throws if not running.
  void stop();
  /// True between start() and stop().
  bool running() const { return running_; }

  /// The calls of the last profile, in dispatch order (after stop()).
  const std::vector<KernelRecord>& records() const { return records_; }
  /// Time from start() to stop() on the step's timeline (after stop()).
  double step_seconds() const { return step_seconds_; }
  /// How op_stats() groups calls into rows.
  enum class GroupBy {
    kOp,           ///< one row per op name
    kOpAndShapes,  ///< one row per op name and tensor shapes, e.g. "matmul [8, 64] [8, 32] [32, 64]"
  };
  /// records() aggregated per op (or per op and shapes, like PyTorch's group_by_input_shape), in
  /// order of first call.
  std::vector<OpStats> op_stats(GroupBy group = GroupBy::kOp) const;
  /// The device of the step's timeline.
  Device device() const { return device_; }
  /// The wall-clock time of the last start(): the origin of the CPU kernels' start_seconds.
  std::chrono::steady_clock::time_point host_start() const { return step_begin_; }

  /// KernelObserver: marks the start of a call (thread-safe).
  std::uint64_t on_kernel_begin(const KernelCall& call) override;
  /// KernelObserver: marks the end of a call (thread-safe).
  void on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept override;

 private:
  struct CudaEvents;  // the event pool (CUDA builds)
  using Clock = std::chrono::steady_clock;
  /// A call in flight or done: its record, and its start/end on the CPU or its event pair.
  struct Pending {
    KernelRecord record;
    Clock::time_point begin{}, end{};
    int event_begin = -1, event_end = -1;  // indices into the pool; -1 for CPU timing
  };

  Device device_;
  bool running_ = false;
  KernelObserver* previous_ = nullptr;
  Clock::time_point step_begin_{};
  std::unique_ptr<CudaEvents> events_;
  mutable std::mutex mutex_;
  std::vector<Pending> pending_;
  std::vector<KernelRecord> records_;
  double step_seconds_ = 0;
};

/// Profiles a scope: start() at construction, stop() at destruction (stop errors during
/// unwinding are swallowed; call profiler.stop() yourself to see them).
class ProfileScope {
 public:
  /// Starts `profiler`.
  explicit ProfileScope(Profiler& profiler);
  /// Stops it.
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler& profiler_;
};

/// The rows as a fixed-width table in the manner of PyTorch's profiler (sorted as given, at most
/// `max_rows` rows when > 0; the op column as wide as the longest name shown), followed by the step time, the sum of the dispatched kernels and
/// the rest ("not dispatched": copies, fills, allocations, host work, idle gaps).
std::string format_profile_table(const std::vector<ReportRow>& rows, double step_seconds,
                                 const Peaks& peaks, std::size_t max_rows = 0);

/// The peaks of `device` for the table's roofline columns: none (unknown) on the CPU; on CUDA
/// kH100Bf16 when `bf16` (a mixed-precision step: its compute-bound ops, the GEMMs and attention,
/// run on bf16 tensor cores), else kH100Tf32 when cuda::allow_tf32() is on, else kH100Fp32 (the
/// devices this project measures on).
Peaks default_peaks(Device device, bool bf16 = false);

/// The report of the last profile of `profiler` (after stop()): the title line "Per-op profile
/// of <what> (<n> kernel calls):", the table by op, then the table by op and input shapes
/// (which GEMM, which attention tensor; its top `top_shapes` rows). What bench_gpt2_step
/// --profile and train_gpt2 --profile-step print.
std::string profile_report(const Profiler& profiler, const Peaks& peaks, const std::string& what,
                           std::size_t top_shapes = 15);

/// The same as a JSON object: {"step_ms", "dispatched_ms", "peaks": {...}, "rows": [...]}, every
/// row with op, calls, total_ms, percent_of_step, bytes, gb_per_s, flops, tflop_per_s,
/// intensity, bound, fraction_of_peak.
std::string profile_json(const std::vector<ReportRow>& rows, double step_seconds,
                         const Peaks& peaks);

}  // namespace tt::prof
