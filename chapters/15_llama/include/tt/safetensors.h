/// @file safetensors.h
/// @brief The safetensors format of Hugging Face (chapter 15): read and write named tensors
/// (F32, BF16, F16), validated like every other loader of the project.
///
/// A file is: an unsigned little-endian 64-bit header length N; N bytes of JSON, an object
/// whose keys are tensor names (plus an optional "__metadata__" object of string values) and
/// whose values are `{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}`; then
/// the data buffer, where tensor `name` occupies bytes [begin, end) (offsets relative to the
/// buffer's start), raw little-endian, row-major. The writer sorts the tensors by name, lays
/// them out back to back and pads the header with spaces to a multiple of 8 bytes (as the
/// reference implementation does), so every tensor starts 8-byte aligned in the file.
///
/// The reader refuses (tt::Error naming the source and, where there is one, the tensor): a file
/// shorter than 8 bytes, a header length past the end of the file (or above 100 MB), a header
/// that is not a JSON object, an entry without a known dtype, a shape of non-negative integers
/// or two unsigned data_offsets, a size (end - begin) that is not numel * dtype size, offsets
/// past the buffer, two tensors whose bytes overlap, a gap between tensors or bytes after the
/// last one, and a "__metadata__" that is not an object of strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tt/module.h"
#include "tt/tensor.h"

namespace tt::safetensors {

/// Element types of a safetensors file this project reads (F16 becomes float32 in memory,
/// the only dtype conversion on load) and writes.
enum class FileDType {
  kF32,   ///< "F32": float32
  kBF16,  ///< "BF16": bfloat16 (tt::bfloat16)
  kF16,   ///< "F16": IEEE half precision (read as float32, written from float32 by rounding)
};

/// The name of a file dtype as the header spells it ("F32", "BF16", "F16").
const char* file_dtype_name(FileDType dtype);

/// One entry of a header: where a tensor's bytes are.
struct TensorEntry {
  std::string name;                   ///< the key of the header
  FileDType dtype = FileDType::kF32;  ///< element type in the file
  Shape shape;                        ///< sizes (may be empty: a scalar)
  uint64_t begin = 0;                 ///< first byte in the data buffer
  uint64_t end = 0;                   ///< one past the last byte in the data buffer
};

/// A parsed, validated header.
struct Header {
  std::vector<TensorEntry> tensors;             ///< sorted by begin offset
  std::map<std::string, std::string> metadata;  ///< the "__metadata__" object (may be empty)
  uint64_t data_offset = 0;                     ///< where the data buffer starts: 8 + N
};

/// Validates the header of a whole file's bytes (see the file comment); `source` names it in
/// errors.
Header parse_header(std::span<const std::byte> bytes, const std::string& source);

/// Every tensor of a file's bytes, on the CPU, in the header's order of offsets: F32 as
/// float32, BF16 as bfloat16, F16 converted to float32.
nn::StateDict parse(std::span<const std::byte> bytes, const std::string& source);

/// parse() of the file at `path` (errors name the path; see tt::ReadOnlyFile).
nn::StateDict load(const std::string& path);

/// How save() stores floating tensors.
enum class StoreAs {
  kKeep,  ///< float32 as F32, bfloat16 as BF16 (float64 is refused)
  kF32,   ///< everything as F32
  kBF16,  ///< everything as BF16 (rounded to nearest even)
  kF16,   ///< everything as F16 (rounded to nearest even; out-of-range values become inf)
};

/// The bytes of a safetensors file holding `state` (names must be distinct and non-empty;
/// tensors defined and floating; CUDA tensors are copied to the CPU), with `metadata` as
/// "__metadata__" (omitted when empty).
std::vector<std::byte> serialize(const nn::StateDict& state, StoreAs store = StoreAs::kKeep,
                                 const std::map<std::string, std::string>& metadata = {});

/// serialize() written to `path` (through a temporary file renamed into place).
void save(const std::string& path, const nn::StateDict& state, StoreAs store = StoreAs::kKeep,
          const std::map<std::string, std::string>& metadata = {});

/// Copies the tensors of `file` (as parse() returns them) into `targets` (e.g. a module's
/// state_dict()), all or nothing, through nn::apply_state_dict: a floating tensor is first
/// converted to its target's dtype (float32 <-> bfloat16) and device; a missing tensor, a
/// shape mismatch, and (with `strict`) a tensor the targets lack are errors naming the tensor
/// and `source`. Names listed in `ignore` are skipped (e.g. "lm_head.weight" of a tied model).
void load_into(const nn::StateDict& targets, const nn::StateDict& file, const std::string& source,
               bool strict = true, const std::vector<std::string>& ignore = {});

/// IEEE half (binary16) bits -> float (exact; subnormals, infinities and NaN kept).
float half_to_float(uint16_t h);
/// float -> IEEE half bits, rounded to nearest even (overflow to inf, NaN stays NaN).
uint16_t float_to_half(float f);

}  // namespace tt::safetensors
