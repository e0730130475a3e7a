// Fuzzes the checkpoint reader of chapter 05 (tt::ckpt::parse and load_checkpoint).
//
// Input: one flag byte, then the checkpoint bytes. Flag bit 0 rewrites the header's file-size
// field and bit 1 the FNV-1a checksum trailer to match the bytes, so that mutations get past
// those two checks and reach the tensor table (seeds have both bits set).
//
// Properties: any bytes either parse or throw tt::Error (never crash, leak or read out of
// bounds); whatever parses survives serialize -> parse unchanged (names, dtypes, shapes and
// bytes, and serialize is then a fixed point); load_checkpoint into a Linear + AdamW is
// all-or-nothing: when it throws, not one byte of the model or optimizer state has changed, and
// when it succeeds every tensor holds the value stored in the file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "tt/checkpoint.h"
#include "tt/error.h"

namespace {

using tt::fuzz::require;
using tt::nn::StateDict;

constexpr std::size_t kFileSizeAt = 24;  // header field "file size" (tt/checkpoint.h)
constexpr std::size_t kTrailerSize = 8;  // FNV-1a checksum of everything before it

/// The checkpoint bytes of the input, with the fix-ups its flag byte asks for.
std::vector<std::byte> checkpoint_bytes(const uint8_t* data, std::size_t size) {
  std::vector<std::byte> bytes = tt::fuzz::byte_vector(data + 1, size - 1);
  if ((data[0] & 1) && bytes.size() >= kFileSizeAt + 8) {
    const uint64_t n = bytes.size();
    std::memcpy(bytes.data() + kFileSizeAt, &n, sizeof(n));
  }
  if ((data[0] & 2) && bytes.size() >= kTrailerSize) {
    const uint64_t sum = tt::ckpt::fnv1a64(bytes.data(), bytes.size() - kTrailerSize);
    std::memcpy(bytes.data() + bytes.size() - kTrailerSize, &sum, sizeof(sum));
  }
  return bytes;
}

bool same_bytes(const tt::Tensor& a, const tt::Tensor& b) {
  const std::size_t n = static_cast<std::size_t>(a.numel()) * tt::dtype_size(a.dtype());
  return n == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), n) == 0;
}

bool same_state(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const tt::Tensor& x = a[i].second;
    const tt::Tensor& y = b[i].second;
    if (a[i].first != b[i].first || x.dtype() != y.dtype() || x.shape() != y.shape() ||
        !same_bytes(x, y))
      return false;
  }
  return true;
}

void check_parse_round_trip(const std::vector<std::byte>& bytes) {
  StateDict state;
  try {
    state = tt::ckpt::parse(bytes, "fuzz");
  } catch (const tt::Error&) {
    return;  // rejected with a message: fine
  }
  const std::vector<std::byte> again = tt::ckpt::serialize(state);
  const StateDict back = tt::ckpt::parse(again, "roundtrip");
  require(same_state(state, back), "parse(serialize(state)) != state");
  require(tt::ckpt::serialize(back) == again, "serialize is not a fixed point");
}

void check_load_all_or_nothing(const std::vector<std::byte>& bytes) {
  tt::fuzz::CheckpointTarget target;
  const StateDict live = tt::ckpt::checkpoint_state(target.model, &target.optimizer);
  const std::vector<std::byte> before = tt::ckpt::serialize(live);
  try {
    tt::ckpt::load_checkpoint(bytes, "fuzz", target.model, &target.optimizer);
  } catch (const tt::Error&) {
    require(tt::ckpt::serialize(live) == before, "a failed load_checkpoint changed the target");
    return;
  }
  const StateDict file = tt::ckpt::parse(bytes, "fuzz");
  require(file.size() == live.size(), "load_checkpoint accepted extra or missing keys");
  for (const auto& [name, t] : live) {
    bool found = false;
    for (const auto& [file_name, value] : file) {
      if (file_name != name) continue;
      require(value.shape() == t.shape() && value.dtype() == t.dtype() && same_bytes(value, t),
              "a loaded tensor differs from the file's");
      found = true;
    }
    require(found, "load_checkpoint succeeded without a key of the target");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<std::byte> bytes = checkpoint_bytes(data, size);
  check_parse_round_trip(bytes);
  check_load_all_or_nothing(bytes);
  return 0;
}
