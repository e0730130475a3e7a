// tt_prepare_data, run as a program (next to this test binary): a second run into the same
// --out, strict numbers, named symbolic links, and a directory where a file is expected.
#include <filesystem>
#include <string>

#include "ch08_test_util.h"
#include "tt/shard_set.h"
#include "tt/shards.h"

namespace tt {
namespace {

namespace fs = std::filesystem;
using test08::contains;
using test08::program_path;
using test08::run_program;
using test08::RunResult;
using test08::TempDir;
using test08::write_bytes;

/// The app, a temporary directory and a small corpus "corpus.txt" (paragraphs) in it.
struct Prep {
  Prep() : app(program_path("tt_prepare_data")) {
    std::string text;
    for (int i = 0; i < 60; ++i) {
      text +=
          "Paragraph " + std::to_string(i) + " says the quick brown fox jumps over the dog.\n\n";
    }
    write_bytes(dir.file("corpus.txt"), text);
  }
  /// Runs the app with `args` after "--input corpus.txt --format paragraph".
  RunResult run(const std::string& args, const std::string& log = "prep.log") const {
    return run_program(app, "--input '" + dir.file("corpus.txt") + "' --format paragraph " + args,
                       dir.file(log));
  }
  std::string app;
  TempDir dir;
};

int64_t total_tokens(const ShardManifest& m) {
  int64_t n = 0;
  for (const ShardEntry& e : m.shards) n += e.num_tokens;
  return n;
}

TEST(Ch08_PrepareData, SecondRunIntoTheSameOutIsRefusedAndOverwriteReplacesTheWholeSet) {
  const Prep p;
  ASSERT_FALSE(p.app.empty()) << "tt_prepare_data is not next to the test binary";
  const std::string out = p.dir.file("data");
  const std::string tok = out + "/tokenizer.ttbpe";
  const RunResult first = p.run("--out '" + out + "' --vocab-size 300 --name a");
  ASSERT_EQ(first.status, 0) << first.output;
  const ShardManifest a = verify_shard_set(out, tok);
  ASSERT_EQ(a.vocab_size, 300);

  // Another tokenizer into the same --out: refused before any work; the first set is intact.
  const RunResult again = p.run("--out '" + out + "' --vocab-size 280 --name b", "again.log");
  EXPECT_EQ(again.status, 1);
  EXPECT_TRUE(contains(again.output, "already holds files")) << again.output;
  EXPECT_TRUE(contains(again.output, "--overwrite"));
  EXPECT_EQ(verify_shard_set(out, tok), a);

  // --overwrite: the whole set is replaced, so the shards match the new tokenizer (before, the
  // old shards stayed and train_gpt2 trained on both).
  const RunResult over =
      p.run("--out '" + out + "' --vocab-size 280 --name b --overwrite", "over.log");
  ASSERT_EQ(over.status, 0) << over.output;
  const ShardManifest b = verify_shard_set(out, tok);
  EXPECT_EQ(b.vocab_size, 280);
  EXPECT_EQ(b.files("train"), std::vector<std::string>{"b_train_000000.bin"});
  EXPECT_FALSE(fs::exists(out + "/a_train_000000.bin"));
  int64_t sum = 0;
  for (const std::string& f : b.files("train")) sum += TokenShard(out + "/" + f, 280).num_tokens();
  for (const std::string& f : b.files("val")) sum += TokenShard(out + "/" + f, 280).num_tokens();
  EXPECT_EQ(sum, total_tokens(b));
  EXPECT_TRUE(contains(over.output, out + "/b_train_000000.bin"));  // stdout lists the shards
}

TEST(Ch08_PrepareData, NumbersAreParsedStrictly) {
  const Prep p;
  ASSERT_FALSE(p.app.empty()) << "tt_prepare_data is not next to the test binary";
  const std::string out = "--out '" + p.dir.file("data") + "' ";
  // Malformed values are usage errors (status 2, from common/cli); well-formed values out of
  // their range are refused by the app's checks (status 1), all before any work.
  struct Case {
    std::string args, needle;
    int status;
  };
  for (const Case& c :
       {Case{"--shard-tokens 10k", "--shard-tokens expects a number, got '10k'", 2},
        Case{"--vocab-size 300abc", "--vocab-size expects a number, got '300abc'", 2},
        Case{"--vocab-size abc", "--vocab-size expects a number, got 'abc'", 2},
        Case{"--val-fraction 0.1x", "--val-fraction expects a number", 2},
        Case{"--vocab-size 4294967297", "out of range", 2},
        Case{"--bogus 1", "unknown option '--bogus'", 2},
        Case{"--vocab-size 100", "--vocab-size must be at least 257", 1},
        Case{"--shard-tokens 0", "--shard-tokens must be positive", 1},
        Case{"--val-fraction 1", "--val-fraction must be in [0, 1)", 1},
        Case{"--format xml", "unknown format 'xml'", 1}}) {
    const RunResult r = p.run(out + c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.needle)) << c.args;
    EXPECT_FALSE(contains(r.output, "stoi")) << c.args;
  }
  EXPECT_FALSE(fs::exists(p.dir.file("data")));  // nothing written by a refused run
  const RunResult ok = p.run(out + "--shard-tokens 200 --vocab-size 300");
  ASSERT_EQ(ok.status, 0) << ok.output;
  const ShardManifest m = verify_shard_set(p.dir.file("data"), p.dir.file("data/tokenizer.ttbpe"));
  EXPECT_GT(m.files("train").size(), 1u);  // 200-token shards
  for (const ShardEntry& e : m.shards) EXPECT_LE(e.num_tokens, 200) << e.file;
}

TEST(Ch08_PrepareData, SkippedSymbolicLinksAreNamed) {
  const Prep p;
  ASSERT_FALSE(p.app.empty()) << "tt_prepare_data is not next to the test binary";
  const std::string in = p.dir.file("in");
  fs::create_directories(in);
  fs::copy_file(p.dir.file("corpus.txt"), in + "/a.txt");
  fs::create_symlink(p.dir.file("corpus.txt"), in + "/linked.txt");
  const RunResult r = run_program(
      p.app,
      "--input '" + in + "' --format paragraph --vocab-size 260 --out '" + p.dir.file("data") + "'",
      p.dir.file("links.log"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(
      r.output, "skipped symbolic link " + in + "/linked.txt -> " + p.dir.file("corpus.txt")));
  EXPECT_TRUE(contains(r.output, "read 1 files"));
}

TEST(Ch08_PrepareData, DirectoryWhereAFileIsExpectedSaysSo) {
  const Prep p;
  ASSERT_FALSE(p.app.empty()) << "tt_prepare_data is not next to the test binary";
  fs::create_directories(p.dir.file("tok_dir"));
  const RunResult r =
      p.run("--out '" + p.dir.file("data") + "' --tokenizer '" + p.dir.file("tok_dir") + "'");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "tokenizer '" + p.dir.file("tok_dir") + "' is a directory"));
  EXPECT_FALSE(fs::exists(p.dir.file("data")));
}

}  // namespace
}  // namespace tt
