// Fuzzes the llm.c model importer of chapter 09 (tt::gpt2::parse_llmc, the code behind
// load_llmc). Inputs are at most a few KiB (libFuzzer's default length limit), so every model
// that loads is tiny.
//
// Properties: any bytes either load or throw tt::Error (never crash, overflow, read out of
// bounds, or allocate more than the input describes: a hostile header must be rejected by
// comparing its sizes with the input length before anything is allocated); a model that loads
// has exactly one float per parameter float of the input, and serialize_llmc gives the input
// back (except header ints 8..255, which the format ignores and writes as zeros).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "fuzz_util.h"
#include "tt/error.h"
#include "tt/gpt2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tt::fuzz::require;
  namespace gpt2 = tt::gpt2;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::unique_ptr<gpt2::GPT2> model;
  try {
    model = gpt2::parse_llmc(bytes, "fuzz");
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  constexpr std::size_t kHeaderBytes = gpt2::kLlmcHeaderInts * 4;
  require(kHeaderBytes + static_cast<std::size_t>(model->num_parameters()) * sizeof(float) == size,
          "the model's size differs from the input's");
  const std::vector<std::byte> back = gpt2::serialize_llmc(*model);
  constexpr std::size_t kUsedHeaderBytes = 8 * 4;  // magic, version, maxT, V, L, NH, C, Vp
  require(
      back.size() == size && std::memcmp(back.data(), data, kUsedHeaderBytes) == 0 &&
          std::memcmp(back.data() + kHeaderBytes, data + kHeaderBytes, size - kHeaderBytes) == 0,
      "serialize_llmc(parse_llmc(bytes)) != bytes");
  return 0;
}
