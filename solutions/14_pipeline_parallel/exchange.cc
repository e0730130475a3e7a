// The point-to-point transfers of one batch of a pipeline rank (tt/pipeline.h): exercise
// ch14.2.
#include <utility>
#include <vector>

#include "tt/error.h"
#include "tt/pipeline.h"
#include "tt/todo.h"

namespace tt::pp {

std::vector<dist::P2POp> exchange_ops(const std::vector<PipeOp>& batch,
                                      const PipelineShape& pipeline, int rank,
                                      StageBuffers& buffers, const Shape& shape,
                                      const TensorOptions& options) {
#if TT_SOLUTION
  std::vector<dist::P2POp> ops;
  for (const PipeOp& op : batch) {
    const Transfer t = transfer_of(op, pipeline, rank);
    const std::pair<int, int> key{op.micro_batch, op.chunk};
    dist::P2POp p2p;
    p2p.peer = t.peer;
    p2p.tag = t.tag;
    if (t.send) {
      // What was produced for it: a forward output (sA) or the gradient of a forward input (sG).
      const auto& from = t.gradient ? buffers.input_grads : buffers.outputs;
      const auto it = from.find(key);
      TT_CHECK(it != from.end() && it->second.defined(), "exchange_ops (rank ", rank,
               "): ", op.str(), " has nothing to send: no ",
               t.gradient ? "input gradient" : "forward output", " of micro-batch ", op.micro_batch,
               " chunk ", op.chunk);
      p2p.kind = dist::P2POp::Kind::kSend;
      p2p.tensor = it->second.detach().contiguous();
    } else {
      // A buffer of the agreed shape, where the next F (rA) or B (rG) looks for it.
      p2p.kind = dist::P2POp::Kind::kRecv;
      p2p.tensor = empty(shape, options);
      (t.gradient ? buffers.output_grads : buffers.inputs)[key] = p2p.tensor;
    }
    ops.push_back(std::move(p2p));
  }
  return ops;
#else
  (void)batch, (void)pipeline, (void)rank, (void)buffers, (void)shape, (void)options;
  TT_TODO("ch14.2",
          "exchange_ops: one P2POp per transfer of the batch, peer and tag from transfer_of; a "
          "send carries the contiguous data of the stored output (sA) or input gradient (sG), "
          "an error naming the op when there is none; a receive gets a new [shape] buffer "
          "stored as the input (rA) or output gradient (rG) of its micro-batch and chunk");
#endif
}

}  // namespace tt::pp
