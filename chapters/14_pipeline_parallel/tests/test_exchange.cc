// The stage's send/recv exchange (exercise ch14.2): which tensor each transfer of a batch moves,
// to or from which rank, with which tag, and where a received buffer goes; then neighbours
// exchanging activations and gradients in one batch under mpirun.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tt/dist.h"
#include "tt/error.h"
#include "tt/pipeline.h"

namespace {

using tt::Tensor;
using tt::dist::P2POp;
using tt::pp::OpKind;
using tt::pp::PipelineShape;
using tt::pp::PipeOp;
using tt::pp::StageBuffers;

TEST(Ch14_2_Exchange, SendsTheStoredTensorsAndReceivesIntoNewBuffers) {
  const PipelineShape shape{2, 4, 1};
  StageBuffers buffers;
  const Tensor out = tt::full({2, 3}, 7.0);
  buffers.outputs[{1, 0}] = out;
  // Rank 0 after F1: send its activation, receive micro-batch 0's gradient.
  const std::vector<P2POp> ops =
      tt::pp::exchange_ops({{OpKind::kSendActivation, 1, 0}, {OpKind::kRecvGradient, 0, 0}}, shape,
                           0, buffers, {2, 3}, {});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, P2POp::Kind::kSend);
  EXPECT_EQ(ops[0].peer, 1);
  EXPECT_EQ(ops[0].tag, 2 * (1 * 4 + 1));  // activation of micro-batch 1 into virtual stage 1
  EXPECT_TRUE(ops[0].tensor.is_contiguous());
  EXPECT_EQ(ops[0].tensor.shape(), out.shape());
  EXPECT_EQ(ops[0].tensor.data<float>()[5], 7.0f);
  EXPECT_EQ(ops[1].kind, P2POp::Kind::kRecv);
  EXPECT_EQ(ops[1].peer, 1);
  EXPECT_EQ(ops[1].tag, 2 * (0 * 4 + 0) + 1);  // gradient of micro-batch 0 into stage 0
  ASSERT_TRUE(buffers.output_grads.count({0, 0}));
  EXPECT_TRUE(buffers.output_grads.at({0, 0}).is_same(ops[1].tensor));
  EXPECT_EQ(ops[1].tensor.shape(), (tt::Shape{2, 3}));

  // Rank 1 (last) after B1: send the input gradient down, receive micro-batch 2's activation.
  StageBuffers last;
  last.input_grads[{1, 0}] = tt::full({2, 3}, 3.0);
  const std::vector<P2POp> back = tt::pp::exchange_ops(
      {{OpKind::kSendGradient, 1, 0}, {OpKind::kRecvActivation, 2, 0}}, shape, 1, last, {2, 3}, {});
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].kind, P2POp::Kind::kSend);
  EXPECT_EQ(back[0].peer, 0);
  EXPECT_EQ(back[0].tag, 2 * (0 * 4 + 1) + 1);
  EXPECT_EQ(back[1].kind, P2POp::Kind::kRecv);
  EXPECT_EQ(back[1].tag, 2 * (1 * 4 + 2));
  EXPECT_TRUE(last.inputs.count({2, 0}));
}

TEST(Ch14_2_Exchange, InterleavedPeersWrapAround) {
  // p = 2, v = 2: virtual stage 1 (rank 1, chunk 0) sends to virtual stage 2 (rank 0, chunk 1).
  const PipelineShape shape{2, 2, 2};
  StageBuffers b;
  b.outputs[{0, 0}] = tt::zeros({4});
  const auto ops = tt::pp::exchange_ops({{OpKind::kSendActivation, 0, 0}}, shape, 1, b, {4}, {});
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].peer, 0);
  EXPECT_EQ(ops[0].tag, 2 * (2 * 2 + 0));
}

TEST(Ch14_2_Exchange, NothingToSendIsAnError) {
  StageBuffers empty;
  try {
    (void)tt::pp::exchange_ops({{OpKind::kSendGradient, 3, 0}}, {2, 4, 1}, 1, empty, {2}, {});
    ADD_FAILURE() << "a send without data was accepted";
  } catch (const tt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sG3"), std::string::npos) << e.what();
  }
}

TEST(Ch14_2_Exchange, NeighboursExchangeInOneBatchMpi) {
  // Every rank of a pipeline of world-size stages: activation up and gradient down in the
  // same batch, as in 1F1B's steady state.
  tt::dist::ProcessGroup& world = tt::dist::world();
  const int p = world.world_size(), r = world.rank();
  if (p == 1) {
    StageBuffers alone;
    alone.outputs[{0, 0}] = tt::zeros({1});
    // A single stage has no neighbour to send to.
    EXPECT_THROW(
        (void)tt::pp::exchange_ops({{OpKind::kSendActivation, 0, 0}}, {1, 1, 1}, 0, alone, {1}, {}),
        tt::Error);
    return;
  }
  const PipelineShape shape{p, 1, 1};
  StageBuffers b;
  std::vector<PipeOp> batch;
  if (r + 1 < p) {
    b.outputs[{0, 0}] = tt::full({3}, 100.0 + r);
    batch.push_back({OpKind::kSendActivation, 0, 0});
    batch.push_back({OpKind::kRecvGradient, 0, 0});
  }
  if (r > 0) {
    b.input_grads[{0, 0}] = tt::full({3}, 200.0 + r);
    batch.push_back({OpKind::kSendGradient, 0, 0});
    batch.push_back({OpKind::kRecvActivation, 0, 0});
  }
  world.batch_send_recv(tt::pp::exchange_ops(batch, shape, r, b, {3}, {}));
  if (r > 0) {
    EXPECT_EQ(b.inputs.at({0, 0}).data<float>()[2], 100.0f + (r - 1));
  }
  if (r + 1 < p) {
    EXPECT_EQ(b.output_grads.at({0, 0}).data<float>()[0], 200.0f + (r + 1));
  }
  world.barrier();
}

}  // namespace
