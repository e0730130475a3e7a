// Fuzzes the .npy parser: any bytes must either parse or throw tt::Error (never crash, leak or
// read out of bounds); whatever parses must survive a serialize -> parse round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tt/error.h"
#include "tt/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(data[i]);
  tt::NpyArray a;
  try {
    a = tt::parse_npy(bytes, "fuzz");
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  const tt::NpyArray b = tt::parse_npy(tt::serialize_npy(a), "roundtrip");
  if (b.dtype != a.dtype || b.shape != a.shape || b.data != a.data) std::abort();
  return 0;
}
