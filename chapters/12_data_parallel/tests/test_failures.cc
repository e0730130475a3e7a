// A rank that dies or hangs must end the whole job with a clear message, never hang it: runs
// the tt_dist_fault program (next to this test binary) under mpirun with 2 ranks.
#include <gtest/gtest.h>

#include <string>

#include "ch12_test_util.h"
#include "tt/dist.h"

namespace tt::dist {
namespace {

using ch12_test::JobResult;

/// Runs `mpirun -np 2 tt_dist_fault <args>` (stderr merged) and times it.
JobResult run_job(const std::string& env, const std::string& args) {
  return ch12_test::run_mpi_job(2, ch12_test::program_path("tt_dist_fault"), args, env);
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
