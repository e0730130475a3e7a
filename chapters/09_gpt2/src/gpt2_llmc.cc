// ============================================================================================
// YOUR EXERCISE FILE for chapter 09_gpt2. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch09
// Generated from solutions/09_gpt2/gpt2_llmc.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// llm.c model files (tt/gpt2.h): the header check, the parameter layout (exercise ch09.5), and
// the importer/exporter built on it.
//
// File format (llm.c's train_gpt2.c, float32 "version 3"):
//   int32 header[256]: magic 20240326, version 3, maxT, V, L, NH, C, Vp, then zeros
//   float32 parameters: wte [Vp, C], wpe [maxT, C], then each per-layer kind stacked over the
//   L layers (ln1w [L, C], ln1b, qkvw [L, 3C, C], qkvb, attprojw [L, C, C], attprojb, ln2w,
//   ln2b, fcw [L, 4C, C], fcb, fcprojw [L, C, 4C], fcprojb), then lnfw [C], lnfb [C].
#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

#include "tt/checkpoint.h"
#include "tt/gpt2.h"
#include "tt/shards.h"
#include "tt/todo.h"

namespace tt::gpt2 {

std::vector<LlmcSlot> llmc_layout(const GPT2Config& config) {
  (void)config;
  TT_TODO("ch09.5",
          "llmc_layout: one slot (name, float offset, shape) per parameter, in named_parameters() "
          "order (wte, wpe, h.0.*, ..., ln_f); offsets follow llm.c's file order: wte, wpe, each "
          "of the 12 per-layer kinds stacked over the L layers, ln_f");
}

int64_t llmc_num_floats(const GPT2Config& config) {
  // Checked arithmetic: the sizes may come from a hostile file header, and a count that wrapped
  // around could match a small file.
  bool overflow = false;
  auto mul = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_mul_overflow(a, b, &r);
    return r;
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    overflow |= __builtin_add_overflow(a, b, &r);
    return r;
  };
  const int64_t L = config.n_layer, C = config.n_embd;
  // Per layer: ln_1 (2C), c_attn (3C*C + 3C), attn c_proj (C*C + C), ln_2 (2C),
  // c_fc (4C*C + 4C), mlp c_proj (4C*C + C): 12 C^2 + 13 C.
  const int64_t per_layer = add(mul(12, mul(C, C)), mul(13, C));
  const int64_t total = add(
      add(mul(add(config.padded_vocab_size, config.block_size), C), mul(L, per_layer)), mul(2, C));
  TT_CHECK(!overflow, "llmc_num_floats: the parameter count of a model with ", config.str(),
           " does not fit int64");
  return total;
}

GPT2Config parse_llmc_header(std::span<const std::byte> bytes, const std::string& source) {
  std::array<int32_t, kLlmcHeaderInts> h{};
  TT_CHECK(bytes.size() >= sizeof(h), "load_llmc: '", source,
           "' is shorter than the 1024-byte llm.c header (", bytes.size(), " bytes)");
  std::memcpy(h.data(), bytes.data(), sizeof(h));
  TT_CHECK(h[0] == kLlmcMagic, "load_llmc: '", source, "' has magic ", h[0], ", expected ",
           kLlmcMagic, " (not an llm.c model file)");
  TT_CHECK(h[1] == kLlmcVersionFp32, "load_llmc: '", source, "' has version ", h[1],
           "; only version ", kLlmcVersionFp32, " (float32) is supported",
           h[1] == 5 ? " (version 5 is bfloat16)" : "");
  GPT2Config c;
  c.block_size = h[2];
  c.vocab_size = h[3];
  c.n_layer = h[4];
  c.n_head = h[5];
  c.n_embd = h[6];
  c.padded_vocab_size = h[7];
  int64_t num_floats = 0;
  try {
    c.validate();
    num_floats = llmc_num_floats(c);
  } catch (const Error& e) {
    TT_THROW("load_llmc: '", source, "' has an invalid header: ", e.what());
  }
  // Compared without computing the expected size, which may not fit any integer type.
  const std::size_t data_bytes = bytes.size() - sizeof(h);
  TT_CHECK(data_bytes % sizeof(float) == 0 &&
               static_cast<uint64_t>(num_floats) == data_bytes / sizeof(float),
           "load_llmc: '", source, "' is ", bytes.size(), " bytes, but a model with ", c.str(),
           " needs ", sizeof(h), " (header) + 4 x ", num_floats, " (floats) bytes");
  return c;
}

GPT2Config read_llmc_header(const std::string& path) {
  const MappedFile file(path, "llm.c model file");
  return parse_llmc_header(std::as_bytes(std::span(file.data(), file.size())), path);
}

std::unique_ptr<GPT2> parse_llmc(std::span<const std::byte> bytes, const std::string& source) {
  const GPT2Config config = parse_llmc_header(bytes, source);
  const std::byte* params = bytes.data() + kLlmcHeaderInts * 4;
  auto model = std::make_unique<GPT2>(config);
  for (const LlmcSlot& slot : llmc_layout(config)) {
    const Tensor p = model->parameter(slot.name);
    TT_CHECK(p.shape() == slot.shape, "load_llmc: slot ", slot.name, " has shape ", slot.shape,
             " but the parameter is ", p.describe());
    std::memcpy(p.data<float>(), params + slot.offset * static_cast<int64_t>(sizeof(float)),
                static_cast<std::size_t>(p.numel()) * sizeof(float));
  }
  return model;
}

std::unique_ptr<GPT2> load_llmc(const std::string& path) {
  const MappedFile file(path, "llm.c model file");
  return parse_llmc(std::as_bytes(std::span(file.data(), file.size())), path);
}

std::vector<std::byte> serialize_llmc(const GPT2& model) {
  const GPT2Config& c = model.config();
  std::array<int32_t, kLlmcHeaderInts> h{};
  h[0] = kLlmcMagic;
  h[1] = kLlmcVersionFp32;
  h[2] = static_cast<int32_t>(c.block_size);
  h[3] = static_cast<int32_t>(c.vocab_size);
  h[4] = static_cast<int32_t>(c.n_layer);
  h[5] = static_cast<int32_t>(c.n_head);
  h[6] = static_cast<int32_t>(c.n_embd);
  h[7] = static_cast<int32_t>(c.padded_vocab_size);
  std::vector<std::byte> bytes(sizeof(h) +
                               static_cast<std::size_t>(llmc_num_floats(c)) * sizeof(float));
  std::memcpy(bytes.data(), h.data(), sizeof(h));
  for (const LlmcSlot& slot : llmc_layout(c)) {
    const std::vector<float> values =
        model.parameter(slot.name).to(Device::cpu()).to_vector<float>();
    std::memcpy(bytes.data() + sizeof(h) + slot.offset * static_cast<int64_t>(sizeof(float)),
                values.data(), values.size() * sizeof(float));
  }
  return bytes;
}

void save_llmc(const GPT2& model, const std::string& path) {
  ckpt::write_file_atomic(path,
                          serialize_llmc(model));  // a crash never leaves a half-written model
}

}  // namespace tt::gpt2
