// The safetensors reader and writer (tt/safetensors.h).
#include "tt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "tt/checkpoint.h"
#include "tt/error.h"
#include "tt/file.h"

namespace tt::safetensors {

namespace {

using json = nlohmann::json;

/// Largest header accepted (the reference implementation's limit is 100 MB too).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::size_t element_size(FileDType dtype) {
  return dtype == FileDType::kF32 ? 4 : 2;
}

bool parse_dtype(const std::string& s, FileDType* out) {
  if (s == "F32")
    *out = FileDType::kF32;
  else if (s == "BF16")
    *out = FileDType::kBF16;
  else if (s == "F16")
    *out = FileDType::kF16;
  else
    return false;
  return true;
}

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

uint16_t read_le16(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<uint16_t>(p[0]) | (static_cast<uint16_t>(p[1]) << 8));
}

void put_le(std::vector<std::byte>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

/// One entry of the header, validated alone (the offsets against the buffer come later).
TensorEntry parse_entry(const std::string& name, const json& j, uint64_t buffer_bytes,
                        const std::string& source) {
  auto fail = [&](const std::string& why) {
    TT_THROW("safetensors '", source, "': tensor '", name, "': ", why);
  };
  if (name.empty()) fail("an empty tensor name");
  if (!j.is_object()) fail("the entry is not a JSON object");
  for (const auto& [key, _] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail("unknown key '" + key + "'");
  }
  TensorEntry e;
  e.name = name;
  if (!j.contains("dtype") || !j["dtype"].is_string()) fail("no string \"dtype\"");
  const std::string dt = j["dtype"].get<std::string>();
  if (!parse_dtype(dt, &e.dtype)) fail("dtype '" + dt + "' is not one of F32, BF16, F16");
  if (!j.contains("shape") || !j["shape"].is_array()) fail("no \"shape\" array");
  // The product of the non-zero sizes is bounded (by the buffer, or 2^32 elements for an empty
  // tensor such as [0, 4096]), so no size, stride or byte count can overflow later.
  const uint64_t limit = std::max<uint64_t>(buffer_bytes / element_size(e.dtype), 1ull << 32);
  uint64_t nonzero = 1;
  bool has_zero = false;
  for (const json& d : j["shape"]) {
    if (!d.is_number_unsigned()) {
      fail("shape " + j["shape"].dump() + " holds a non-integer or negative size");
    }
    const uint64_t n = d.get<uint64_t>();
    if (n == 0) {
      has_zero = true;
    } else if (n > limit / nonzero) {
      fail("shape " + j["shape"].dump() + " is larger than the file");
    } else {
      nonzero *= n;
    }
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const uint64_t numel = has_zero ? 0 : nonzero;
  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() ||
      j["data_offsets"].size() != 2 || !j["data_offsets"][0].is_number_unsigned() ||
      !j["data_offsets"][1].is_number_unsigned()) {
    fail("\"data_offsets\" must be two unsigned integers [begin, end]");
  }
  e.begin = j["data_offsets"][0].get<uint64_t>();
  e.end = j["data_offsets"][1].get<uint64_t>();
  if (e.begin > e.end || e.end > buffer_bytes) {
    fail(detail::str("data_offsets [", e.begin, ", ", e.end, "] are not inside the data buffer of ",
                     buffer_bytes, " bytes"));
  }
  const uint64_t want = numel * element_size(e.dtype);
  if (e.end - e.begin != want) {
    fail(detail::str("data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin,
                     " bytes, but shape ", e.shape, " of ", dt, " needs ", want));
  }
  return e;
}

}  // namespace

const char* file_dtype_name(FileDType dtype) {
  switch (dtype) {
    case FileDType::kF32:
      return "F32";
    case FileDType::kBF16:
      return "BF16";
    case FileDType::kF16:
      return "F16";
  }
  return "?";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf or NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: value = mant * 2^-24; normalize it.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FF) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00);   // NaN (quiet)
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal half, mant * 2^-24, rounded.
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal: 0
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFF) | 0x800000;  // 24-bit significand, value m * 2^(e-150)
    const uint32_t shift = 126 - e;                  // to units of 2^-24: m >> (150 - 24 - e)
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias and round the 23-bit mantissa to 10 bits, nearest even (a carry into the
  // exponent is the right answer, up to inf).
  uint32_t h = (((abs >> 23) - 112) << 10) | ((abs >> 13) & 0x3FF);
  const uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

Header parse_header(std::span<const std::byte> bytes, const std::string& source) {
  TT_CHECK(bytes.size() >= 8, "safetensors '", source, "': the file has ", bytes.size(),
           " bytes, fewer than the 8 of the header length");
  const uint64_t n = read_le64(bytes.data());
  TT_CHECK(n <= bytes.size() - 8, "safetensors '", source, "': the header length ", n,
           " runs past the end of the file (", bytes.size(), " bytes)");
  TT_CHECK(n <= kMaxHeaderBytes, "safetensors '", source, "': the header length ", n,
           " is above the limit of ", kMaxHeaderBytes, " bytes");
  Header h;
  h.data_offset = 8 + n;
  const uint64_t buffer = bytes.size() - h.data_offset;
  const auto* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json j;
  try {
    j = json::parse(text, text + n);
  } catch (const json::exception& e) {
    TT_THROW("safetensors '", source, "': the header is not valid JSON: ", e.what());
  }
  TT_CHECK(j.is_object(), "safetensors '", source, "': the header is not a JSON object");
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      TT_CHECK(value.is_object(), "safetensors '", source,
               "': \"__metadata__\" is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        TT_CHECK(v.is_string(), "safetensors '", source, "': \"__metadata__\" value of '", k,
                 "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(name, value, buffer, source));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry& e : h.tensors) {
    if (e.begin < covered) {
      TT_THROW("safetensors '", source, "': tensor '", e.name, "' (bytes [", e.begin, ", ", e.end,
               ")) overlaps tensor '", prev->name, "' (bytes [", prev->begin, ", ", prev->end,
               "))");
    }
    TT_CHECK(e.begin == covered, "safetensors '", source, "': a gap of ", e.begin - covered,
             " bytes in the data buffer before tensor '", e.name, "' (bytes [", e.begin, ", ",
             e.end, "))");
    covered = e.end;
    prev = &e;
  }
  TT_CHECK(covered == buffer, "safetensors '", source, "': the tensors cover ", covered,
           " bytes of a data buffer of ", buffer, " (the file has bytes no tensor describes)");
  return h;
}

nn::StateDict parse(std::span<const std::byte> bytes, const std::string& source) {
  const Header h = parse_header(bytes, source);
  nn::StateDict out;
  out.reserve(h.tensors.size());
  for (const TensorEntry& e : h.tensors) {
    const std::byte* p = bytes.data() + h.data_offset + e.begin;
    const int64_t n = shape_numel(e.shape);
    Tensor t;
    switch (e.dtype) {
      case FileDType::kF32: {
        t = empty(e.shape, {DType::kFloat32});
        auto* d = static_cast<float*>(t.data_ptr());
        for (int64_t i = 0; i < n; ++i) {
          uint32_t v = 0;
          for (int b = 3; b >= 0; --b) v = (v << 8) | static_cast<uint32_t>(p[4 * i + b]);
          d[i] = std::bit_cast<float>(v);
        }
        break;
      }
      case FileDType::kBF16: {
        t = empty(e.shape, {DType::kBFloat16});
        auto* d = static_cast<bfloat16*>(t.data_ptr());
        for (int64_t i = 0; i < n; ++i) d[i] = bfloat16{read_le16(p + 2 * i)};
        break;
      }
      case FileDType::kF16: {
        t = empty(e.shape, {DType::kFloat32});
        auto* d = static_cast<float*>(t.data_ptr());
        for (int64_t i = 0; i < n; ++i) d[i] = half_to_float(read_le16(p + 2 * i));
        break;
      }
    }
    out.emplace_back(e.name, t);
  }
  return out;
}

nn::StateDict load(const std::string& path) {
  const auto bytes = read_whole_file<std::vector<std::byte>>(path, "safetensors file");
  return parse(bytes, path);
}

std::vector<std::byte> serialize(const nn::StateDict& state, StoreAs store,
                                 const std::map<std::string, std::string>& metadata) {
  struct Item {
    std::string name;
    Tensor t;  // CPU, contiguous, of the stored dtype (float32 also for F16)
    FileDType dtype;
  };
  std::vector<Item> items;
  std::set<std::string> names;
  for (const auto& [name, tensor] : state) {
    TT_CHECK(!name.empty() && name != "__metadata__",
             "safetensors::serialize: invalid tensor name '", name, "'");
    TT_CHECK(names.insert(name).second, "safetensors::serialize: tensor '", name,
             "' is given twice");
    TT_CHECK(tensor.defined(), "safetensors::serialize: tensor '", name, "' is undefined");
    const DType dt = tensor.dtype();
    TT_CHECK(is_floating(dt) && !(store == StoreAs::kKeep && dt == DType::kFloat64),
             "safetensors::serialize: tensor '", name, "' is ", tensor.describe(),
             "; only float32 and bfloat16 are stored as they are (or pass StoreAs::kF32, kBF16, "
             "kF16)");
    FileDType fd = FileDType::kF32;
    if (store == StoreAs::kBF16 || (store == StoreAs::kKeep && dt == DType::kBFloat16)) {
      fd = FileDType::kBF16;
    } else if (store == StoreAs::kF16) {
      fd = FileDType::kF16;
    }
    Tensor t = tensor.detach().to(Device::cpu());
    t = t.to(fd == FileDType::kBF16 ? DType::kBFloat16 : DType::kFloat32).contiguous();
    items.push_back({name, t, fd});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.name < b.name; });
  json header = json::object();
  uint64_t offset = 0;
  for (const Item& it : items) {
    const uint64_t bytes = static_cast<uint64_t>(it.t.numel()) * element_size(it.dtype);
    header[it.name] = {{"dtype", file_dtype_name(it.dtype)},
                       {"shape", it.t.shape()},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::vector<std::byte> out;
  out.reserve(8 + text.size() + offset);
  put_le(out, text.size(), 8);
  for (char c : text) out.push_back(static_cast<std::byte>(c));
  for (const Item& it : items) {
    const int64_t n = it.t.numel();
    if (it.dtype == FileDType::kF32) {
      const auto* d = static_cast<const float*>(it.t.data_ptr());
      for (int64_t i = 0; i < n; ++i) put_le(out, std::bit_cast<uint32_t>(d[i]), 4);
    } else if (it.dtype == FileDType::kBF16) {
      const auto* d = static_cast<const bfloat16*>(it.t.data_ptr());
      for (int64_t i = 0; i < n; ++i) put_le(out, d[i].bits, 2);
    } else {
      const auto* d = static_cast<const float*>(it.t.data_ptr());
      for (int64_t i = 0; i < n; ++i) put_le(out, float_to_half(d[i]), 2);
    }
  }
  return out;
}

void save(const std::string& path, const nn::StateDict& state, StoreAs store,
          const std::map<std::string, std::string>& metadata) {
  ckpt::write_file_atomic(path, serialize(state, store, metadata));
}

void load_into(const nn::StateDict& targets, const nn::StateDict& file, const std::string& source,
               bool strict, const std::vector<std::string>& ignore) {
  std::map<std::string, const Tensor*> target_of;
  for (const auto& [name, t] : targets) target_of[name] = &t;
  nn::StateDict converted;
  converted.reserve(file.size());
  for (const auto& [name, t] : file) {
    if (std::find(ignore.begin(), ignore.end(), name) != ignore.end()) continue;
    Tensor c = t;
    const auto it = target_of.find(name);
    if (it != target_of.end() && it->second->defined()) {
      const Tensor& target = *it->second;
      if (is_floating(t.dtype()) && is_floating(target.dtype()) && t.dtype() != target.dtype()) {
        c = c.to(target.dtype());
      }
      if (c.device() != target.device()) c = c.to(target.device());
    }
    converted.emplace_back(name, c);
  }
  nn::apply_state_dict(targets, converted, source, strict);
}

}  // namespace tt::safetensors
