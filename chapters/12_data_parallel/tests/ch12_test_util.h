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

}  // namespace ch12_test
