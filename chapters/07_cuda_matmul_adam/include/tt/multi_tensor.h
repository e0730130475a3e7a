/// @file multi_tensor.h
/// @brief The "multi-tensor apply" table behind chapter 07's fused optimizer kernels (and
/// chapter 11's master-weight AdamW): one launch updates every tensor of a list of lists.
///
/// GPT-2 small has ~150 parameter tensors. One launch per tensor means ~150 launches of a few
/// microseconds each, most too small to fill the GPU. Instead, a table of pointers (entry i: tensor
/// i of every list, e.g. p, g, m, v) and a list of fixed-size chunks (kMultiTensorChunk elements of
/// one entry) go to the device in one copy, and each block of one kernel walks the chunks
/// blockIdx.x, +gridDim.x, ...
///
/// CUDA builds only (TT_WITH_CUDA): the functions are defined in a CUDA source.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "tt/fused_optim.h"  // kMultiTensorChunk
#include "tt/tensor.h"

namespace tt::cuda {

/// Most lists one table holds (AdamW with bfloat16 copies: p, g, m, v, copy).
inline constexpr int kMaxTensorLists = 5;

/// Tensor i of every list: up to kMaxTensorLists pointers of numel elements each.
struct MtEntry {
  void* ptr[kMaxTensorLists];  ///< list l's tensor i (its dtype is the list's)
  int64_t numel;               ///< elements of every tensor of the entry
  int64_t vec;  ///< 1 when every pointer is aligned to 4 of its elements (float4 of float32)
  /// List l's pointer as T* (T: the list's element type).
  template <class T>
  TT_HOST_DEVICE T* list(int l) const {
    return static_cast<T*>(ptr[l]);
  }
};

/// One chunk: kMultiTensorChunk elements of entry `entry` starting at `begin`.
struct MtChunk {
  int64_t entry;  ///< index into the entries
  int64_t begin;  ///< first element (a multiple of kMultiTensorChunk)
};

/// One list of a table: its tensors, its name in error messages and the dtype they must have.
struct MtList {
  const std::vector<Tensor>* tensors;  ///< tensor i goes into entry i
  const char* name;                    ///< e.g. "params"
  DType dtype = DType::kFloat32;       ///< every tensor of the list has it
};

/// The device copy of a table: entries, then chunks, in one int64 tensor. It may be freed as
/// soon as the launch is queued: all work of a device runs on one stream, so the allocator hands
/// the memory to later work only (chapter 06).
struct MultiTensorTable {
  Tensor buffer;                     ///< owns the device memory of entries and chunks
  const MtEntry* entries = nullptr;  ///< on the device
  const MtChunk* chunks = nullptr;   ///< on the device
  int64_t num_chunks = 0;            ///< 0: nothing to launch
  int device = 0;                    ///< CUDA device index of every tensor
};

/// Validates `lists` (same length; tensor i of each list: defined, contiguous, of the list's
/// dtype and of one numel, all on one CUDA device), builds the table on the host and copies it to
/// the device. Throws tt::Error naming `op`, the list, the index and the tensor otherwise.
MultiTensorTable make_multi_tensor_table(const char* op, std::initializer_list<MtList> lists);

/// Blocks of a grid-stride loop over the chunks of `t` with `threads` per block: one per chunk
/// up to what fills the GPU once; beyond, the fewest blocks that give every block the same
/// number of chunks, ceil(chunks / per) with per = ceil(chunks / most), so that no block walks a
/// chunk more than the others while the rest wait (GPT-2 124M's AdamW: 1,995 chunks, 998 blocks
/// of 2 instead of 1,056 blocks of 1 or 2; 0.8% faster on an H200).
unsigned multi_tensor_grid(const MultiTensorTable& t, int threads);

}  // namespace tt::cuda
