// The multi-tensor table (tt/multi_tensor.h): validation, host layout and the copy to the device.
#include "tt/multi_tensor.h"

#include <cstring>
#include <string>

#include "tt/cuda_device.h"

namespace tt::cuda {

static_assert(sizeof(MtEntry) % sizeof(int64_t) == 0 && sizeof(MtChunk) == 2 * sizeof(int64_t));

MultiTensorTable make_multi_tensor_table(const char* op, std::initializer_list<MtList> lists) {
  const std::vector<MtList> ls(lists);
  TT_CHECK(!ls.empty() && ls.size() <= static_cast<std::size_t>(kMaxTensorLists), op,
           ": a multi-tensor table holds 1 to ", kMaxTensorLists, " lists, got ", ls.size());
  const std::size_t count = ls[0].tensors->size();
  MultiTensorTable table;
  std::vector<MtEntry> entries;
  std::vector<MtChunk> chunks;
  for (std::size_t i = 0; i < count; ++i) {
    MtEntry e{};
    e.vec = 1;
    for (std::size_t l = 0; l < ls.size(); ++l) {
      const std::vector<Tensor>& list = *ls[l].tensors;
      TT_CHECK(list.size() == count, op, ": ", ls[l].name, " has ", list.size(), " tensors but ",
               ls[0].name, " has ", count);
      const Tensor& t = list[i];
      TT_CHECK(t.defined(), op, ": ", ls[l].name, "[", i, "] is undefined");
      const Tensor& first = (*ls[0].tensors)[0];
      TT_CHECK(t.device().is_cuda() && t.device() == first.device(), op, ": ", ls[l].name, "[", i,
               "] must be on the CUDA device of ", ls[0].name, "[0] (", first.device().str(),
               "), got ", t.describe());
      TT_CHECK(t.dtype() == ls[l].dtype && t.is_contiguous(), op, ": ", ls[l].name, "[", i,
               "] must be a contiguous ", dtype_name(ls[l].dtype), " tensor, got ", t.describe());
      const Tensor& lead = (*ls[0].tensors)[i];
      TT_CHECK(t.numel() == lead.numel(), op, ": ", ls[l].name, "[", i, "] ", t.describe(),
               " does not match ", ls[0].name, "[", i, "] ", lead.describe());
      e.ptr[l] = t.data_ptr();
      const auto align = static_cast<std::uintptr_t>(4 * dtype_size(t.dtype()));
      if (reinterpret_cast<std::uintptr_t>(e.ptr[l]) % align != 0) e.vec = 0;
    }
    e.numel = (*ls[0].tensors)[i].numel();
    for (int64_t b = 0; b < e.numel; b += kMultiTensorChunk) {
      chunks.push_back({static_cast<int64_t>(entries.size()), b});
    }
    entries.push_back(e);
  }
  table.num_chunks = static_cast<int64_t>(chunks.size());
  if (chunks.empty()) return table;
  table.device = (*ls[0].tensors)[0].device().index;
  const std::size_t entry_words = entries.size() * sizeof(MtEntry) / sizeof(int64_t);
  std::vector<int64_t> words(entry_words + chunks.size() * 2);
  std::memcpy(words.data(), entries.data(), entries.size() * sizeof(MtEntry));
  std::memcpy(words.data() + entry_words, chunks.data(), chunks.size() * sizeof(MtChunk));
  table.buffer = from_vector<int64_t>(words).to(Device::cuda(table.device));
  table.entries = reinterpret_cast<const MtEntry*>(table.buffer.data_ptr());
  table.chunks = reinterpret_cast<const MtChunk*>(table.buffer.data<int64_t>() + entry_words);
  return table;
}

unsigned multi_tensor_grid(const MultiTensorTable& t, int threads) {
  const int64_t most = grid_size(t.num_chunks * threads, threads, t.device);  // fills the GPU
  const int64_t per = (t.num_chunks + most - 1) / most;  // chunks of the busiest block
  return static_cast<unsigned>((t.num_chunks + per - 1) / per);
}

}  // namespace tt::cuda
