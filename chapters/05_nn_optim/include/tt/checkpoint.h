/// @file checkpoint.h
/// @brief A checkpoint file: named tensors with a checksum, written atomically, validated
/// completely before anything in memory changes.
///
/// Layout (all integers little-endian):
/// @verbatim
///  offset  size  field
///  0       8     magic "TTCKPT\r\n"
///  8       4     version (uint32) = 1
///  12      4     number of tensors N (uint32)
///  16      8     data offset D (uint64): where the tensor data starts, a multiple of 64,
///                after the table (D >= 32)
///  24      8     file size F (uint64), trailer included (detects truncation)
///  32      ...   N table entries:
///                  name length L (uint32), name (L bytes UTF-8),
///                  dtype (uint8: 0 float32, 1 float64, 2 int64, 3 bfloat16), ndim (uint8),
///                  shape (ndim x int64),
///                  offset (uint64, from D, a multiple of 64), nbytes (uint64)
///  ...           zero padding up to D
///  D       ...   tensor data, C order, each tensor starting at D + offset (zero padding between)
///  F-8     8     FNV-1a 64 checksum of bytes 0 .. F-9
/// @endverbatim
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tt/module.h"
#include "tt/optim.h"

namespace tt::ckpt {

using nn::StateDict;

/// The 8 magic bytes at the start of every checkpoint.
inline constexpr char kMagic[8] = {'T', 'T', 'C', 'K', 'P', 'T', '\r', '\n'};
/// The format version this code writes and reads.
inline constexpr uint32_t kVersion = 1;
/// Alignment of the data section and of every tensor in it.
inline constexpr uint64_t kAlignment = 64;

/// FNV-1a 64-bit hash of `n` bytes, continuing from `hash` (start with the offset basis):
/// for each byte, \f$ h \leftarrow (h \oplus b) \cdot 1099511628211 \bmod 2^{64} \f$.
uint64_t fnv1a64(const void* data, std::size_t n, uint64_t hash = 0xcbf29ce484222325ULL);

/// The bytes of a checkpoint holding `state` (tensors may live on any device; names must be
/// unique and non-empty, tensors defined). Throws tt::Error naming the key otherwise.
std::vector<std::byte> serialize(const StateDict& state);

/// Parses checkpoint bytes into CPU tensors, checking the size, magic, version, checksum and
/// every table entry (names unique, dtype known, shape non-negative, data inside the file,
/// nbytes = numel x element size). Throws tt::Error naming `source` and the problem.
StateDict parse(const std::vector<std::byte>& bytes, const std::string& source = "<memory>");

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written,
/// flushed and fsync'ed, then renamed over `path` (and the directory fsync'ed). A crash leaves
/// either the old file or the new one, never a mix. Throws tt::Error naming the path.
void write_file_atomic(const std::string& path, const std::vector<std::byte>& bytes);

/// The whole content of a file (throws tt::Error naming the path when it cannot be read).
std::vector<std::byte> read_file(const std::string& path);

/// serialize + write_file_atomic.
void save(const std::string& path, const StateDict& state);

/// read_file + parse.
StateDict load(const std::string& path);

/// The tensors a checkpoint of `model` (and `optimizer`, when given) holds: the model's state
/// under "model.", then the optimizer's under "optimizer." (handles to the live tensors).
StateDict checkpoint_state(const nn::Module& model, const optim::Optimizer* optimizer = nullptr);

/// Saves checkpoint_state(model, optimizer) into one file (atomically), with `metadata` (e.g. a
/// training run's configuration, tt/train_config.h) under "meta.". Refuses (throws tt::Error
/// naming the path, the key, the value and its index, before touching the file) when a float
/// tensor holds NaN or Inf: the state of a diverged run never replaces the last good
/// checkpoint. (ckpt::save writes any values.)
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer = nullptr, const StateDict& metadata = {});

/// The prefix of the metadata entries of a checkpoint ("meta"): load_checkpoint ignores them.
inline constexpr const char* kMetadataPrefix = "meta";

/// The metadata entries (names without "meta.") of checkpoint bytes; empty for a checkpoint
/// saved without any. Validates the file like parse().
StateDict checkpoint_metadata(const std::vector<std::byte>& bytes,
                              const std::string& source = "<memory>");

/// Test hook: when set, write_file_atomic calls `hook(temporary path)` after the temporary file
/// is complete and fsync'ed and before it is renamed over the target, the one moment a crash
/// leaves both files on disk. Tests make it exit the process to check that the previous file
/// survives. An empty function removes it. Not thread-safe; for tests only.
void set_before_rename_hook(std::function<void(const std::string& temp_path)> hook);

/// Loads a file written by save_checkpoint into the model and (when given) the optimizer
/// (metadata entries are skipped; read them with checkpoint_metadata). The
/// file, every key, shape and dtype of both are validated before the first value is copied:
/// when the load throws, neither the model nor the optimizer has changed.
void load_checkpoint(const std::string& path, nn::Module& model,
                     optim::Optimizer* optimizer = nullptr);

/// load_checkpoint() from checkpoint bytes already in memory (`source` names them in error
/// messages); the file version reads the file and calls this one.
void load_checkpoint(const std::vector<std::byte>& bytes, const std::string& source,
                     nn::Module& model, optim::Optimizer* optimizer = nullptr);

}  // namespace tt::ckpt
