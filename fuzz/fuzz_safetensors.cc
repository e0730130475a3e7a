// Fuzzes the safetensors reader of chapter 15 (tt::safetensors::parse, behind load_hf and
// tt_generate --model).
//
// Properties: any bytes either parse or throw tt::Error (never crash, leak, read out of bounds
// or let another exception out, e.g. nlohmann's); what parses has distinct non-empty names and
// float32 or bfloat16 tensors of at most size / 2 elements in all (2 bytes is the smallest file
// dtype);
// and serialize() of it parses back to the same names, shapes, dtypes and bits.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "fuzz_util.h"
#include "tt/error.h"
#include "tt/safetensors.h"

namespace {

using tt::fuzz::require;

bool same_bits(const tt::Tensor& a, const tt::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::size_t n = static_cast<std::size_t>(a.numel()) * tt::dtype_size(a.dtype());
  return n == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), n) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::byte> bytes = tt::fuzz::byte_vector(data, size);
  tt::nn::StateDict state;
  try {
    state = tt::safetensors::parse(bytes, "fuzz");
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  std::set<std::string> names;
  std::size_t total = 0;
  for (const auto& [name, t] : state) {
    require(!name.empty() && names.insert(name).second, "an empty or repeated tensor name");
    require(t.dtype() == tt::DType::kFloat32 || t.dtype() == tt::DType::kBFloat16,
            "a tensor of another dtype than float32 or bfloat16");
    total += static_cast<std::size_t>(t.numel()) * 2;  // every file dtype has >= 2 bytes each
  }
  require(total <= size, "the tensors hold more elements than the input has bytes");
  try {
    const tt::nn::StateDict back =
        tt::safetensors::parse(tt::safetensors::serialize(state), "again");
    require(back.size() == state.size(), "serialize lost or added tensors");
    for (const auto& [name, t] : state) {
      bool found = false;
      for (const auto& [bname, bt] : back) {
        if (bname == name) found = same_bits(t, bt);
      }
      require(found, "a tensor did not round-trip bit for bit");
    }
  } catch (const tt::Error&) {
    require(false, "serialize wrote a file the reader rejects");
  }
  return 0;
}
