/// @file shard_set.h
/// @brief A shard set: the directory tt_prepare_data writes, whose manifest ties the token
/// shards to the tokenizer they were encoded with.
///
/// A set is one directory holding
/// - `tokenizer.ttbpe`: the tokenizer (tt::Tokenizer::save);
/// - `NAME_train_NNNNNN.bin`, `NAME_val_NNNNNN.bin`: the shards (tt::write_shard);
/// - `manifest.json`: the tokenizer's identity and the list of shards:
///
/// @code{.json}
/// {
///   "format": "tt-shard-set",
///   "shards": [
///     {"file": "fortunes_train_000000.bin", "split": "train", "tokens": 772043},
///     {"file": "fortunes_val_000000.bin", "split": "val", "tokens": 88682}
///   ],
///   "tokenizer": {"file": "tokenizer.ttbpe", "fnv1a64": "e1993070f5ddbffe", "vocab_size": 4096},
///   "version": 1
/// }
/// @endcode
///
/// (to_json() writes the keys in this order, one value a line.) `fnv1a64` is the FNV-1a 64-bit
/// hash (tt::ckpt::fnv1a64) of the tokenizer file's bytes as 16 lowercase hex digits: not a
/// cryptographic hash, an identity that changes with any byte of the tokenizer. A reader
/// (train_gpt2) calls shard_set_paths() (or verify_shard_set()), which refuse shards encoded
/// with another tokenizer, shards the manifest does not list and directories without a manifest
/// (sets written before manifests existed: rerun tt_prepare_data).
/// ShardSetWriter writes a set into a staging directory and publishes it with one rename, so a
/// set is always complete and never mixes two runs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tt/tokenizer.h"

namespace tt {

/// Names and version of the shard-set format.
namespace shard_set {
inline constexpr const char* kManifestFile = "manifest.json";     ///< the manifest's file name
inline constexpr const char* kTokenizerFile = "tokenizer.ttbpe";  ///< the tokenizer's file name
inline constexpr const char* kFormat = "tt-shard-set";            ///< the manifest's "format"
inline constexpr int64_t kVersion = 1;                            ///< the manifest's "version"
}  // namespace shard_set

/// One shard of a set, as the manifest lists it.
struct ShardEntry {
  std::string file;        ///< file name inside the set's directory (no '/', ends with ".bin")
  std::string split;       ///< "train" or "val" (any name of [a-z0-9_-])
  int64_t num_tokens = 0;  ///< the token count of the shard's header
  /// Field-wise equality.
  bool operator==(const ShardEntry&) const = default;
};

/// The content of a set's manifest.json.
struct ShardManifest {
  std::string tokenizer_file = shard_set::kTokenizerFile;  ///< tokenizer file name in the set
  std::string tokenizer_fnv1a64;   ///< file_fnv1a64() of the tokenizer file (16 hex digits)
  int64_t vocab_size = 0;          ///< the tokenizer's vocabulary size (shards' token bound)
  std::vector<ShardEntry> shards;  ///< every shard, train and val, in the order written

  /// The file names of `split`'s shards, in manifest order.
  std::vector<std::string> files(const std::string& split) const;
  /// The manifest as JSON text (indented, with a final newline).
  std::string to_json() const;
  /// Parses manifest.json text. Throws tt::Error naming `source` and the problem for malformed
  /// JSON, another format or version, a missing or mistyped field, a file name with '/' (or
  /// ".", "..", empty, a shard without ".bin"), a repeated shard, a negative token count, a
  /// vocabulary size outside [1, 2^31 - 1] or a hash that is not 16 lowercase hex digits.
  static ShardManifest parse(std::string_view json, const std::string& source);
  /// Field-wise equality.
  bool operator==(const ShardManifest&) const = default;
};

/// FNV-1a 64 (tt::ckpt::fnv1a64) of the bytes of the file at `path`, as 16 lowercase hex
/// digits; `what` names the file in errors (see tt::ReadOnlyFile).
std::string file_fnv1a64(const std::string& path, const std::string& what = "file");

/// Checks the shard set in `dir` against the tokenizer file `tokenizer_path` (the one the
/// caller will use) and returns its manifest. Throws tt::Error, saying what to do, when `dir` is
/// not a directory, has no manifest.json (a set of an older tt_prepare_data), the manifest is
/// malformed, the tokenizer's hash differs from the manifest's (shards encoded with another
/// tokenizer), a listed shard is missing, invalid or has another token count, or a `*.bin` file
/// in `dir` is not listed in the manifest (a shard of another run).
ShardManifest verify_shard_set(const std::string& dir, const std::string& tokenizer_path);

/// verify_shard_set(dir, tokenizer_path), then the paths (`dir`/file) of `split`'s shards in
/// manifest order; throws tt::Error when the set has no shard of that split.
std::vector<std::string> shard_set_paths(const std::string& dir, const std::string& split,
                                         const std::string& tokenizer_path);

/// Writes a shard set: every file goes into a staging directory next to `out`
/// (`.NAME.tmp.XXXXXX` in out's parent), and commit() writes manifest.json and publishes the
/// staging directory as `out` with one rename. A run that fails or is killed never leaves a
/// partial or mixed set in `out` (a killed run leaves its staging directory behind).
class ShardSetWriter {
 public:
  /// Prepares to write the set `out`. Throws tt::Error, before any work, when `out` exists and is
  /// not an empty directory, unless `overwrite` (then commit() replaces the whole old set in
  /// one atomic exchange, renameat2 RENAME_EXCHANGE, and removes it); and when `out` exists
  /// but is not a directory. A symbolic link `out` is resolved (its target is replaced).
  ShardSetWriter(const std::string& out, bool overwrite);
  /// Removes the staging directory unless commit() succeeded.
  ~ShardSetWriter();
  ShardSetWriter(const ShardSetWriter&) = delete;
  ShardSetWriter& operator=(const ShardSetWriter&) = delete;

  /// Saves `tok` as the set's tokenizer.ttbpe and records its hash and vocabulary size; call it
  /// once, before write_shard().
  void set_tokenizer(const Tokenizer& tok);
  /// Writes `tokens` as the shard `file` (a plain name ending in ".bin") of `split` and lists
  /// it in the manifest; tokens must be < the tokenizer's vocabulary size.
  void write_shard(const std::string& file, const std::string& split,
                   std::span<const int32_t> tokens);
  /// Writes manifest.json and publishes the set as out(). Throws tt::Error when no tokenizer
  /// was set, or when `out` became a non-empty directory meanwhile (another run published
  /// first) without `overwrite`.
  void commit();

  /// The directory the set is published as.
  const std::string& out() const { return out_; }
  /// The staging directory the files are written to until commit().
  const std::string& staging() const { return staging_; }
  /// The manifest written so far.
  const ShardManifest& manifest() const { return manifest_; }

 private:
  std::string out_, staging_;
  bool overwrite_ = false;
  bool committed_ = false;
  ShardManifest manifest_;
};

}  // namespace tt
