// Chapter 12 failure drill (used by the tests): every rank joins an all_reduce, except rank
// --rank, which first fails in the way --fail says:
//   exit   exits with status 3 before the collective      kill   dies from SIGKILL
//   throw  throws an uncaught tt::Error                     hang   sleeps --sleep seconds
//   none   takes part normally (exit 0)
// Usage: mpirun -np 2 tt_dist_fault --fail hang [--rank 1] [--sleep 60]; TT_DIST_TIMEOUT_S sets
// the watchdog limit of the waiting ranks.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tt/cli.h"
#include "tt/dist.h"

int main(int argc, char** argv) {
  std::string fail = "none";
  int rank = 1;
  double sleep_s = 60;
  tt::ArgParser args("tt_dist_fault",
                     "usage: mpirun -np N tt_dist_fault --fail none|exit|kill|throw|hang "
                     "[--rank 1] [--sleep 60]\n");
  args.option("--fail", &fail).option("--rank", &rank).option("--sleep", &sleep_s);
  args.parse(argc, argv);
  tt::dist::ProcessGroup& g = tt::dist::world();
  if (g.rank() == rank) {
    std::fprintf(stderr, "tt_dist_fault: %s fails with '%s'\n", g.where().c_str(), fail.c_str());
    std::fflush(stderr);
    if (fail == "exit") std::exit(3);
    if (fail == "kill") std::raise(SIGKILL);
    if (fail == "throw") TT_THROW("tt_dist_fault: rank ", rank, " throws");
    if (fail == "hang") std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  }
  tt::Tensor t = tt::ones({4});
  g.all_reduce(t);
  std::printf("%s: all_reduce gave %g\n", g.where().c_str(), t.to_vector<float>()[0]);
  tt::dist::finalize();
  return 0;
}
