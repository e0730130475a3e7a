// ============================================================================================
// YOUR EXERCISE FILE for chapter 14_pipeline_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch14
// Generated from solutions/14_pipeline_parallel/exchange.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  (void)batch, (void)pipeline, (void)rank, (void)buffers, (void)shape, (void)options;
  TT_TODO("ch14.2",
          "exchange_ops: one P2POp per transfer of the batch, peer and tag from transfer_of; a "
          "send carries the contiguous data of the stored output (sA) or input gradient (sG), "
          "an error naming the op when there is none; a receive gets a new [shape] buffer "
          "stored as the input (rA) or output gradient (rG) of its micro-batch and chunk");
}

}  // namespace tt::pp
