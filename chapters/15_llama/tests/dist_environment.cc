// Every rank of an mpirun'd test binary must finalize MPI before it exits: chapter 12's gtest
// environment does it after the last test (the same file, compiled into this binary too).
#include "../../12_data_parallel/tests/dist_environment.cc"
