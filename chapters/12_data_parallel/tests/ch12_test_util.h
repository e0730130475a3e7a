// Shared by chapter 12's tests: a tiny MLP classifier, its seeded data, comparisons of
// parameters across ranks, and running the chapter's programs under mpirun.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/cuda_probe.h"
#include "tt/dist.h"
#include "tt/layers.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_nn.h"
#include "tt/testing.h"
#include "tt/timer.h"

namespace ch12_test {

using tt::Tensor;

inline constexpr int64_t kIn = 8, kHidden = 16, kClasses = 4;
/// Global batch: divisible by 1, 2 and 4 ranks and, for accumulation, by 2 micro-batches.
inline constexpr int64_t kGlobalBatch = 8;

/// The MLP every test trains; `seed` draws its weights.
inline std::shared_ptr<tt::nn::MLP> make_model(uint64_t seed) {
  tt::Generator gen(seed);
  return std::make_shared<tt::nn::MLP>(kIn, kHidden, kClasses, gen);
}

/// The global batch of step `step`: inputs [kGlobalBatch, kIn] and int64 classes, the same on
/// every rank.
struct Data {
  Tensor x, y;
};
inline Data global_batch(int64_t step) {
  tt::Generator gen(1000 + static_cast<uint64_t>(step));
  Tensor x = tt::randn({kGlobalBatch, kIn}, gen);
  std::vector<int64_t> y(kGlobalBatch);
  for (auto& v : y) v = static_cast<int64_t>(gen.next_u64() % kClasses);
  return {x, tt::from_vector<int64_t>(y, {kGlobalBatch})};
}

/// Rows [begin, begin + rows) of a batch.
inline Data rows(const Data& d, int64_t begin, int64_t rows) {
  return {d.x.narrow(0, begin, rows).contiguous(), d.y.narrow(0, begin, rows).contiguous()};
}

/// Mean cross-entropy of `model` on `d`, times `scale`, back-propagated.
inline void forward_backward(tt::nn::Module& model, const Data& d, double scale = 1.0) {
  Tensor loss = tt::cross_entropy(model.forward(d.x), d.y);
  if (scale != 1.0) loss = tt::mul(loss, scale);
  tt::autograd::backward(loss);
}

/// EXPECTs that every rank holds bit-identical copies of `params` (rank 0's are broadcast and
/// compared byte for byte).
inline void expect_identical_across_ranks(tt::dist::ProcessGroup& group,
                                          const std::vector<Tensor>& params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor mine = params[i].detach().clone();
    Tensor root = mine.clone();
    group.broadcast(root, 0);
    EXPECT_EQ(std::memcmp(mine.data_ptr(), root.data_ptr(),
                          static_cast<std::size_t>(mine.numel()) * tt::dtype_size(mine.dtype())),
              0)
        << group.where() << ": parameter " << i << " differs from rank 0's";
  }
}

/// t[i] = 1000 * (rank + 1) + i, as `dtype` on `device`: small integers, so every sum over the
/// ranks is exact in float32/float64 and results compare exactly.
inline Tensor rank_values(int64_t n, int rank, tt::DType dtype,
                          tt::Device device = tt::Device::cpu()) {
  return tt::add(tt::arange(0, static_cast<double>(n)), 1000.0 * (rank + 1)).to(dtype).to(device);
}

/// The sum over `world` ranks of rank_values: 1000 * N(N+1)/2 + N*i (on the CPU).
inline Tensor summed_values(int64_t n, int world, tt::DType dtype) {
  return tt::add(tt::mul(tt::arange(0, static_cast<double>(n)), static_cast<double>(world)),
                 1000.0 * world * (world + 1) / 2)
      .to(dtype);
}

/// all_reduce sum (float32, float64, int64; n elements) and avg (float64) on `device`.
inline void expect_all_reduce_sum_and_avg(tt::dist::ProcessGroup& g, tt::Device device, int64_t n) {
  const int N = g.world_size();
  for (tt::DType dtype : {tt::DType::kFloat32, tt::DType::kFloat64, tt::DType::kInt64}) {
    Tensor t = rank_values(n, g.rank(), dtype, device);
    g.all_reduce(t, tt::dist::ReduceOp::kSum);
    EXPECT_TENSOR_NEAR(t.to(tt::Device::cpu()), summed_values(n, N, dtype), 0, 0)
        << tt::dtype_name(dtype);
  }
  Tensor a = rank_values(5, g.rank(), tt::DType::kFloat64, device).view({5, 1});
  g.all_reduce(a, tt::dist::ReduceOp::kAvg);
  EXPECT_TENSOR_NEAR(a.to(tt::Device::cpu()),
                     tt::div(summed_values(5, N, tt::DType::kFloat64), N).view({5, 1}), 0, 1e-15);
  // Out of place, blocking and started: the sum (or mean) in `out`, the input unchanged.
  const Tensor in = rank_values(n, g.rank(), tt::DType::kFloat32, device);
  Tensor out = tt::zeros({n}, {.dtype = tt::DType::kFloat32, .device = device});
  g.all_reduce(out, in, tt::dist::ReduceOp::kSum);
  EXPECT_TENSOR_NEAR(out.to(tt::Device::cpu()), summed_values(n, N, tt::DType::kFloat32), 0, 0);
  Tensor mean = tt::zeros({n}, {.dtype = tt::DType::kFloat32, .device = device});
  g.all_reduce_async(mean, in, tt::dist::ReduceOp::kAvg)->wait();
  EXPECT_TENSOR_NEAR(mean.to(tt::Device::cpu()),
                     tt::div(summed_values(n, N, tt::DType::kFloat64), N).to(tt::DType::kFloat32),
                     0, 1e-6);
  EXPECT_TENSOR_NEAR(in.to(tt::Device::cpu()), rank_values(n, g.rank(), tt::DType::kFloat32), 0, 0)
      << "an out-of-place all_reduce must not change its input";
  EXPECT_TT_ERROR(g.all_reduce(tt::zeros({n + 1}, {.device = device}), in), "all_reduce",
                  "must have the same dtype, number of elements and device");
}

/// broadcast from the last rank, reduce_scatter sum and avg, all_gather and barrier on `device`.
inline void expect_broadcast_reduce_scatter_all_gather(tt::dist::ProcessGroup& g,
                                                       tt::Device device) {
  using tt::DType;
  const int N = g.world_size(), r = g.rank();
  const tt::Device cpu = tt::Device::cpu();
  Tensor b = rank_values(6, r, DType::kFloat32, device);
  g.broadcast(b, N - 1);
  EXPECT_TENSOR_NEAR(b.to(cpu), rank_values(6, N - 1, DType::kFloat32), 0, 0);
  // reduce_scatter: 3 elements per rank
  Tensor in = rank_values(3 * N, r, DType::kFloat64, device);
  Tensor out = tt::zeros({3}, {.dtype = DType::kFloat64, .device = device});
  g.reduce_scatter(out, in, tt::dist::ReduceOp::kSum);
  EXPECT_TENSOR_NEAR(out.to(cpu), summed_values(3 * N, N, DType::kFloat64).narrow(0, 3 * r, 3), 0,
                     0);
  g.reduce_scatter(out, in, tt::dist::ReduceOp::kAvg);
  EXPECT_TENSOR_NEAR(out.to(cpu),
                     tt::div(summed_values(3 * N, N, DType::kFloat64), N).narrow(0, 3 * r, 3), 0,
                     1e-15);
  // all_gather: rank r contributes {r, r}
  Tensor mine = tt::full({2}, r, {.dtype = DType::kInt64, .device = device});
  Tensor all = tt::zeros({2 * N}, {.dtype = DType::kInt64, .device = device});
  g.all_gather(all, mine);
  const Tensor host = all.to(cpu);
  for (int q = 0; q < N; ++q) {
    EXPECT_EQ(host.at<int64_t>({2 * q}), q);
    EXPECT_EQ(host.at<int64_t>({2 * q + 1}), q);
  }
  g.barrier();
}

/// EXPECT_TENSOR_NEAR over two parameter lists.
inline void expect_params_near(const std::vector<Tensor>& actual,
                               const std::vector<Tensor>& expected, double atol, double rtol) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_TENSOR_NEAR(actual[i].detach(), expected[i].detach(), atol, rtol) << "parameter " << i;
  }
}

/// The exit status and the output (stdout and stderr) of a command.
struct JobResult {
  int status = -1;  ///< exit status (-1: killed by a signal, or not run)
  std::string output;
  double seconds = 0;
};

/// The path of the program `name` built next to this test binary (bin/), or one folder up for
/// the starter test binary (bin/starter/).
inline std::string program_path(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  const fs::path app = exe_dir / name;
  return (fs::exists(app) ? app : exe_dir.parent_path() / name).string();
}

/// Runs `env mpirun <flags> -np <np> <program> <args>` (stderr merged into the output) and
/// times it. Without MPI it runs nothing (status -1).
inline JobResult run_mpi_job(int np, const std::string& program, const std::string& args,
                             const std::string& env = "") {
  JobResult r;
#if TT_WITH_MPI
  const std::string cmd = env + " " + TT_MPIEXEC + " " + TT_MPIEXEC_FLAGS + " -np " +
                          std::to_string(np) + " " + program + " " + args + " 2>&1";
  tt::Timer timer;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int rc = pclose(pipe);
  r.seconds = timer.elapsed_s();
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
#else
  (void)np, (void)program, (void)args, (void)env;
#endif
  return r;
}

/// Why this rank cannot run CUDA collectives, or "" when it can.
inline std::string local_nccl_reason(const tt::dist::ProcessGroup& g) {
  if (!tt::dist::ProcessGroup::built_with_nccl()) return "built without NCCL";
  const int gpus = tt::cuda_device_count();
  if (gpus == 0) return "no CUDA device";
  if (g.local_rank() >= gpus) {
    return "this machine has " + std::to_string(gpus) + " GPU(s) but rank " +
           std::to_string(g.rank()) + " is local rank " + std::to_string(g.local_rank()) +
           ": NCCL needs one GPU per rank (run with -np <= " + std::to_string(gpus) + ")";
  }
  return "";
}

/// Why `g` cannot run CUDA collectives, or "" when every rank can. The ranks decide together
/// (a CPU all-reduce), so that they all skip or all run: a rank that skipped alone would leave
/// the others waiting in a collective.
inline std::string why_no_nccl(tt::dist::ProcessGroup& g) {
  const std::string mine = local_nccl_reason(g);
  tt::Tensor able = tt::full({1}, mine.empty() ? 1.0 : 0.0, {.dtype = tt::DType::kInt64});
  g.all_reduce(able);
  if (able.at<int64_t>({0}) == g.world_size()) return "";
  return mine.empty() ? "another rank has no GPU of its own (NCCL needs one GPU per rank)" : mine;
}

}  // namespace ch12_test

/// Skips the test on every rank unless every rank of `g` can run CUDA collectives (why_no_nccl).
#define SKIP_WITHOUT_NCCL(g)                              \
  do {                                                    \
    const std::string why_ = ::ch12_test::why_no_nccl(g); \
    if (!why_.empty()) GTEST_SKIP() << why_;              \
  } while (0)
