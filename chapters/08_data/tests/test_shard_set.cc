// Shard sets (tt/shard_set.h): the manifest's format and strict parser, the staged writer
// (refuses an existing set, --overwrite replaces the whole set at once) and the verification
// train_gpt2 relies on (another tokenizer, unlisted shards, sets without a manifest).
#include <filesystem>
#include <string>
#include <vector>

#include "ch08_test_util.h"
#include "tt/shard_set.h"
#include "tt/shards.h"
#include "tt/tokenizer.h"

namespace tt {
namespace {

namespace fs = std::filesystem;
using test08::identity_bytes;
using test08::read_bytes;
using test08::TempDir;
using test08::write_bytes;

/// A byte-level tokenizer with `extra` specials after <|endoftext|> (another vocabulary size,
/// hence another file and hash).
Tokenizer byte_tokenizer(int extra = 0) {
  std::vector<SpecialToken> specials = {{"<|endoftext|>", 256}};
  for (int i = 0; i < extra; ++i) specials.push_back({"<|x" + std::to_string(i) + "|>", 257 + i});
  return Tokenizer(identity_bytes(), {}, specials);
}

/// Writes a set into `dir`: shards `name`_train_000000.bin (n tokens) and `name`_val_000000.bin.
void write_set(const std::string& dir, const std::string& name, int64_t n, bool overwrite,
               int extra_specials = 0) {
  ShardSetWriter set(dir, overwrite);
  set.set_tokenizer(byte_tokenizer(extra_specials));
  std::vector<int32_t> tokens(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 257);
  set.write_shard(name + "_train_000000.bin", "train", tokens);
  set.write_shard(name + "_val_000000.bin", "val", std::span(tokens).first(10));
  set.commit();
}

/// The entries of `dir` other than hidden ones, in name order.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Ch08_ShardSet, ManifestRoundTripsThroughJson) {
  ShardManifest m;
  m.tokenizer_fnv1a64 = "0123456789abcdef";
  m.vocab_size = 4096;
  m.shards = {{"a_train_000000.bin", "train", 154123}, {"a_val_000000.bin", "val", 14724}};
  const ShardManifest back = ShardManifest::parse(m.to_json(), "m.json");
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.files("train"), std::vector<std::string>{"a_train_000000.bin"});
  EXPECT_EQ(back.files("test"), std::vector<std::string>{});
}

TEST(Ch08_ShardSet, ParserRefusesMalformedManifests) {
  ShardManifest good;
  good.tokenizer_fnv1a64 = "0123456789abcdef";
  good.vocab_size = 300;
  good.shards = {{"a_train_000000.bin", "train", 5}};
  const std::string text = good.to_json();
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  auto parse = [](const std::string& t) { return ShardManifest::parse(t, "m.json"); };
  EXPECT_TT_ERROR(parse("{"), "m.json", "not a valid shard manifest");
  EXPECT_TT_ERROR(parse("[]"), "m.json", "must be a JSON object");
  EXPECT_TT_ERROR(parse(edited("tt-shard-set", "other")), "format is 'other'");
  EXPECT_TT_ERROR(parse(edited("\"version\": 1", "\"version\": 2")), "unsupported", "version 2");
  EXPECT_TT_ERROR(parse(edited("\"version\": 1", "\"version\": 1.5")),
                  "version must be an integer");
  EXPECT_TT_ERROR(parse(edited("0123456789abcdef", "0123456789ABCDEF")), "16 lowercase hex");
  EXPECT_TT_ERROR(parse(edited("\"vocab_size\": 300", "\"vocab_size\": 0")), "vocab_size");
  EXPECT_TT_ERROR(parse(edited("\"tokens\": 5", "\"tokens\": -1")), "tokens must be");
  EXPECT_TT_ERROR(parse(edited("\"tokens\": 5", "\"tokens\": \"5\"")), "tokens must be");
  EXPECT_TT_ERROR(parse(edited("\"tokens\": 5", "\"tokens\": 18446744073709551615")),
                  "tokens must be");
  EXPECT_TT_ERROR(parse(edited("a_train_000000.bin", "../a_train_000000.bin")), "../a_train",
                  "not a *.bin file name inside");
  EXPECT_TT_ERROR(parse(edited("a_train_000000.bin", "a.txt")), "a.txt");
  EXPECT_TT_ERROR(parse(edited("\"tokenizer.ttbpe\"", "\"/etc/passwd\"")), "tokenizer.file");
  EXPECT_TT_ERROR(parse(edited("\"split\": \"train\"", "\"split\": \"a/b\"")), "split 'a/b'");
  EXPECT_TT_ERROR(parse(edited("\"shards\": [",
                               "\"shards\": [{\"file\": \"a_train_000000.bin\", "
                               "\"split\": \"val\", \"tokens\": 1},")),
                  "listed twice");
  EXPECT_TT_ERROR(parse(edited("\"shards\"", "\"shard\"")), "has no \"shards\"");
}

TEST(Ch08_ShardSet, WriterPublishesACompleteSetInOneStep) {
  TempDir tmp;
  const std::string dir = tmp.file("set");
  {
    ShardSetWriter set(dir, false);
    set.set_tokenizer(byte_tokenizer());
    set.write_shard("s_train_000000.bin", "train", std::vector<int32_t>{1, 2, 3});
    EXPECT_FALSE(fs::exists(dir));  // nothing is visible before commit()
    EXPECT_TRUE(fs::exists(set.staging() + "/s_train_000000.bin"));
    set.write_shard("s_val_000000.bin", "val", std::vector<int32_t>{4, 5});
    EXPECT_TT_ERROR(set.write_shard("s_val_000000.bin", "val", std::vector<int32_t>{4}),
                    "written twice");
    EXPECT_TT_ERROR(set.write_shard("s_val_000001.bin", "val", std::vector<int32_t>{257}),
                    "s_val_000001.bin");  // outside the tokenizer's 257 ids
    set.commit();
  }
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"manifest.json", "s_train_000000.bin",
                                                    "s_val_000000.bin", "tokenizer.ttbpe"}));
  EXPECT_EQ(listing(tmp.str()), std::vector<std::string>{"set"});  // no staging directory left
  // The set has the mode of a directory made by mkdir (not mkdtemp's private 0700), its files
  // those of files made by the program (not mkstemp's 0600).
  fs::create_directory(tmp.file("ref"));
  write_bytes(tmp.file("ref/f"), "x");
  EXPECT_EQ(fs::status(dir).permissions(), fs::status(tmp.file("ref")).permissions());
  EXPECT_EQ(fs::status(dir + "/manifest.json").permissions(),
            fs::status(tmp.file("ref/f")).permissions());
  fs::remove_all(tmp.file("ref"));
  const ShardManifest m = verify_shard_set(dir, dir + "/tokenizer.ttbpe");
  EXPECT_EQ(m.vocab_size, 257);
  EXPECT_EQ(m.tokenizer_fnv1a64, file_fnv1a64(dir + "/tokenizer.ttbpe"));
  EXPECT_EQ(m.shards, (std::vector<ShardEntry>{{"s_train_000000.bin", "train", 3},
                                               {"s_val_000000.bin", "val", 2}}));
  EXPECT_EQ(shard_set_paths(dir, "val", dir + "/tokenizer.ttbpe"),
            std::vector<std::string>{dir + "/s_val_000000.bin"});
  EXPECT_TT_ERROR(shard_set_paths(dir, "test", dir + "/tokenizer.ttbpe"), "no 'test' shards");
}

TEST(Ch08_ShardSet, UnfinishedWriterLeavesNothing) {
  TempDir tmp;
  {
    ShardSetWriter set(tmp.file("set"), false);
    set.set_tokenizer(byte_tokenizer());
    set.write_shard("s_train_000000.bin", "train", std::vector<int32_t>{1});
  }  // destroyed without commit(), as when encoding throws
  EXPECT_EQ(listing(tmp.str()), std::vector<std::string>{});
}

TEST(Ch08_ShardSet, ExistingSetIsRefusedUnlessOverwriteWhichReplacesItWhole) {
  TempDir tmp;
  const std::string dir = tmp.file("set");
  write_set(dir, "old", 1000, false);
  EXPECT_TT_ERROR(write_set(dir, "new", 100, false, 3), "'" + dir + "' already holds files",
                  "--overwrite");
  EXPECT_NO_THROW(verify_shard_set(dir, dir + "/tokenizer.ttbpe"));  // the old set, untouched
  write_set(dir, "new", 100, true, 3);
  // Only the new set's files: no old shard left to be trained on with the new tokenizer.
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"manifest.json", "new_train_000000.bin",
                                                    "new_val_000000.bin", "tokenizer.ttbpe"}));
  EXPECT_EQ(listing(tmp.str()), std::vector<std::string>{"set"});
  EXPECT_EQ(verify_shard_set(dir, dir + "/tokenizer.ttbpe").vocab_size, 260);
  // An empty directory is no set: it is filled without --overwrite.
  fs::create_directories(tmp.file("empty"));
  write_set(tmp.file("empty") + "/", "e", 10, false);
  EXPECT_EQ(listing(tmp.file("empty")).size(), 4u);
  // A file is never replaced by a set.
  write_bytes(tmp.file("file"), "x");
  EXPECT_TT_ERROR(ShardSetWriter(tmp.file("file"), true), "exists and is not a directory");
}

TEST(Ch08_ShardSet, VerifyRefusesAnotherTokenizerUnlistedShardsAndNoManifest) {
  TempDir tmp;
  const std::string dir = tmp.file("set");
  const std::string tok = dir + "/tokenizer.ttbpe";
  write_set(dir, "a", 1000, false);
  // The tokenizer replaced (what an older tt_prepare_data did on a second run): refused.
  const std::string good_tok = read_bytes(tok);
  byte_tokenizer(2).save(tok);
  EXPECT_TT_ERROR(verify_shard_set(dir, tok), "'" + dir + "' was encoded with another tokenizer",
                  "rerun tt_prepare_data --out " + dir + " --overwrite");
  write_bytes(tok, good_tok);
  // A shard the manifest does not list (a shard of another run): refused, named.
  write_shard(dir + "/b_train_000000.bin", std::vector<int32_t>{1, 2}, 257);
  EXPECT_TT_ERROR(shard_set_paths(dir, "train", tok), "'b_train_000000.bin' is not listed");
  fs::remove(dir + "/b_train_000000.bin");
  // A listed shard replaced by another with a different token count.
  write_shard(dir + "/a_val_000000.bin", std::vector<int32_t>{1, 2}, 257);
  EXPECT_TT_ERROR(verify_shard_set(dir, tok), "a_val_000000.bin' holds 2 tokens", "lists 10");
  fs::remove(dir + "/a_val_000000.bin");
  EXPECT_TT_ERROR(verify_shard_set(dir, tok), "cannot open token shard", "a_val_000000.bin");
  // No manifest (a set of an older tt_prepare_data): refused with what to do.
  fs::remove(dir + "/manifest.json");
  EXPECT_TT_ERROR(verify_shard_set(dir, tok), "has no manifest.json", "rerun tt_prepare_data");
  EXPECT_TT_ERROR(verify_shard_set(tmp.file("none"), tok), "does not exist",
                  "tt_prepare_data --out");
}

}  // namespace
}  // namespace tt
