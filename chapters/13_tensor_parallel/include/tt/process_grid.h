/// @file process_grid.h
/// @brief The process grid: world ranks laid out over named dimensions (dp, tp), one process
/// group per dimension (chapter 13).
///
/// A job of N ranks that combines data parallelism (dp) with tensor parallelism (tp) arranges
/// its ranks in a grid of dp x tp = N. The LAST dimension is the innermost: consecutive world
/// ranks differ in their last coordinate first. With dims {{"dp", 2}, {"tp", 2}} on 4 ranks:
///
/// | world rank | dp | tp | tp group (world ranks) | dp group (world ranks) |
/// |---|---|---|---|---|
/// | 0 | 0 | 0 | {0, 1} | {0, 2} |
/// | 1 | 0 | 1 | {0, 1} | {1, 3} |
/// | 2 | 1 | 0 | {2, 3} | {0, 2} |
/// | 3 | 1 | 1 | {2, 3} | {1, 3} |
///
/// tp innermost puts the ranks of one tensor-parallel group on consecutive local ranks, i.e.
/// on the GPUs of one node (NVLink), where TP's two all-reduces per block must run; the data-
/// parallel all-reduce, once per step, crosses nodes.
///
/// The group of dimension d holds the ranks whose coordinates agree on every other dimension;
/// within it a rank's rank is its coordinate along d. The groups are built by
/// ProcessGroup::split (MPI_Comm_split on the CPU; CUDA tensors get their own NCCL
/// communicator per group on first use). Constructing a grid is a collective of the whole
/// world: every rank must construct the same grid, in the same order as its other collectives.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/dist.h"

namespace tt::tp {

/// A named dimension of a grid and its size.
struct GridDim {
  std::string name;  ///< e.g. "dp", "tp"
  int size = 1;      ///< number of ranks along it (>= 1)
};

/// World ranks laid out over named dimensions, the last one innermost (see the file comment).
class ProcessGrid {
 public:
  /// Lays out `world`'s ranks over `dims` (the product of the sizes must be the world size;
  /// names non-empty and distinct) and builds one group per dimension. Throws tt::Error naming
  /// the dims and the world size otherwise, on every rank alike (the check uses only what every
  /// rank knows, so no rank waits in a collective that another skipped).
  ProcessGrid(dist::ProcessGroup& world, std::vector<GridDim> dims);

  /// The usual 2-D grid {{"dp", N / tp}, {"tp", tp}}; throws tt::Error when tp < 1 or tp does
  /// not divide the world size N.
  static ProcessGrid dp_tp(dist::ProcessGroup& world, int tp);

  /// The world group the grid was built on.
  dist::ProcessGroup& world() const { return *world_; }
  /// The dimensions, outermost first.
  const std::vector<GridDim>& dims() const { return dims_; }
  /// Index of dimension `name`; throws tt::Error naming the known dims when there is none.
  int dim_index(const std::string& name) const;
  /// Size of dimension `name`.
  int size(const std::string& name) const { return dims_[dim_index(name)].size; }
  /// This rank's coordinate along dimension `name`.
  int coordinate(const std::string& name) const { return coords_[dim_index(name)]; }
  /// This rank's coordinates, outermost first.
  const std::vector<int>& coordinates() const { return coords_; }
  /// The group of dimension `name` (this rank and the ranks that differ from it only there).
  dist::ProcessGroup& group(const std::string& name) const { return *groups_[dim_index(name)]; }

  /// A new group over several dimensions: this rank and the ranks that differ from it only
  /// in the dimensions `names` (e.g. {"dp", "cp"}: the ranks that hold the same parameters
  /// under data and context parallelism). Its ranks are numbered in grid order, the last named
  /// dimension innermost; with one name it has the members of group(name). A collective of the
  /// whole world, like the constructor. Throws tt::Error for an unknown or repeated name.
  std::unique_ptr<dist::ProcessGroup> split_over(const std::vector<std::string>& names) const;

  /// Coordinates of world rank `rank` (last dim innermost).
  std::vector<int> coordinates_of(int rank) const;
  /// World rank at `coords`; throws tt::Error for coordinates outside the grid.
  int rank_of(const std::vector<int>& coords) const;

  /// "rank 3 of 4 (dp 1 of 2, tp 1 of 2)" for messages.
  std::string where() const;

 private:
  dist::ProcessGroup* world_;
  std::vector<GridDim> dims_;
  std::vector<int> coords_;
  std::vector<std::shared_ptr<dist::ProcessGroup>> groups_;
};

/// For a run on `type` devices: on CUDA, creates the world's NCCL communicator now
/// (dist::world().init_cuda(), a collective of the world), so that the groups of every grid made
/// afterwards are ncclCommSplit of it; nothing on the CPU. The strategies "tp", "pp" and "cp"
/// call it from ParallelStrategy::set_device_type.
void connect_world_gpus(DeviceType type);

/// Frees the world's NCCL communicator once the grids are split (dist::world().release_cuda():
/// their groups keep their own; training sends nothing over the whole world on GPUs): 216 MiB a
/// GPU on 4 H200s. The strategies call it from prepare_model.
void release_world_gpus();

}  // namespace tt::tp
