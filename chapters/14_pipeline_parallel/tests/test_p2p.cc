// Batched point-to-point transfers (ProcessGroup::batch_send_recv, added to chapter 12 for the
// pipeline): every rank sends to and receives from both neighbours in one batch, which blocking
// send-then-receive pairs could not do without an order; sizes are checked; on GPUs through
// NCCL (ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../12_data_parallel/tests/ch12_test_util.h"
#include "tt/dist.h"
#include "tt/error.h"

namespace {

using tt::Tensor;
using tt::dist::P2POp;
namespace dist = tt::dist;

// Both neighbours on a ring: send own values to the left and to the right, receive theirs.
void ring_exchange(dist::ProcessGroup& g, tt::Device device) {
  const int n = g.world_size(), r = g.rank();
  const int left = (r + n - 1) % n, right = (r + 1) % n;
  const Tensor to_right = tt::full({3, 5}, 10.0 * r + 1).to(device);
  const Tensor to_left = tt::full({7}, 10.0 * r + 2).to(device);
  const Tensor from_left = tt::zeros({3, 5}).to(device), from_right = tt::zeros({7}).to(device);
  g.batch_send_recv({{P2POp::Kind::kSend, to_right, right, 1},
                     {P2POp::Kind::kSend, to_left, left, 2},
                     {P2POp::Kind::kRecv, from_left, left, 1},
                     {P2POp::Kind::kRecv, from_right, right, 2}});
  const Tensor a = from_left.to(tt::Device::cpu()), b = from_right.to(tt::Device::cpu());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], 10.0f * left + 1);
  for (int64_t i = 0; i < b.numel(); ++i) ASSERT_EQ(b.data<float>()[i], 10.0f * right + 2);
}

TEST(Ch14_P2P, BatchSendRecvBothNeighboursMpi) {
  dist::ProcessGroup& world = dist::world();
  ring_exchange(world, tt::Device::cpu());
  EXPECT_NO_THROW(world.batch_send_recv({}));  // an empty batch does nothing
  world.barrier();
}

TEST(Ch14_P2P, BatchSendRecvChecksArgumentsMpi) {
  dist::ProcessGroup& world = dist::world();
  // Refused before anything is sent, on every rank alike: no peer waits.
  EXPECT_THROW(world.batch_send_recv({{P2POp::Kind::kSend, tt::zeros({2}), world.world_size(), 0}}),
               tt::Error);
  EXPECT_THROW(world.batch_send_recv({{P2POp::Kind::kRecv, tt::Tensor(), 0, 0}}), tt::Error);
  if (world.world_size() == 1) {
    // A world of one: a receive needs a send to itself in the same batch.
    EXPECT_THROW(world.batch_send_recv({{P2POp::Kind::kRecv, tt::zeros({2}), 0, 0}}), tt::Error);
  } else {
    // A message shorter than the receive buffer (legal in MPI) is an error on the receiving
    // side: the sizes were agreed up front. (A longer one is MPI_ERR_TRUNCATE, which OpenMPI's
    // shared-memory transport does not always report: not tested.)
    const int r = world.rank();
    if (r == 0) {
      world.batch_send_recv({{P2POp::Kind::kSend, tt::zeros({2}), 1, 9}});
    } else if (r == 1) {
      try {
        world.batch_send_recv({{P2POp::Kind::kRecv, tt::zeros({3}), 0, 9}});
        ADD_FAILURE() << "a message of 2 elements was received into a buffer of 3";
      } catch (const tt::Error& e) {
        EXPECT_NE(std::string(e.what()).find("received 2 elements from rank 0"), std::string::npos)
            << e.what();
      }
    }
  }
  world.barrier();
}

TEST(Ch14_P2P, BatchSendRecvCudaMpi) {
  dist::ProcessGroup& world = dist::world();
  SKIP_WITHOUT_NCCL(world);
  ring_exchange(world, tt::Device::cuda(world.local_rank()));
  world.barrier();
}

}  // namespace
