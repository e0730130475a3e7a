// Every rank of an mpirun'd test binary must finalize MPI before it exits: a gtest environment
// does it after the last test (in a one-process run it just releases the group).
#include <gtest/gtest.h>

#include "tt/dist.h"

namespace {

class FinalizeDist : public ::testing::Environment {
 public:
  void TearDown() override { tt::dist::finalize(); }
};

// gtest owns registered environments (its API takes the pointer).
const ::testing::Environment* const kFinalize =
    ::testing::AddGlobalTestEnvironment(new FinalizeDist);

}  // namespace
