// Writes the seed corpora of the fuzz targets, deterministically, with the library's own
// writers: a few small valid inputs per parser plus malformed variants of them.
//
//   cmake --build --preset asan --target write_fuzz_seeds
//   build-asan/bin/write_fuzz_seeds fuzz/corpus      # rewrites fuzz/corpus/<parser>/
//
// fuzz/corpus/<parser>/ is the seed directory of fuzz_<parser> (tools/run_fuzzers). The npy
// seeds are not written here (they predate this program). Run it after a format change and
// commit the result; the same build writes the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tt/checkpoint.h"
#include "tt/gpt2.h"
#include "tt/shard_set.h"
#include "tt/shards.h"
#include "tt/tensor.h"
#include "tt/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using tt::nn::StateDict;

/// Writes seeds into one corpus directory, which it empties first.
class Corpus {
 public:
  Corpus(const fs::path& root, const std::string& name) : dir_(root / name) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void write(const std::string& name, std::string_view bytes) const {
    std::ofstream f(dir_ / name, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot write " + (dir_ / name).string());
  }
  void write(const std::string& name, const std::vector<std::byte>& bytes) const {
    write(name, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string read(const std::string& name) const {
    std::ifstream f(dir_ / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }

 private:
  fs::path dir_;
};

std::string as_string(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void put_le32(std::string& data, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) data[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// fuzz_checkpoint: a flag byte (3: fix the file size and the checksum), then a checkpoint.
void checkpoint_seeds(const fs::path& root) {
  const Corpus c(root, "checkpoint");
  const tt::fuzz::CheckpointTarget target;
  const std::string valid =
      as_string(tt::ckpt::serialize(tt::ckpt::checkpoint_state(target.model, &target.optimizer)));
  c.write("target.ckpt", "\x03" + valid);
  c.write("target_no_fixups.ckpt", std::string(1, '\0') + valid);
  c.write("target_truncated.ckpt", "\x03" + valid.substr(0, 100));
  tt::Generator gen(11);
  const tt::nn::Linear other(2, 3, false, gen);  // other shapes, one key less
  c.write("other_model.ckpt",
          "\x03" + as_string(tt::ckpt::serialize(tt::nn::prefixed("model", other.state_dict()))));
  const StateDict dtypes = {
      {"f32", tt::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
      {"f64", tt::scalar_tensor(2.5, {.dtype = tt::DType::kFloat64})},
      {"i64", tt::from_vector<int64_t>({7, -8, 9}, {3, 1, 1})},
      {"empty", tt::from_vector<float>({}, {0, 4})},
  };
  c.write("dtypes.ckpt", "\x03" + as_string(tt::ckpt::serialize(dtypes)));
  c.write("no_tensors.ckpt", "\x03" + as_string(tt::ckpt::serialize({})));
}

// fuzz_shard: shard files (the fuzzer's vocabulary has 1000 tokens).
void shard_seeds(const fs::path& root) {
  const Corpus c(root, "shard");
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back((i * 37) % 1000);
  tt::write_shard(c.path("u16.bin"), tokens, 1000);
  tt::write_shard(c.path("u32.bin"), std::vector<int32_t>(tokens.begin(), tokens.begin() + 9),
                  100000);
  tt::write_shard(c.path("empty.bin"), {}, 1000);
  tt::write_shard(c.path("token_out_of_vocab.bin"), std::vector<int32_t>{5, 999, 1000, 7}, 65536);
  std::string bad = c.read("u16.bin");
  put_le32(bad, 8, 41);  // one token more than the file holds
  c.write("count_too_large.bin", bad);
  c.write("truncated_header.bin", c.read("u16.bin").substr(0, 1000));
}

// fuzz_shard_manifest: manifest.json texts.
void shard_manifest_seeds(const fs::path& root) {
  const Corpus c(root, "shard_manifest");
  tt::ShardManifest m;
  m.tokenizer_fnv1a64 = "0123456789abcdef";
  m.vocab_size = 4096;
  m.shards = {{"fortunes_train_000000.bin", "train", 154123},
              {"fortunes_train_000001.bin", "train", 0},
              {"fortunes_val_000000.bin", "val", 14724}};
  const std::string valid = m.to_json();
  c.write("valid.json", valid);
  m.shards.clear();
  c.write("no_shards.json", m.to_json());
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = valid;
    return t.replace(t.find(from), from.size(), to);
  };
  c.write("version_2.json", edited("\"version\": 1", "\"version\": 2"));
  c.write("path_in_name.json", edited("fortunes_val_000000.bin", "../val.bin"));
  c.write("float_tokens.json", edited("154123", "1.5e5"));
  c.write("huge_tokens.json", edited("154123", "18446744073709551615"));
  c.write("duplicate.json", edited("fortunes_train_000001.bin", "fortunes_train_000000.bin"));
  c.write("truncated.json", valid.substr(0, valid.size() / 2));
}

// fuzz_tokenizer_file: saved tokenizers.
void tokenizer_file_seeds(const fs::path& root) {
  const Corpus c(root, "tokenizer_file");
  const tt::Tokenizer trained = tt::fuzz::small_trained_tokenizer();
  c.write("trained.ttbpe", trained.serialize());
  c.write("gpt2_byte_order.ttbpe", tt::fuzz::with_gpt2_byte_ids(trained).serialize());
  std::array<int32_t, 256> identity{};
  for (int b = 0; b < 256; ++b) identity[b] = b;
  c.write("custom_pattern.ttbpe", tt::Tokenizer(identity, {{'a', 'b', 256}, {256, 256, 257}},
                                                {{"<pad>", 258}}, R"(\S+|\s+)")
                                      .serialize());
  // Each merge doubles the last token (2^12 bytes at the end): mutations can lengthen the chain
  // towards Tokenizer::kMaxVocabBytes.
  std::vector<tt::BpeMerge> chain = {{'a', 'a', 256}};
  for (int32_t k = 1; k < 12; ++k) chain.push_back({255 + k, 255 + k, 256 + k});
  c.write("merge_chain.ttbpe", tt::Tokenizer(identity, chain, {}).serialize());
  const std::string bytes_only = tt::Tokenizer(identity, {}, {}).serialize();
  c.write("bytes_only.ttbpe", bytes_only);
  std::string bad = bytes_only;
  put_le32(bad, 8, 2);  // version 2
  c.write("bad_version.ttbpe", bad);
  c.write("trailing_byte.ttbpe", bytes_only + "!");
}

// fuzz_gpt2_vocab: encoder.json, a NUL byte, vocab.bpe.
void gpt2_vocab_seeds(const fs::path& root) {
  const Corpus c(root, "gpt2_vocab");
  auto joined = [](const tt::fuzz::Gpt2Files& f) { return f.encoder_json + '\0' + f.vocab_bpe; };
  const tt::Tokenizer twin = tt::fuzz::with_gpt2_byte_ids(tt::fuzz::small_trained_tokenizer());
  c.write("trained_gpt2_order.txt", joined(tt::fuzz::gpt2_files(twin)));
  const tt::fuzz::Gpt2Files bytes_only =
      tt::fuzz::gpt2_files(tt::Tokenizer(tt::fuzz::gpt2_byte_ids(), {}, {{"<|endoftext|>", 256}}));
  c.write("bytes_only.txt", joined(bytes_only));
  c.write("bad_merge_line.txt", bytes_only.encoder_json + '\0' + "#version: 0.2\na b c\n");
  c.write("merge_not_in_encoder.txt", bytes_only.encoder_json + '\0' + "#version: 0.2\na b\n");
  c.write("no_vocab_bpe.txt", bytes_only.encoder_json);
  std::string alias = bytes_only.encoder_json;  // "<|endoftext|>" gets the id of "!" (0)
  alias.replace(alias.find("256"), 3, "0");
  c.write("id_given_twice.txt", alias + '\0' + bytes_only.vocab_bpe);
  c.write("not_an_object.txt", std::string("[1, 2, 3]") + '\0');
  c.write("id_not_integer.txt", std::string(R"({"a": 1.5})") + '\0');
}

// fuzz_bpe_roundtrip: texts.
void bpe_roundtrip_seeds(const fs::path& root) {
  const Corpus c(root, "bpe_roundtrip");
  c.write("training_text.txt", tt::fuzz::kTrainingText);
  c.write("specials.txt", "a<|endoftext|>b<|endoftext|><|endoftext|> <|endof");
  c.write("contractions.txt", "it's we'll I'd they're you've 'S 'LL ''s");
  c.write("whitespace.txt", "  \t\n\r\n   x \n\n\n  \xc2\xa0\xe3\x80\x80 end  ");
  c.write("invalid_utf8.txt",
          "ok \xff\xfe bad \xc3 \xe2\x82 \xf0\x9f\x99 \xed\xa0\x80 \xc0\xaf ok");
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  c.write("all_bytes.bin", all_bytes);
  tt::Generator gen(5);
  std::string noise(300, '\0');
  for (char& ch : noise) ch = static_cast<char>(gen.next_u64() & 0xFF);
  c.write("random.bin", noise);
}

/// The llm.c model file of a GPT-2 with L layers, NH heads, C channels, V (padded: Vp) tokens
/// and maxT positions, its weights drawn from `seed`.
std::string llmc_file(int64_t L, int64_t NH, int64_t C, int64_t V, int64_t Vp, int64_t maxT,
                      uint64_t seed) {
  tt::gpt2::GPT2Config config;
  config.n_layer = L;
  config.n_head = NH;
  config.n_embd = C;
  config.vocab_size = V;
  config.padded_vocab_size = Vp;
  config.block_size = maxT;
  return as_string(tt::gpt2::serialize_llmc(tt::gpt2::GPT2(config, seed)));
}

// fuzz_llmc_import: llm.c model files of tiny models.
void llmc_import_seeds(const fs::path& root) {
  const Corpus c(root, "llmc_import");
  const std::string valid = llmc_file(1, 2, 4, 5, 8, 4, 3);
  c.write("tiny.bin", valid);
  c.write("two_layers.bin", llmc_file(2, 1, 2, 3, 3, 2, 4));
  std::string bad = valid;
  put_le32(bad, 4, 5);  // version 5 (bfloat16)
  c.write("bf16_version.bin", bad);
  c.write("truncated.bin", valid.substr(0, valid.size() - 4));
  c.write("header_only.bin", valid.substr(0, 1024));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: write_fuzz_seeds CORPUS_DIR   (e.g. fuzz/corpus)\n";
    return 2;
  }
  const fs::path root = argv[1];
  checkpoint_seeds(root);
  shard_seeds(root);
  shard_manifest_seeds(root);
  tokenizer_file_seeds(root);
  gpt2_vocab_seeds(root);
  bpe_roundtrip_seeds(root);
  llmc_import_seeds(root);
  std::cout << "wrote the seed corpora under " << root.string() << "\n";
  return 0;
}
