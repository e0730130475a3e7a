// Tests of state-dict loading (all-or-nothing, ch05.6), the checkpoint file format (every
// rejection), the atomic write, and resuming training bit for bit from a checkpoint.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tt/functional.h"
#include "tt/nn.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"

namespace tt {
namespace {

namespace fs = std::filesystem;
using nn::StateDict;

// ----- apply_state_dict (in memory) --------------------------------------------------------

/// Targets "a" [2] and "b" [1, 2] (float32 zeros), built with given code only.
StateDict zero_targets() {
  return {{"a", zeros({2})}, {"b", zeros({1, 2})}};
}

void expect_untouched(const StateDict& targets) {
  for (const auto& [name, t] : targets) {
    EXPECT_EQ(t.to_vector<float>(), std::vector<float>(t.numel(), 0.f)) << name << " was modified";
  }
}

TEST(Ch05_6_LoadStateDict, CopiesEveryValueInAnyOrder) {
  StateDict targets = zero_targets();
  nn::apply_state_dict(targets, {{"b", from_vector<float>({3, 4}, {1, 2})}, {"a", tensor({1, 2})}},
                       "mem");
  EXPECT_EQ(targets[0].second.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(targets[1].second.to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(Ch05_6_LoadStateDict, EachProblemIsRejectedBeforeAnyCopy) {
  // "a" is valid and comes first: it must not be copied when "b" is wrong.
  struct Bad {
    StateDict state;
    std::string needle;
  };
  const Tensor a = tensor({1, 2});
  const std::vector<Bad> cases = {
      {{{"a", a}}, "missing key 'b'"},
      {{{"a", a}, {"b", zeros({1, 2})}, {"c", zeros({1})}}, "unexpected key 'c'"},
      {{{"a", a}, {"b", zeros({2, 1})}}, "shape mismatch for 'b': [2, 1] in ckpt.bin, [1, 2]"},
      {{{"a", a}, {"b", zeros({1, 2}, {.dtype = DType::kFloat64})}},
       "dtype mismatch for 'b': float64 in ckpt.bin, float32"},
      {{{"a", a}, {"b", zeros({1, 2})}, {"a", a}}, "duplicate key 'a'"},
      {{{"a", a}, {"b", Tensor()}}, "'b' holds an undefined tensor"},
  };
  for (const Bad& bad : cases) {
    StateDict targets = zero_targets();
    EXPECT_TT_ERROR(nn::apply_state_dict(targets, bad.state, "ckpt.bin"),
                    "load_state_dict(ckpt.bin)", "nothing was loaded", bad.needle);
    expect_untouched(targets);
  }
}

TEST(Ch05_6_LoadStateDict, ReportsAllProblemsAtOnce) {
  StateDict targets = zero_targets();
  EXPECT_TT_ERROR(nn::apply_state_dict(targets, {{"b", zeros({3})}, {"x", zeros({1})}}, "f"),
                  "3 problem(s)", "missing key 'a'", "shape mismatch for 'b'",
                  "unexpected key 'x'");
}

TEST(Ch05_6_LoadStateDict, NonStrictIgnoresMissingAndExtraKeys) {
  StateDict targets = zero_targets();
  nn::apply_state_dict(targets, {{"a", tensor({5, 6})}, {"zzz", zeros({7})}}, "f",
                       /*strict=*/false);
  EXPECT_EQ(targets[0].second.to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(targets[1].second.to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_TT_ERROR(nn::apply_state_dict(targets, {{"a", zeros({3})}}, "f", false),
                  "shape mismatch for 'a'");
}

// ----- the file format ---------------------------------------------------------------------

/// A fresh directory per test, removed afterwards.
class Ch05_Checkpoint : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  static void write_bytes(const std::string& p, const std::vector<std::byte>& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  /// Recomputes the trailer so that a deliberately edited table passes the checksum.
  static void fix_checksum(std::vector<std::byte>& bytes) {
    const uint64_t h = ckpt::fnv1a64(bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &h, 8);
  }
  /// A file holding one float32 tensor "w" [2, 3].
  std::string one_tensor_file() {
    const std::string p = path("one.ckpt");
    ckpt::save(p, {{"w", from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})}});
    return p;
  }
  testing::TempDir dir_;  // one per test and process
};

TEST_F(Ch05_Checkpoint, RoundTripEveryDtypeAndLayout) {
  const Tensor t = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // strided
  const StateDict state = {{"f32", t},
                           {"f64", from_vector<double>({1e-300, -2.5}, {2})},
                           {"i64", tensor_i64({-1, 1LL << 40})},
                           {"scalar", scalar_tensor(7, {.dtype = DType::kInt64})},
                           {"empty", zeros({0, 3})},
                           {"bf16", from_vector<bfloat16>({{0x3F80}, {0xC020}, {0x0001}}, {3})}};
  const std::string p = path("all.ckpt");
  ckpt::save(p, state);
  const StateDict back = ckpt::load(p);
  ASSERT_EQ(back.size(), state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(back[i].first, state[i].first);
    EXPECT_EQ(back[i].second.shape(), state[i].second.shape());
    EXPECT_EQ(back[i].second.dtype(), state[i].second.dtype());
  }
  EXPECT_EQ(back[0].second.to_vector<float>(), t.to_vector<float>());
  EXPECT_EQ(back[1].second.to_vector<double>(), (std::vector<double>{1e-300, -2.5}));
  EXPECT_EQ(back[2].second.to_vector<int64_t>(), (std::vector<int64_t>{-1, 1LL << 40}));
  EXPECT_EQ(back[3].second.item(), 7);
  const std::vector<bfloat16> bf16 = back[5].second.to_vector<bfloat16>();  // bits unchanged
  ASSERT_EQ(bf16.size(), 3u);
  EXPECT_EQ(bf16[0].bits, 0x3F80);
  EXPECT_EQ(bf16[1].bits, 0xC020);
  EXPECT_EQ(bf16[2].bits, 0x0001);
  // The layout of the header (see checkpoint.h).
  const auto bytes = ckpt::read_file(p);
  EXPECT_EQ(std::memcmp(bytes.data(), "TTCKPT\r\n", 8), 0);
  uint64_t data_offset = 0, file_size = 0;
  std::memcpy(&data_offset, bytes.data() + 16, 8);
  std::memcpy(&file_size, bytes.data() + 24, 8);
  EXPECT_EQ(data_offset % 64, 0u);
  EXPECT_EQ(file_size, bytes.size());
}

TEST_F(Ch05_Checkpoint, RejectsBadMagicVersionChecksumTruncation) {
  const std::string p = one_tensor_file();
  const auto good = ckpt::read_file(p);
  auto edited = [&](auto edit) {
    auto bytes = good;
    edit(bytes);
    write_bytes(p, bytes);
    return p;
  };
  EXPECT_TT_ERROR(ckpt::load(edited([](auto& b) { b[0] = std::byte{'X'}; })), p, "bad magic");
  EXPECT_TT_ERROR(ckpt::load(edited([](auto& b) { b[8] = std::byte{2}; })), p,
                  "unsupported version 2");
  EXPECT_TT_ERROR(ckpt::load(edited([](auto& b) { b[b.size() - 20] ^= std::byte{1}; })), p,
                  "checksum mismatch");
  EXPECT_TT_ERROR(ckpt::load(edited([](auto& b) { b.resize(b.size() - 10); })), p, "truncated",
                  "the header says");
  EXPECT_TT_ERROR(ckpt::load(edited([](auto& b) { b.resize(20); })), p, "truncated (20 bytes");
  EXPECT_TT_ERROR(ckpt::load(edited([](auto& b) { b.push_back(std::byte{0}); })), p,
                  "trailing bytes");
  EXPECT_TT_ERROR(ckpt::load(path("missing.ckpt")), "cannot open", "missing.ckpt");
}

TEST_F(Ch05_Checkpoint, DirectoryGivenAsCheckpointSaysSo) {
  // A directory where the file is expected: "is a directory", not std::bad_alloc.
  fs::create_directories(path("run"));
  Generator gen(1);
  nn::Linear model(3, 2, true, gen);
  EXPECT_TT_ERROR(ckpt::load(path("run")), "checkpoint '" + path("run") + "' is a directory");
  EXPECT_TT_ERROR(ckpt::load_checkpoint(path("run"), model), "checkpoint '", "is a directory");
}

TEST_F(Ch05_Checkpoint, RejectsInconsistentTablesEvenWithAValidChecksum) {
  const std::string p = one_tensor_file();
  const auto good = ckpt::read_file(p);
  // Table entry of "w" at byte 32: len 4, 'w' 1, dtype 1, ndim 1, shape 2x8, offset 8, nbytes 8.
  constexpr std::size_t kDtype = 32 + 4 + 1, kShape = kDtype + 2, kOffset = kShape + 16;
  auto edited = [&](std::size_t at, uint64_t value) {
    auto bytes = good;
    std::memcpy(bytes.data() + at, &value, 8);
    fix_checksum(bytes);
    write_bytes(p, bytes);
    return p;
  };
  EXPECT_TT_ERROR(ckpt::load(edited(kOffset + 8, 28)), "key 'w' has 28 bytes for shape [2, 3]");
  EXPECT_TT_ERROR(ckpt::load(edited(kOffset, 1 << 20)), "key 'w' lies outside the file");
  EXPECT_TT_ERROR(ckpt::load(edited(kShape, static_cast<uint64_t>(-1))), "'w' has an invalid size");
  // Found by fuzz_checkpoint: a data offset inside the header ended the table before its start,
  // and the name length was then checked against a wrapped-around bound (a read past the end).
  EXPECT_TT_ERROR(ckpt::load(edited(16, 0)), p, "bad data offset 0");
  // Found by fuzz_checkpoint: after a size 0 the other sizes were not bounded, and creating an
  // empty tensor [0, 2^40, 2^40] overflowed its strides. Here: "w" [0, 2^50] with 0 bytes.
  {
    auto bytes = good;
    const uint64_t zero = 0, big = uint64_t{1} << 50;
    std::memcpy(bytes.data() + kShape, &zero, 8);
    std::memcpy(bytes.data() + kShape + 8, &big, 8);
    std::memcpy(bytes.data() + kOffset + 8, &zero, 8);  // nbytes
    fix_checksum(bytes);
    write_bytes(p, bytes);
    EXPECT_TT_ERROR(ckpt::load(p), "'w' has an invalid size 1125899906842624");
  }
  auto bytes = good;
  bytes[kDtype] = std::byte{9};
  fix_checksum(bytes);
  write_bytes(p, bytes);
  EXPECT_TT_ERROR(ckpt::load(p), "key 'w' has unknown dtype code 9");
}

TEST_F(Ch05_Checkpoint, SaveIsAtomicAndLeavesNoTemporaryFiles) {
  const std::string p = one_tensor_file();
  // A failing save (invalid state) must leave the previous file intact.
  EXPECT_TT_ERROR(ckpt::save(p, {{"ok", zeros({1})}, {"bad", Tensor()}}), "'bad'", "undefined");
  EXPECT_EQ(ckpt::load(p)[0].second.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Overwriting replaces the content.
  ckpt::save(p, {{"v", tensor({9})}});
  EXPECT_EQ(ckpt::load(p)[0].first, "v");
  // Only the checkpoint is left in the directory.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "one.ckpt");
  }
  EXPECT_EQ(files, 1);
  EXPECT_TT_ERROR(ckpt::save(path("no/such/dir/x.ckpt"), {{"v", tensor({1})}}),
                  "no/such/dir/x.ckpt");
  EXPECT_TT_ERROR(ckpt::save(p, {{"v", tensor({1})}, {"v", tensor({2})}}), "duplicate key 'v'");
}

TEST_F(Ch05_Checkpoint, CrashBetweenWriteAndRenameKeepsThePreviousFile) {
  // Simulate a crash at the worst moment of an overwrite: the new content is complete and
  // fsync'ed in the temporary file, the rename has not happened. A forked child process dies
  // there (the hook calls _Exit); the parent then inspects what is on disk.
  const std::string p = one_tensor_file();
  EXPECT_EXIT(
      {
        ckpt::set_before_rename_hook([](const std::string&) { std::_Exit(42); });
        ckpt::save(p, {{"w", from_vector<float>({9, 9, 9, 9, 9, 9}, {2, 3})}});
      },
      ::testing::ExitedWithCode(42), "");
  // The previous checkpoint is intact and loads.
  EXPECT_EQ(ckpt::load(p)[0].second.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // The crash left exactly one stray temporary file next to it, never read by load().
  std::vector<fs::path> stray;
  for (const auto& entry : fs::directory_iterator(dir_.path())) {
    if (entry.path() != fs::path(p)) stray.push_back(entry.path());
  }
  ASSERT_EQ(stray.size(), 1u);
  EXPECT_TRUE(stray[0].filename().string().starts_with("one.ckpt.tmp.")) << stray[0];
  EXPECT_EQ(ckpt::load(stray[0].string())[0].second.to_vector<float>()[0], 9.0f);
  // The next save (in this process, without the hook) replaces the file normally.
  ckpt::save(p, {{"w", from_vector<float>({7, 7, 7, 7, 7, 7}, {2, 3})}});
  EXPECT_EQ(ckpt::load(p)[0].second.to_vector<float>()[0], 7.0f);
}

TEST_F(Ch05_Checkpoint, SaveCheckpointRefusesNonFiniteValues) {
  Generator gen(3);
  nn::Linear model(3, 2, true, gen);
  optim::AdamW opt(model.parameters(), {});
  const std::string p = path("good.ckpt");
  ckpt::save_checkpoint(p, model, &opt);
  const auto good_bytes = ckpt::read_file(p);
  const auto good_weight = model.weight.to_vector<float>();
  // A diverged model (a NaN weight) or optimizer state (an Inf moment) is never written.
  model.bias.fill_(NAN);
  EXPECT_TT_ERROR(ckpt::save_checkpoint(p, model, &opt), "save_checkpoint", p, "'model.bias'",
                  "[2]", "nan", "left unchanged");
  model.bias.fill_(0);
  opt.state_dict().back().second.fill_(INFINITY);
  EXPECT_TT_ERROR(ckpt::save_checkpoint(p, model, &opt), "save_checkpoint",
                  "'optimizer.state.1.exp_avg_sq'", "inf");
  EXPECT_TRUE(ckpt::read_file(p) == good_bytes);  // the good checkpoint is untouched
  ckpt::load_checkpoint(p, model, &opt);
  EXPECT_EQ(model.weight.to_vector<float>(), good_weight);
  // bfloat16 state is checked too (its values read exactly, without chapter 11's cast).
  nn::Module half("Half");
  half.register_buffer("b", from_vector<bfloat16>({{0x3F80}, {0xFF80}}, {2}));  // 1, -inf
  EXPECT_TT_ERROR(ckpt::save_checkpoint(path("half.ckpt"), half), "'model.b'", "bfloat16", "-inf",
                  "flat index 1");
  // The generic ckpt::save stores any values, NaN included.
  ckpt::save(path("raw.ckpt"), {{"x", from_vector<float>({NAN}, {1})}});
  EXPECT_TRUE(std::isnan(ckpt::load(path("raw.ckpt"))[0].second.item()));
}

TEST_F(Ch05_Checkpoint, MetadataIsStoredAndSkippedByTheLoader) {
  Generator gen(4);
  nn::Linear model(3, 2, true, gen);
  optim::AdamW opt(model.parameters(), {});
  const std::string p = path("meta.ckpt");
  ckpt::save_checkpoint(p, model, &opt, {{"config", tensor_i64({1, 2, 3})}});
  const nn::StateDict meta = ckpt::checkpoint_metadata(ckpt::read_file(p), p);
  ASSERT_EQ(meta.size(), 1u);
  EXPECT_EQ(meta[0].first, "config");
  EXPECT_EQ(meta[0].second.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  // The strict loader sees model and optimizer keys only.
  nn::Linear other(3, 2, true, gen);
  optim::AdamW other_opt(other.parameters(), {});
  ckpt::load_checkpoint(p, other, &other_opt);
  EXPECT_EQ(other.weight.to_vector<float>(), model.weight.to_vector<float>());
  EXPECT_TRUE(ckpt::checkpoint_metadata(ckpt::read_file(one_tensor_file())).empty());
}

TEST_F(Ch05_Checkpoint, AtomicWritesKeepTheModeOfAnOrdinaryWrite) {
  // mkstemp makes 0600 files; the written file gets 0666 minus the umask, or the mode the
  // target already had.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  const std::string p = one_tensor_file();
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  ckpt::save(p, {{"v", tensor({9})}});
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(Ch05_Checkpoint, ModelAndOptimizerMismatchesChangeNothing) {
  Generator gen(1);
  nn::Linear model(3, 2, true, gen);
  optim::AdamW opt(model.parameters(), {});
  const std::string p = path("model.ckpt");
  ckpt::save_checkpoint(p, model, &opt);

  const auto weight_before = model.weight.to_vector<float>();
  // Another shape: rejected, naming file and key; the model is unchanged.
  nn::Linear wider(3, 3, true, gen);
  const auto wider_before = wider.weight.to_vector<float>();
  EXPECT_TT_ERROR(ckpt::load_checkpoint(p, wider), p, "shape mismatch for 'model.weight'",
                  "unexpected key 'optimizer.step'");
  EXPECT_EQ(wider.weight.to_vector<float>(), wider_before);
  // No optimizer state in the file: rejected, and the model is not half-loaded.
  const std::string model_only = path("model_only.ckpt");
  ckpt::save_checkpoint(model_only, wider);
  nn::Linear other(3, 2, true, gen);
  optim::AdamW other_opt(other.parameters(), {});
  EXPECT_TT_ERROR(ckpt::load_checkpoint(model_only, other, &other_opt),
                  "missing key 'optimizer.step'");
  // The good file loads.
  ckpt::load_checkpoint(p, other, &other_opt);
  EXPECT_EQ(other.weight.to_vector<float>(), weight_before);
  EXPECT_EQ(model.weight.to_vector<float>(), weight_before);
}

// ----- resume bit for bit ------------------------------------------------------------------

/// Batch `step` of a synthetic classification task (a function of the step only).
std::pair<Tensor, Tensor> batch(int64_t step) {
  Generator gen(1000 + static_cast<uint64_t>(step));
  Tensor x = randn({6, 8}, gen);
  std::vector<int64_t> y;
  for (int i = 0; i < 6; ++i) y.push_back(static_cast<int64_t>(gen.next_u64() % 4));
  return {x, from_vector<int64_t>(y, {6})};
}

/// Runs steps [from, to) of AdamW + clipping + warmup/cosine; returns the losses.
std::vector<float> train(nn::MLP& model, optim::AdamW& opt, int64_t from, int64_t to) {
  const optim::WarmupCosineLR schedule(1e-2, 1e-3, 3, 10);
  std::vector<float> losses;
  for (int64_t step = from; step < to; ++step) {
    EXPECT_EQ(opt.step_count(), step);
    schedule.apply(opt);
    opt.zero_grad();
    auto [x, y] = batch(step);
    Tensor loss = cross_entropy(model(x), y);
    autograd::backward(loss);
    optim::clip_grad_norm_(model.parameters(), 0.5);
    opt.step();
    losses.push_back(static_cast<float>(loss.item()));
  }
  return losses;
}

TEST_F(Ch05_Checkpoint, SaveLoadContinueReproducesTheRunBitForBit) {
  Generator g1(42);
  nn::MLP straight(8, 16, 4, g1);
  optim::AdamW straight_opt(straight.parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  const std::vector<float> all = train(straight, straight_opt, 0, 10);

  Generator g2(42);
  nn::MLP first(8, 16, 4, g2);
  optim::AdamW first_opt(first.parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  const std::vector<float> head = train(first, first_opt, 0, 5);
  const std::string p = path("resume.ckpt");
  ckpt::save_checkpoint(p, first, &first_opt);

  Generator g3(7);  // another initialisation: everything must come from the file
  nn::MLP resumed(8, 16, 4, g3);
  optim::AdamW resumed_opt(resumed.parameters(), {.lr = 1.0, .weight_decay = 0.1});
  ckpt::load_checkpoint(p, resumed, &resumed_opt);
  EXPECT_EQ(resumed_opt.step_count(), 5);
  const std::vector<float> tail = train(resumed, resumed_opt, 5, 10);

  std::vector<float> joined = head;
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, all);
  const auto a = straight.state_dict(), b = resumed.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
  }
  const auto sa = straight_opt.state_dict(), sb = resumed_opt.state_dict();
  for (std::size_t i = 2; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].second.to_vector<float>(), sb[i].second.to_vector<float>()) << sa[i].first;
  }
  EXPECT_EQ(resumed_opt.lr(), straight_opt.lr());
}

}  // namespace
}  // namespace tt
