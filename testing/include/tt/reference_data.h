/// @file reference_data.h
/// @brief Test helpers for the PyTorch reference data (reference_data/chNN, written by the
/// chapters' generate scripts): a SHA-256 to check the files against their MANIFEST, the
/// manifest reader, and a case runner that compares computed tensors with the files using the
/// tolerance the manifest states for each. Chapter 04's manifest is reference_data/MANIFEST,
/// later chapters keep theirs next to their data (reference_data/ch09/MANIFEST).
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tt/autograd.h"
#include "tt/npy_tensor.h"
#include "tt/testing.h"

namespace tt::reference {

/// SHA-256 (FIPS 180-4) of `data` as 64 lowercase hex digits.
inline std::string sha256_hex(const std::string& data) {
  static constexpr std::array<uint32_t, 64> k = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  // Padding: 0x80, zeros up to 56 mod 64, then the bit length as a big-endian 64-bit number.
  std::string msg = data;
  const uint64_t bits = static_cast<uint64_t>(data.size()) * 8;
  msg.push_back(static_cast<char>(0x80));
  while (msg.size() % 64 != 56) msg.push_back('\0');
  for (int i = 7; i >= 0; --i) msg.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  for (std::size_t block = 0; block < msg.size(); block += 64) {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t) {
      w[t] = 0;
      for (int b = 0; b < 4; ++b) {
        w[t] = (w[t] << 8) | static_cast<unsigned char>(msg[block + 4 * t + b]);
      }
    }
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[t] + w[t];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h) {
    for (int i = 28; i >= 0; i -= 4) out.push_back(hex[(v >> i) & 0xf]);
  }
  return out;
}

/// The whole content of a file (throws tt::Error when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TT_CHECK(in, "cannot open ", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// One line of reference_data/MANIFEST.
struct ManifestEntry {
  std::string file;    ///< path relative to reference_data/, e.g. "ch04/softmax_rows_x.npy"
  std::string sha256;  ///< hex digest of the file
  std::string dtype;   ///< "float32" or "int64"
  std::string torch;   ///< PyTorch version that wrote it
  std::string seed;    ///< torch.manual_seed of its case
  double atol = 0;     ///< absolute tolerance of comparisons with this file
  double rtol = 0;     ///< relative tolerance
};

/// Parses a manifest ("<file> key=value ..." per line, '#' comments; `path` relative to
/// reference_data/), by file. Each manifest is read once.
inline const std::map<std::string, ManifestEntry>& manifest(const char* path = "MANIFEST") {
  static std::map<std::string, std::map<std::string, ManifestEntry>> cache;
  if (const auto it = cache.find(path); it != cache.end()) return it->second;
  auto& entries = cache[path];
  {
    std::map<std::string, ManifestEntry>& m = entries;
    std::istringstream lines(read_file(testing::reference_path(path)));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      ManifestEntry e;
      fields >> e.file;
      std::string kv;
      while (fields >> kv) {
        const auto eq = kv.find('=');
        TT_CHECK(eq != std::string::npos, "MANIFEST: bad field '", kv, "' in: ", line);
        const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
        if (key == "sha256") e.sha256 = value;
        if (key == "dtype") e.dtype = value;
        if (key == "torch") e.torch = value;
        if (key == "seed") e.seed = value;
        if (key == "atol") e.atol = std::stod(value);
        if (key == "rtol") e.rtol = std::stod(value);
      }
      m[e.file] = e;
    }
  }
  return entries;
}

/// One reference case "<op>_<case>": loads its files and compares results with them.
class Case {
 public:
  /// The case with file prefix `name` (e.g. "softmax_rows") in reference_data/`dir`, whose
  /// tolerances are in the manifest `manifest_path`.
  explicit Case(std::string name, std::string dir = "ch04", std::string manifest_path = "MANIFEST")
      : name_(std::move(name)), dir_(std::move(dir)), manifest_path_(std::move(manifest_path)) {}

  /// The file of `tensor` (e.g. "x", "dout") as a tensor; float inputs can be marked as leaves.
  Tensor load(const std::string& tensor, bool requires_grad = false) {
    used_.insert(tensor);
    Tensor t = load_npy(testing::reference_path(file(tensor)));
    if (requires_grad) t.set_requires_grad(true);
    return t;
  }

  /// Expects `actual` to match the file of `tensor` within the manifest's tolerance.
  void expect(const std::string& tensor, const Tensor& actual) {
    used_.insert(tensor);
    const auto& m = manifest(manifest_path_.c_str());
    const auto it = m.find(file(tensor));
    ASSERT_NE(it, m.end()) << file(tensor) << " is not in reference_data/" << manifest_path_;
    ASSERT_TRUE(actual.defined()) << name_ << ": " << tensor << " was not computed";
    const Tensor expected = load_npy(testing::reference_path(file(tensor)));
    EXPECT_TENSOR_NEAR(actual, expected, it->second.atol, it->second.rtol)
        << "reference " << file(tensor);
  }

  /// Expects every manifest file of this case to have been loaded or compared.
  void expect_all_files_used() const {
    const std::string prefix = dir_ + "/" + name_ + "_";
    for (const auto& [f, e] : manifest(manifest_path_.c_str())) {
      if (f.rfind(prefix, 0) != 0) continue;
      const std::string tensor = f.substr(prefix.size(), f.size() - prefix.size() - 4);
      EXPECT_TRUE(used_.count(tensor)) << f << " is neither an input nor compared";
    }
  }

 private:
  std::string file(const std::string& tensor) const {
    return dir_ + "/" + name_ + "_" + tensor + ".npy";
  }
  std::string name_;
  std::string dir_;
  std::string manifest_path_;
  std::set<std::string> used_;
};

/// A named reference case and the code that runs it.
struct CaseRunner {
  std::string name;                ///< file prefix, "<op>_<case>"
  std::function<void(Case&)> run;  ///< loads inputs, computes, calls Case::expect
};

/// out = f(input, other) with `input` a leaf and `other` a plain input (e.g. indices); backward
/// with dout; compares out and grad_<input>.
inline CaseRunner with_grad(std::string name, std::string input, std::string other,
                            std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return {name, [=](Case& c) {
            Tensor x = c.load(input, true);
            Tensor out = f(x, other.empty() ? Tensor() : c.load(other));
            autograd::backward(out, c.load("dout"));
            c.expect("out", out);
            c.expect("grad_" + input, x.grad());
          }};
}

/// with_grad for an op of x alone.
inline CaseRunner unary(std::string name, std::function<Tensor(const Tensor&)> f) {
  return with_grad(std::move(name), "x", "", [f](const Tensor& x, const Tensor&) { return f(x); });
}

/// gtest prints parameters with this (test names like .../softmax_rows).
inline std::string case_name(const ::testing::TestParamInfo<CaseRunner>& info) {
  return info.param.name;
}

}  // namespace tt::reference
