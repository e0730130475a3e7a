// Tests of the per-op profiler: reading a profile (exercise ch10.1) on hand-made records with
// exact expected values, and the recording itself (given) on a tiny MLP on the CPU and on CUDA.
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tt/cuda_probe.h"
#include "tt/functional.h"
#include "tt/profiler.h"
#include "tt/testing.h"

namespace tt {
namespace {

using prof::Bound;
using prof::OpStats;
using prof::Peaks;
using prof::ReportRow;

// A roofline with a round ridge point: 1 TB/s, 10 TFLOP/s -> 10 FLOP per byte.
constexpr Peaks kRoundPeaks{1e12, 10e12};

// ----- ch10.1 reading the profile ------------------------------------------------------------

TEST(Ch10_1_ProfileReport, RanksByTotalTimeTiesByName) {
  const std::vector<OpStats> ops = {{"gelu_forward", 3, 1e-3, 0, 0},
                                    {"matmul", 9, 3e-3, 0, 0},
                                    {"softmax_forward", 1, 2e-3, 0, 0},
                                    {"add", 2, 2e-3, 0, 0}};
  const auto rows = prof::read_profile(ops, 10e-3, kRoundPeaks);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].op.op, "matmul");
  EXPECT_EQ(rows[1].op.op, "add");  // 2 ms like softmax_forward: "add" < "softmax_forward"
  EXPECT_EQ(rows[2].op.op, "softmax_forward");
  EXPECT_EQ(rows[3].op.op, "gelu_forward");
  // Each row keeps its own stats.
  EXPECT_EQ(rows[0].op.calls, 9);
  EXPECT_EQ(rows[3].op.calls, 3);
  EXPECT_DOUBLE_EQ(rows[0].percent_of_step, 30.0);
  EXPECT_DOUBLE_EQ(rows[3].percent_of_step, 10.0);
}

TEST(Ch10_1_ProfileReport, RatesIntensityAndRoofline) {
  // A GEMM: 4 ms, 0.2 GB, 0.4 TFLOP -> 50 GB/s, 100 TFLOP/s, 2000 FLOP/B: compute-bound at
  // 100 of 10 TFLOP/s would be impossible, so use the H100 TF32 roofline (ridge ~147.7 FLOP/B).
  // A GELU: 1 ms, 2.5 GB, no FLOPs counted -> 2500 GB/s, intensity 0: memory-bound.
  const std::vector<OpStats> ops = {{"gelu_forward", 12, 1e-3, 2.5e9, 0},
                                    {"matmul", 48, 4e-3, 2e8, 4e11}};
  const Peaks h100 = prof::kH100Tf32;
  const auto rows = prof::read_profile(ops, 10e-3, h100);
  ASSERT_EQ(rows.size(), 2u);
  const ReportRow& mm = rows[0];
  EXPECT_EQ(mm.op.op, "matmul");
  EXPECT_DOUBLE_EQ(mm.percent_of_step, 40.0);
  EXPECT_DOUBLE_EQ(mm.gb_per_s, 50.0);
  EXPECT_DOUBLE_EQ(mm.tflop_per_s, 100.0);
  EXPECT_DOUBLE_EQ(mm.intensity, 2000.0);
  EXPECT_EQ(mm.bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(mm.fraction_of_peak, 100e12 / h100.flops_per_second);
  const ReportRow& g = rows[1];
  EXPECT_DOUBLE_EQ(g.percent_of_step, 10.0);
  EXPECT_DOUBLE_EQ(g.gb_per_s, 2500.0);
  EXPECT_DOUBLE_EQ(g.tflop_per_s, 0.0);
  EXPECT_DOUBLE_EQ(g.intensity, 0.0);
  EXPECT_EQ(g.bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(g.fraction_of_peak, 2500e9 / h100.bytes_per_second);
}

TEST(Ch10_1_ProfileReport, RidgePointIsComputeBound) {
  // Ridge of kRoundPeaks: 10 FLOP/B. Exactly on it: compute-bound; just below: memory-bound.
  const std::vector<OpStats> ops = {{"on_ridge", 1, 2e-3, 1e9, 10e9},
                                    {"below_ridge", 1, 1e-3, 1e9, 9.99e9}};
  const auto rows = prof::read_profile(ops, 4e-3, kRoundPeaks);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op.op, "on_ridge");
  EXPECT_EQ(rows[0].bound, Bound::kCompute);
  // 10 GFLOP in 2 ms = 5 TFLOP/s of 10.
  EXPECT_DOUBLE_EQ(rows[0].fraction_of_peak, 0.5);
  EXPECT_EQ(rows[1].bound, Bound::kMemory);
  // 1 GB in 1 ms = 1000 GB/s of 1000.
  EXPECT_DOUBLE_EQ(rows[1].fraction_of_peak, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].intensity, 9.99);
}

TEST(Ch10_1_ProfileReport, UnknownPeaksAndZeroTimesAreNotDividedBy) {
  const std::vector<OpStats> ops = {{"instant", 1, 0.0, 1e6, 1e6}, {"no_bytes", 1, 1e-3, 0, 0}};
  const auto rows = prof::read_profile(ops, 1e-3, Peaks{});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op.op, "no_bytes");
  for (const ReportRow& r : rows) {
    EXPECT_EQ(r.bound, Bound::kUnknown) << r.op.op;
    EXPECT_EQ(r.fraction_of_peak, 0.0) << r.op.op;
    EXPECT_TRUE(std::isfinite(r.gb_per_s) && std::isfinite(r.tflop_per_s) &&
                std::isfinite(r.intensity))
        << r.op.op;
  }
  EXPECT_EQ(rows[0].intensity, 0.0);  // no bytes: intensity 0, not inf or nan
  EXPECT_EQ(rows[1].gb_per_s, 0.0);   // no time: rates 0, not inf
  EXPECT_EQ(rows[1].tflop_per_s, 0.0);
  EXPECT_DOUBLE_EQ(rows[1].intensity, 1.0);
  EXPECT_DOUBLE_EQ(rows[0].percent_of_step, 100.0);
  // One peak known is not a roofline either.
  EXPECT_EQ(prof::read_profile(ops, 1e-3, Peaks{1e12, 0})[0].bound, Bound::kUnknown);
  EXPECT_TRUE(prof::read_profile({}, 1e-3, kRoundPeaks).empty());
}

TEST(Ch10_1_ProfileReport, RejectsBadStepAndPeaks) {
  const std::vector<OpStats> ops = {{"add", 1, 1e-3, 1, 0}};
  EXPECT_TT_ERROR(prof::read_profile(ops, 0.0, kRoundPeaks), "read_profile", "step");
  EXPECT_TT_ERROR(prof::read_profile(ops, -1.0, kRoundPeaks), "read_profile", "step");
  EXPECT_TT_ERROR(prof::read_profile(ops, std::numeric_limits<double>::quiet_NaN(), kRoundPeaks),
                  "read_profile", "step");
  EXPECT_TT_ERROR(prof::read_profile(ops, 1e-3, Peaks{-1, 1e12}), "read_profile", "peak");
  EXPECT_TT_ERROR(prof::read_profile(ops, 1e-3, Peaks{1e12, -1}), "read_profile", "peak");
}

TEST(Ch10_Profiler, DefaultPeaksFollowThePrecision) {
  EXPECT_EQ(prof::default_peaks(Device::cpu()).flops_per_second, 0);
  EXPECT_EQ(prof::default_peaks(Device::cpu(), true).flops_per_second, 0);
  // A bf16 step's GEMMs and attention run on bf16 tensor cores: reading them against the FP32 or
  // TF32 peak would put them at several hundred percent of their roof.
  EXPECT_EQ(prof::default_peaks(Device::cuda(0), true).flops_per_second,
            prof::kH100Bf16.flops_per_second);
  EXPECT_GT(prof::kH100Bf16.flops_per_second, prof::kH100Tf32.flops_per_second);
  const double float_peak = prof::default_peaks(Device::cuda(0)).flops_per_second;
  EXPECT_TRUE(float_peak == prof::kH100Fp32.flops_per_second ||
              float_peak == prof::kH100Tf32.flops_per_second);
}

TEST(Ch10_1_ProfileReport, TableAndJsonShowTheRows) {
  const std::vector<OpStats> ops = {{"gelu_forward", 12, 1e-3, 2.5e9, 0},
                                    {"matmul", 48, 4e-3, 2e8, 4e11}};
  const auto rows = prof::read_profile(ops, 10e-3, prof::kH100Tf32);
  const std::string table = prof::format_profile_table(rows, 10e-3, prof::kH100Tf32);
  // Ranked rows in order, with their figures; the rest of the step reported as not dispatched.
  const auto mm = table.find("matmul"), g = table.find("gelu_forward");
  ASSERT_NE(mm, std::string::npos) << table;
  ASSERT_NE(g, std::string::npos) << table;
  EXPECT_LT(mm, g) << table;
  EXPECT_NE(table.find("40.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("100.00"), std::string::npos) << table;  // TFLOP/s of matmul
  EXPECT_NE(table.find("2500.0"), std::string::npos) << table;  // GB/s of gelu
  EXPECT_NE(table.find("compute"), std::string::npos) << table;
  EXPECT_NE(table.find("memory"), std::string::npos) << table;
  EXPECT_NE(table.find("Not dispatched"), std::string::npos) << table;
  EXPECT_NE(table.find("5.000 ms"), std::string::npos) << table;  // 10 - 4 - 1 ms
  const auto j = nlohmann::json::parse(prof::profile_json(rows, 10e-3, prof::kH100Tf32));
  EXPECT_DOUBLE_EQ(j["step_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["dispatched_ms"].get<double>(), 5.0);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["op"], "matmul");
  EXPECT_EQ(j["rows"][0]["calls"], 48);
  EXPECT_EQ(j["rows"][0]["bound"], "compute");
  EXPECT_DOUBLE_EQ(j["rows"][1]["gb_per_s"].get<double>(), 2500.0);
  // A row limit keeps the top rows and summarizes the others.
  const std::string top1 = prof::format_profile_table(rows, 10e-3, prof::kH100Tf32, 1);
  EXPECT_EQ(top1.find("gelu_forward"), std::string::npos) << top1;
  EXPECT_NE(top1.find("1 more ops, 1.000 ms"), std::string::npos) << top1;
}

// ----- the recording (given) ------------------------------------------------------------------

/// Calls per op name in a profile.
std::map<std::string, int64_t> calls_by_op(const prof::Profiler& p) {
  std::map<std::string, int64_t> out;
  for (const OpStats& s : p.op_stats()) out[s.op] = s.calls;
  return out;
}

TEST(Ch10_Profiler, MlpForwardBackwardShowsEveryKernel) {
  // loss = sum(gelu(x @ w1 + b1) @ w2); x [4, 8] without gradient, w1 [8, 16], b1 [16],
  // w2 [16, 3] leaves.
  Generator gen(7);
  const Tensor x = randn({4, 8}, gen);
  const Tensor w1 = randn({8, 16}, gen), b1 = randn({16}, gen), w2 = randn({16, 3}, gen);
  for (const Tensor* t : {&w1, &b1, &w2}) t->set_requires_grad();
  prof::Profiler profiler;
  {
    prof::ProfileScope scope(profiler);
    EXPECT_EQ(kernel_observer(), &profiler);
    const Tensor loss = sum(matmul(gelu(add(matmul(x, w1), b1)), w2));
    autograd::backward(loss);
  }
  EXPECT_EQ(kernel_observer(), nullptr);
  // Forward: 2 matmuls, the bias add, gelu, the sum. Backward: the sum's gradient is an
  // expand + contiguous (a backend copy, not dispatched); matmul 2 needs dh = dy @ w2^T and
  // dw2 = h^T @ dy; gelu_backward; the add passes its gradient through to the [4, 16] input and
  // sums it over the batch for b1 ("sum"); matmul 1 needs only dw1 = x^T @ da (x has no
  // gradient). Each leaf receives one gradient: nothing to accumulate.
  const std::map<std::string, int64_t> expected = {
      {"matmul", 2 + 3}, {"add", 1}, {"gelu_forward", 1}, {"gelu_backward", 1}, {"sum", 1 + 1}};
  EXPECT_EQ(calls_by_op(profiler), expected);
  // The first call is the forward x @ w1: out [4, 16], a [4, 8], b [8, 16] (float32).
  ASSERT_FALSE(profiler.records().empty());
  const prof::KernelRecord& first = profiler.records()[0];
  EXPECT_EQ(first.op, "matmul");
  EXPECT_EQ(first.device, Device::cpu());
  EXPECT_EQ(first.shapes, (std::vector<Shape>{{4, 16}, {4, 8}, {8, 16}}));
  EXPECT_DOUBLE_EQ(first.bytes, (4 * 16 + 4 * 8 + 8 * 16) * 4.0);
  EXPECT_DOUBLE_EQ(first.flops, 2.0 * 4 * 16 * 8);
  // Grouped by shapes as well: the forward x @ w1 is a row of its own; the matmul rows add up.
  int64_t matmul_calls = 0;
  bool found_first = false;
  for (const OpStats& st : profiler.op_stats(prof::Profiler::GroupBy::kOpAndShapes)) {
    if (st.op.rfind("matmul ", 0) == 0) matmul_calls += st.calls;
    if (st.op == "matmul [4, 16] [4, 8] [8, 16]") {
      found_first = true;
      EXPECT_EQ(st.calls, 1);
      EXPECT_DOUBLE_EQ(st.flops, first.flops);
    }
  }
  EXPECT_TRUE(found_first);
  EXPECT_EQ(matmul_calls, 5);
  // Times: each call non-negative, all of them within the step.
  double total = 0;
  for (const prof::KernelRecord& r : profiler.records()) {
    EXPECT_GE(r.seconds, 0.0) << r.op;
    total += r.seconds;
  }
  EXPECT_GT(profiler.step_seconds(), 0.0);
  EXPECT_LE(total, profiler.step_seconds());
  // The gradients are still right (the observer changes nothing).
  EXPECT_EQ(w1.grad().shape(), (Shape{8, 16}));
  EXPECT_EQ(b1.grad().shape(), (Shape{16}));
}

TEST(Ch10_Profiler, BroadcastOperandsCountTheirFootprint) {
  // b [8] broadcast over [4, 8] is read as 8 floats: out 32 + a 32 + b 8 floats.
  const Tensor a = zeros({4, 8}), b = ones({8});
  prof::Profiler profiler;
  {
    prof::ProfileScope scope(profiler);
    (void)add(a, b);
  }
  ASSERT_EQ(profiler.records().size(), 1u);
  EXPECT_EQ(profiler.records()[0].op, "add");
  EXPECT_DOUBLE_EQ(profiler.records()[0].bytes, (32 + 32 + 8) * 4.0);
  EXPECT_DOUBLE_EQ(profiler.records()[0].flops, 0.0);
}

TEST(Ch10_Profiler, StartStopRulesAndNothingRecordedOutside) {
  prof::Profiler profiler;
  EXPECT_TT_ERROR(profiler.stop(), "stop", "not running");
  profiler.start();
  EXPECT_TT_ERROR(profiler.start(), "start", "already running");
  (void)add(ones({2}), ones({2}));
  profiler.stop();
  ASSERT_EQ(profiler.records().size(), 1u);
  (void)add(ones({2}), ones({2}));  // after stop: not recorded
  EXPECT_EQ(profiler.records().size(), 1u);
  // A second profile starts from nothing; a nested profiler takes over and gives back.
  prof::Profiler inner;
  profiler.start();
  {
    prof::ProfileScope scope(inner);
    (void)mul(ones({2}), ones({2}));
  }
  EXPECT_EQ(kernel_observer(), &profiler);
  (void)sub(ones({2}), ones({2}));
  profiler.stop();
  EXPECT_EQ(calls_by_op(inner), (std::map<std::string, int64_t>{{"mul", 1}}));
  EXPECT_EQ(calls_by_op(profiler), (std::map<std::string, int64_t>{{"sub", 1}}));
}

TEST(Ch10_Profiler, KernelFlopsFromShapes) {
  const std::string mm = "matmul_blocked", fwd = "flash_attention_forward",
                    bwd = "flash_attention_backward", other = "softmax_forward";
  // Batched GEMM: out [2, 3, 5] = a [2, 3, 4] @ b [2, 4, 5]: 2 * 30 * 4.
  const KernelCall gemm{mm,
                        Device::cpu(),
                        {{{2, 3, 5}, DType::kFloat32, 0},
                         {{2, 3, 4}, DType::kFloat32, 0},
                         {{2, 4, 5}, DType::kFloat32, 0}}};
  EXPECT_DOUBLE_EQ(prof::kernel_flops(gemm), 240.0);
  // "gemm" (the fused classifier's, out rows padded): out [3, 5] = a [3, 4] @ b [4, 5].
  const std::string blas = "gemm";
  const KernelCall padded{
      blas,
      Device::cpu(),
      {{{3, 5}, DType::kFloat32, 0}, {{3, 4}, DType::kFloat32, 0}, {{4, 5}, DType::kFloat32, 0}}};
  EXPECT_DOUBLE_EQ(prof::kernel_flops(padded), 120.0);
  // Causal attention [B=1, NH=2, T=4, hs=8]: 2 heads x 10 (i, j<=i) pairs x 2*8 FLOPs = 320 per
  // product; 2 products forward, 5 backward.
  const KernelTensorArg q{{1, 2, 4, 8}, DType::kFloat32, 0};
  EXPECT_DOUBLE_EQ(prof::kernel_flops(KernelCall{fwd, Device::cpu(), {q, q}}), 640.0);
  EXPECT_DOUBLE_EQ(prof::kernel_flops(KernelCall{bwd, Device::cpu(), {q, q, q}}), 1600.0);
  EXPECT_DOUBLE_EQ(prof::kernel_flops(KernelCall{other, Device::cpu(), {q, q}}), 0.0);
}

TEST(Ch10_Profiler, CudaEventsTimeEachKernel) {
  TT_SKIP_IF_NO_CUDA();
  const Device cuda = Device::cuda();
  const Tensor a = ones({256, 512}).to(cuda), b = ones({512, 128}).to(cuda);
  prof::Profiler profiler(cuda);
  for (int round = 0; round < 2; ++round) {  // the second profile reuses the event pool
    {
      prof::ProfileScope scope(profiler);
      (void)gelu(matmul(a, b));
    }
    EXPECT_EQ(calls_by_op(profiler),
              (std::map<std::string, int64_t>{{"matmul", 1}, {"gelu_forward", 1}}));
    double total = 0;
    for (const prof::KernelRecord& r : profiler.records()) {
      EXPECT_GT(r.seconds, 0.0) << r.op;
      EXPECT_EQ(r.device, cuda);
      total += r.seconds;
    }
    EXPECT_LE(total, profiler.step_seconds());
    EXPECT_DOUBLE_EQ(profiler.records()[0].flops, 2.0 * 256 * 128 * 512);
  }
  // A CPU profiler refuses CUDA kernels instead of timing them on the wrong clock.
  prof::Profiler cpu_profiler;
  prof::ProfileScope scope(cpu_profiler);
  EXPECT_TT_ERROR(matmul(a, b), "matmul", "cuda", "cpu");
}

}  // namespace
}  // namespace tt
