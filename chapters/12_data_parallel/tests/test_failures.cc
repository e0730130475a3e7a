// A rank that dies or hangs must end the whole job with a clear message, never hang it: runs
// the tt_dist_fault program (next to this test binary) under mpirun with 2 ranks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "tt/dist.h"
#include "tt/timer.h"

namespace tt::dist {
namespace {

namespace fs = std::filesystem;

struct JobResult {
  int status = -1;  ///< exit status of mpirun (-1: killed by a signal)
  std::string output;
  double seconds = 0;
};

/// Runs `mpirun -np 2 tt_dist_fault <args>` (stderr merged) and times it.
JobResult run_job(const std::string& env, const std::string& args) {
#if TT_WITH_MPI
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  fs::path app = exe_dir / "tt_dist_fault";
  if (!fs::exists(app)) app = exe_dir.parent_path() / "tt_dist_fault";  // bin/starter/
  const std::string cmd = env + " " + TT_MPIEXEC + " " + TT_MPIEXEC_FLAGS + " -np 2 " +
                          app.string() + " " + args + " 2>&1";
  JobResult r;
  Timer timer;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int rc = pclose(pipe);
  r.seconds = timer.elapsed_s();
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return r;
#else
  (void)env, (void)args;
  return {};
#endif
}

#define TT_SKIP_IF_NO_MPI() \
  if (!built_with_mpi()) GTEST_SKIP() << "built without MPI: no multi-process job to run"

TEST(Ch12_Failures, HealthyJobSucceeds) {
  TT_SKIP_IF_NO_MPI();
  const JobResult r = run_job("", "--fail none");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 of 2: all_reduce gave 2"), std::string::npos) << r.output;
}

TEST(Ch12_Failures, DeadRankEndsTheJobQuickly) {
  TT_SKIP_IF_NO_MPI();
  for (const std::string fail : {"exit", "kill", "throw"}) {
    const JobResult r = run_job("TT_DIST_TIMEOUT_S=60", "--fail " + fail);
    EXPECT_NE(r.status, 0) << fail << ":\n" << r.output;
    // mpirun notices the dead rank and kills the others: far below the 60 s watchdog.
    EXPECT_LT(r.seconds, 20.0) << fail << ":\n" << r.output;
    EXPECT_NE(r.output.find("rank 1 of 2 fails with '" + fail + "'"), std::string::npos)
        << r.output;
    // mpirun's own report of the failed rank.
    EXPECT_NE(r.output.find("the job has been aborted"), std::string::npos)
        << fail << ": no launcher message\n"
        << r.output;
  }
}

TEST(Ch12_Failures, HangingPeerTriggersTheWatchdog) {
  TT_SKIP_IF_NO_MPI();
  const JobResult r = run_job("TT_DIST_TIMEOUT_S=2", "--fail hang --sleep 60");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_LT(r.seconds, 30.0) << r.output;
  // Rank 0 waited in the agreement check of the all_reduce, then exited with 124.
  EXPECT_NE(r.output.find("tt::dist: rank 0 of 2: all_reduce's agreement check did not complete "
                          "within 2.0 s"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace tt::dist
