// Helpers of chapter 09's tests (chapter 12 uses them too): a tiny GPT-2 configuration, fixed
// batches, a tiny dataset and train.csv readers for runs of train_gpt2, plus chapter 08's helpers
// (temporary directories, raw file reads and writes, header patches).
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "../../08_data/tests/ch08_test_util.h"
#include "tt/dataloader.h"
#include "tt/generator.h"
#include "tt/gpt2.h"
#include "tt/shard_set.h"
#include "tt/shards.h"
#include "tt/testing.h"
#include "tt/tokenizer.h"

namespace tt::test09 {

using test08::contains;
using test08::identity_bytes;
using test08::program_path;
using test08::put_le32;
using test08::read_bytes;
using test08::run_program;
using test08::RunResult;
using test08::TempDir;
using test08::write_bytes;

/// A GPT-2 small enough for unit tests: L=2, NH=2, C=16, V=50 (Vp=64), maxT=16.
inline gpt2::GPT2Config tiny_config() {
  return {.block_size = 16,
          .vocab_size = 50,
          .padded_vocab_size = 64,
          .n_layer = 2,
          .n_head = 2,
          .n_embd = 16};
}

/// A deterministic batch of B rows of T tokens < V (targets = inputs shifted by one), from `seed`.
inline Batch fixed_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> w(static_cast<std::size_t>(B * T + 1));
  for (auto& t : w) t = static_cast<int64_t>(g.next_u64() % static_cast<uint64_t>(V));
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(w[static_cast<std::size_t>(b * T + t)]);
      y.push_back(w[static_cast<std::size_t>(b * T + t + 1)]);
    }
  }
  return {from_vector(x, {B, T}), from_vector(y, {B, T})};
}

/// A shard set train_gpt2 accepts (chapter 12 runs it too; tt/shard_set.h): a byte-level
/// tokenizer (256 bytes + <|endoftext|> = 257 ids, no merges), shards of seeded random tokens
/// and the manifest. Replaces a set already in `dir`.
inline void write_tiny_dataset(const std::string& dir) {
  ShardSetWriter set(dir, /*overwrite=*/true);
  set.set_tokenizer(Tokenizer(identity_bytes(), {}, {{"<|endoftext|>", 256}}));
  Generator gen(5);
  auto tokens = [&](std::size_t n) {
    std::vector<int32_t> t(n);
    for (int32_t& v : t) v = static_cast<int32_t>(gen.next_u64() % 257);
    return t;
  };
  set.write_shard("tiny_train_000000.bin", "train", tokens(4000));
  set.write_shard("tiny_val_000000.bin", "val", tokens(400));
  set.commit();
}

/// The rows of a train.csv (header first), split at commas (the log has no quoted cells).
inline std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(read_bytes(path));
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream cell_stream(line);
    for (std::string cell; std::getline(cell_stream, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

/// Whether the train.csv at `got` logs what the one at `want` does: as many rows, and in each the
/// `columns` (default: the loss, gradient norm and validation loss, 1, 3 and 6; 6 digits in the
/// log) empty in both or within `rel` (relative to want's) + 1e-7. The message names the first
/// mismatch.
inline ::testing::AssertionResult logs_match(const std::string& got, const std::string& want,
                                             double rel,
                                             std::initializer_list<std::size_t> columns = {1, 3,
                                                                                           6}) {
  const auto g = read_csv(got), w = read_csv(want);
  if (g.size() != w.size()) {
    return ::testing::AssertionFailure()
           << got << " has " << g.size() << " rows, " << want << " has " << w.size();
  }
  for (std::size_t i = 1; i < g.size(); ++i) {
    for (std::size_t c : columns) {
      const std::string &a = g[i].at(c), &b = w[i].at(c);
      const bool near =
          a.empty() == b.empty() && (a.empty() || std::fabs(std::stod(a) - std::stod(b)) <=
                                                      rel * std::fabs(std::stod(b)) + 1e-7);
      if (!near) {
        return ::testing::AssertionFailure()
               << got << " row " << i << " column " << c << ": '" << a << "' against '" << b
               << "' (relative tolerance " << rel << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

/// The columns of train.csv that a resumed run reproduces exactly: step, loss, lr, grad_norm and
/// val_loss (ms and tok_per_s are wall-clock measurements).
inline std::vector<std::vector<std::string>> reproducible_columns(const std::string& path) {
  std::vector<std::vector<std::string>> rows = read_csv(path);
  for (auto& r : rows) {
    r.resize(8);
    r = {r[0], r[1], r[2], r[3], r[6]};
  }
  return rows;
}

/// The folder of PyTorch's side of the GPT-2 124M checks (TT_GPT2_124M_REF, with a trailing
/// '/'), or "" when the variable is unset (the tests then skip with kGpt2RefHint).
inline std::string gpt2_124m_ref_dir() {
  const char* dir = std::getenv("TT_GPT2_124M_REF");
  return dir == nullptr || *dir == '\0' ? std::string() : std::string(dir) + "/";
}

/// The parameters whose gradients the GPT-2 124M checks compare with PyTorch's (the files
/// grad_<name>.npy that check_gpt2_124m.py writes): both embeddings, one matrix of each kind from
/// the first, middle and last block, a LayerNorm weight and the final LayerNorm.
inline const std::vector<std::string>& gpt2_124m_checked_grads() {
  static const std::vector<std::string> names = {"wte.weight",
                                                 "wpe.weight",
                                                 "h.0.attn.c_attn.weight",
                                                 "h.5.mlp.c_fc.weight",
                                                 "h.11.mlp.c_proj.weight",
                                                 "h.11.ln_2.weight",
                                                 "ln_f.weight",
                                                 "ln_f.bias"};
  return names;
}

/// Why a GPT-2 124M check skipped.
inline constexpr const char* kGpt2RefHint =
    "TT_GPT2_124M_REF is not set: run reference_data/ch09/check_gpt2_124m.py --out DIR on the "
    "GPU machine first (tools/device_check.sh 09 10 does)";

/// Largest |a - b| over all elements (both moved to the CPU, compared in float64).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).to(DType::kFloat64).contiguous();
  const Tensor y = b.to(Device::cpu()).to(DType::kFloat64).contiguous();
  const double* px = x.data<double>();
  const double* py = y.data<double>();
  double m = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::abs(px[i] - py[i]));
  return m;
}

}  // namespace tt::test09
