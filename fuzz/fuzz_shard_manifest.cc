// Fuzzes the shard-set manifest parser of chapter 08 (tt::ShardManifest::parse, the code behind
// verify_shard_set and train_gpt2's data check).
//
// Properties: any bytes either parse or throw tt::Error (never crash, leak, or let another
// exception out, e.g. nlohmann's); what parses names only plain file names inside the set's
// directory (no '/', not "." or "..", shards ending in ".bin", each once), counts no negative
// tokens and has a 16-hex-digit hash; and it serializes (to_json) to text that parses back to
// an equal manifest.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tt/error.h"
#include "tt/shard_set.h"

namespace {

using tt::fuzz::require;

bool plain(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<tt::ShardManifest> m;
  try {
    m = tt::ShardManifest::parse(text, "fuzz");
  } catch (const tt::Error&) {
    return 0;  // rejected with a message: fine
  }
  require(plain(m->tokenizer_file), "the tokenizer file is not a plain name");
  require(m->tokenizer_fnv1a64.size() == 16, "the hash is not 16 digits");
  require(m->vocab_size > 0, "a non-positive vocabulary size was accepted");
  std::set<std::string> files;
  for (const tt::ShardEntry& e : m->shards) {
    require(plain(e.file) && e.file.ends_with(".bin"), "a shard is not a plain *.bin name");
    require(files.insert(e.file).second, "a shard is listed twice");
    require(e.num_tokens >= 0, "a negative token count was accepted");
    require(!e.split.empty(), "an empty split was accepted");
  }
  try {
    require(tt::ShardManifest::parse(m->to_json(), "again") == *m,
            "to_json does not parse back to the same manifest");
  } catch (const tt::Error&) {
    require(false, "to_json wrote a manifest the parser rejects");
  }
  return 0;
}
