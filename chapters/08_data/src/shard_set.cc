// Shard sets (tt/shard_set.h): the manifest, its verification, and the staged writer.
#include "tt/shard_set.h"

#include <fcntl.h>
#include <stdio.h>   // renameat2
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "tt/checkpoint.h"
#include "tt/error.h"
#include "tt/file.h"
#include "tt/shards.h"

namespace tt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A file name inside the set's directory: no path separator, not "." or "..".
bool is_plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

bool is_split_name(const std::string& split) {
  if (split.empty()) return false;
  for (const char c : split) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

bool is_hash(const std::string& h) {
  if (h.size() != 16) return false;
  for (const char c : h) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

/// Reads the manifest's fields with messages naming the source and the field.
class Fields {
 public:
  explicit Fields(const std::string& source) : source_(source) {}
  const json& member(const json& obj, const char* key, const char* where) const {
    TT_CHECK(obj.is_object(), source_, ": ", where, " must be a JSON object");
    const auto it = obj.find(key);
    TT_CHECK(it != obj.end(), source_, ": ", where, " has no \"", key, "\"");
    return *it;
  }
  std::string str(const json& obj, const char* key, const char* where) const {
    const json& v = member(obj, key, where);
    TT_CHECK(v.is_string(), source_, ": ", where, ".", key, " must be a string");
    return v.get<std::string>();
  }
  int64_t integer(const json& obj, const char* key, const char* where, int64_t lo,
                  int64_t hi) const {
    const json& v = member(obj, key, where);
    bool ok = false;
    int64_t n = 0;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      ok = u <= static_cast<uint64_t>(hi);
      n = ok ? static_cast<int64_t>(u) : 0;
    } else if (v.is_number_integer()) {
      n = v.get<int64_t>();
      ok = true;
    }
    TT_CHECK(ok && n >= lo && n <= hi, source_, ": ", where, ".", key, " must be an integer in [",
             lo, ", ", hi, "], got ", v.dump());
    return n;
  }

 private:
  const std::string& source_;
};

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string rerun_hint(const std::string& dir) {
  return "; rerun tt_prepare_data --out " + dir + " --overwrite to rebuild the whole set";
}

}  // namespace

// ----- ShardManifest ------------------------------------------------------------------------

std::vector<std::string> ShardManifest::files(const std::string& split) const {
  std::vector<std::string> out;
  for (const ShardEntry& e : shards) {
    if (e.split == split) out.push_back(e.file);
  }
  return out;
}

std::string ShardManifest::to_json() const {
  json shard_list = json::array();
  for (const ShardEntry& e : shards) {
    shard_list.push_back({{"file", e.file}, {"split", e.split}, {"tokens", e.num_tokens}});
  }
  const json j = {
      {"format", shard_set::kFormat},
      {"version", shard_set::kVersion},
      {"tokenizer",
       {{"file", tokenizer_file}, {"fnv1a64", tokenizer_fnv1a64}, {"vocab_size", vocab_size}}},
      {"shards", shard_list}};
  return j.dump(2) + "\n";
}

ShardManifest ShardManifest::parse(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    TT_THROW(source, ": not a valid shard manifest (JSON): ", e.what());
  }
  const Fields f(source);
  const std::string format = f.str(j, "format", "the manifest");
  TT_CHECK(format == shard_set::kFormat, source, ": format is '", format, "', expected '",
           shard_set::kFormat, "'");
  const int64_t version =
      f.integer(j, "version", "the manifest", 0, std::numeric_limits<int64_t>::max());
  TT_CHECK(version == shard_set::kVersion, source, ": unsupported manifest version ", version,
           " (this build reads version ", shard_set::kVersion, ")");
  ShardManifest m;
  const json& tok = f.member(j, "tokenizer", "the manifest");
  m.tokenizer_file = f.str(tok, "file", "tokenizer");
  TT_CHECK(is_plain_name(m.tokenizer_file), source, ": tokenizer.file '", m.tokenizer_file,
           "' is not a file name inside the set's directory");
  m.tokenizer_fnv1a64 = f.str(tok, "fnv1a64", "tokenizer");
  TT_CHECK(is_hash(m.tokenizer_fnv1a64), source, ": tokenizer.fnv1a64 '", m.tokenizer_fnv1a64,
           "' is not 16 lowercase hex digits");
  m.vocab_size = f.integer(tok, "vocab_size", "tokenizer", 1, std::numeric_limits<int32_t>::max());
  const json& list = f.member(j, "shards", "the manifest");
  TT_CHECK(list.is_array(), source, ": shards must be a JSON array");
  std::set<std::string> seen;
  for (const json& s : list) {
    ShardEntry e;
    e.file = f.str(s, "file", "a shard");
    TT_CHECK(is_plain_name(e.file) && e.file.size() > 4 && e.file.ends_with(".bin"), source,
             ": shard file '", e.file, "' is not a *.bin file name inside the set's directory");
    TT_CHECK(seen.insert(e.file).second, source, ": shard '", e.file, "' is listed twice");
    TT_CHECK(e.file != m.tokenizer_file, source, ": shard '", e.file, "' is the tokenizer file");
    e.split = f.str(s, "split", "a shard");
    TT_CHECK(is_split_name(e.split), source, ": shard '", e.file, "' has split '", e.split,
             "' (expected a name of [a-z0-9_-], e.g. train or val)");
    e.num_tokens = f.integer(s, "tokens", "a shard", 0, std::numeric_limits<int64_t>::max());
    m.shards.push_back(std::move(e));
  }
  return m;
}

// ----- reading a set ------------------------------------------------------------------------

std::string file_fnv1a64(const std::string& path, const std::string& what) {
  const std::string bytes = read_whole_file(path, what);
  return hex64(ckpt::fnv1a64(bytes.data(), bytes.size()));
}

ShardManifest verify_shard_set(const std::string& dir, const std::string& tokenizer_path) {
  std::error_code ec;
  TT_CHECK(fs::is_directory(dir, ec), "shard set '", dir,
           "' does not exist or is not a directory; create it with tt_prepare_data --out ", dir);
  const std::string manifest_path = (fs::path(dir) / shard_set::kManifestFile).string();
  TT_CHECK(fs::exists(manifest_path, ec), "shard set '", dir, "' has no ", shard_set::kManifestFile,
           " (written by a tt_prepare_data older than manifests, or by hand), so nothing says "
           "which tokenizer its shards were encoded with",
           rerun_hint(dir));
  const ShardManifest m =
      ShardManifest::parse(read_whole_file(manifest_path, "shard manifest"), manifest_path);
  const std::string hash = file_fnv1a64(tokenizer_path, "tokenizer");
  TT_CHECK(hash == m.tokenizer_fnv1a64, "shard set '", dir,
           "' was encoded with another tokenizer: ", shard_set::kManifestFile,
           " lists tokenizer fnv1a64 ", m.tokenizer_fnv1a64, " but '", tokenizer_path, "' has ",
           hash, "; use the tokenizer the set was made with", rerun_hint(dir));
  std::set<std::string> listed;
  for (const ShardEntry& e : m.shards) {
    const std::string path = (fs::path(dir) / e.file).string();
    const TokenShard shard(path, m.vocab_size);
    TT_CHECK(shard.num_tokens() == e.num_tokens, "shard set '", dir, "': '", path, "' holds ",
             shard.num_tokens(), " tokens but ", shard_set::kManifestFile, " lists ", e.num_tokens,
             " (the file was replaced after the set was written)", rerun_hint(dir));
    listed.insert(e.file);
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    TT_CHECK(!name.ends_with(".bin") || listed.count(name) > 0, "shard set '", dir, "': '", name,
             "' is not listed in ", shard_set::kManifestFile,
             " (a shard of another run?); remove it", rerun_hint(dir));
  }
  return m;
}

std::vector<std::string> shard_set_paths(const std::string& dir, const std::string& split,
                                         const std::string& tokenizer_path) {
  const ShardManifest m = verify_shard_set(dir, tokenizer_path);
  std::vector<std::string> paths;
  for (const std::string& f : m.files(split)) paths.push_back((fs::path(dir) / f).string());
  TT_CHECK(!paths.empty(), "shard set '", dir, "' has no '", split, "' shards (",
           shard_set::kManifestFile, " lists ", m.shards.size(), " shards)");
  return paths;
}

// ----- ShardSetWriter -----------------------------------------------------------------------

ShardSetWriter::ShardSetWriter(const std::string& out, bool overwrite) : overwrite_(overwrite) {
  fs::path target = fs::path(out).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "data/x/" -> "data/x"
  std::error_code ec;
  if (fs::is_symlink(target, ec)) target = fs::canonical(target);
  TT_CHECK(target.has_filename() && target.filename() != "." && target.filename() != "..",
           "ShardSetWriter: the set '", out, "' must name a directory (not '.' or '..')");
  out_ = target.string();
  const fs::file_status st = fs::status(target, ec);
  if (fs::exists(st)) {
    TT_CHECK(fs::is_directory(st), "shard set '", out_, "' exists and is not a directory");
    TT_CHECK(overwrite || fs::is_empty(target), "shard set '", out_,
             "' already holds files (a shard set made earlier?): pass --overwrite to replace the "
             "whole set, or choose another --out");
  }
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  fs::create_directories(parent);
  std::string tmpl = (parent / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  TT_CHECK(::mkdtemp(tmpl.data()) != nullptr, "ShardSetWriter: cannot create a staging directory '",
           tmpl, "': ", std::strerror(errno));
  staging_ = tmpl;
  // mkdtemp makes the directory private (0700); the published set gets the usual mode
  // (0777 minus the umask), as a directory made by mkdir would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(staging_.c_str(), 0777 & ~mask);
}

ShardSetWriter::~ShardSetWriter() {
  if (!committed_ && !staging_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

void ShardSetWriter::set_tokenizer(const Tokenizer& tok) {
  TT_CHECK(manifest_.tokenizer_fnv1a64.empty(), "ShardSetWriter: set_tokenizer called twice");
  const std::string path = (fs::path(staging_) / shard_set::kTokenizerFile).string();
  tok.save(path);
  manifest_.tokenizer_file = shard_set::kTokenizerFile;
  manifest_.tokenizer_fnv1a64 = file_fnv1a64(path, "tokenizer");
  manifest_.vocab_size = tok.vocab_size();
}

void ShardSetWriter::write_shard(const std::string& file, const std::string& split,
                                 std::span<const int32_t> tokens) {
  TT_CHECK(!manifest_.tokenizer_fnv1a64.empty(),
           "ShardSetWriter: write_shard before set_tokenizer (the tokenizer bounds the tokens)");
  TT_CHECK(is_plain_name(file) && file.ends_with(".bin") && is_split_name(split),
           "ShardSetWriter: '", file, "' (split '", split,
           "') is not a *.bin file name with a [a-z0-9_-] split");
  for (const ShardEntry& e : manifest_.shards) {
    TT_CHECK(e.file != file, "ShardSetWriter: shard '", file, "' written twice");
  }
  tt::write_shard((fs::path(staging_) / file).string(), tokens, manifest_.vocab_size);
  manifest_.shards.push_back({file, split, static_cast<int64_t>(tokens.size())});
}

void ShardSetWriter::commit() {
  TT_CHECK(!committed_, "ShardSetWriter: commit called twice");
  TT_CHECK(!manifest_.tokenizer_fnv1a64.empty(), "ShardSetWriter: commit without a tokenizer");
  // The staging directory is not visible as `out` yet: a plain write is enough (the rename
  // below publishes the manifest and the files together).
  const std::string manifest = manifest_.to_json();
  const std::string manifest_path = (fs::path(staging_) / shard_set::kManifestFile).string();
  {
    std::ofstream f(manifest_path, std::ios::binary | std::ios::trunc);
    f.write(manifest.data(), static_cast<std::streamsize>(manifest.size()));
    f.close();
    TT_CHECK(f.good(), "ShardSetWriter: cannot write '", manifest_path, "'");
  }
  // rename(2) of a directory replaces only a missing or empty directory: a set published
  // meanwhile by another run makes it fail (ENOTEMPTY/EEXIST) instead of being mixed into.
  if (::rename(staging_.c_str(), out_.c_str()) == 0) {
    committed_ = true;
    return;
  }
  const int err = errno;
  TT_CHECK((err == ENOTEMPTY || err == EEXIST) && overwrite_, "ShardSetWriter: cannot publish '",
           staging_, "' as '", out_, "': ", std::strerror(err),
           err == ENOTEMPTY || err == EEXIST
               ? " (another run published a set there meanwhile; pass --overwrite to replace it)"
               : "");
  // --overwrite: swap the two directories in one step, then remove the old set (now staging_).
  if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) != 0) {
    // A file system without RENAME_EXCHANGE: move the old set aside, then rename (a crash
    // between the two renames leaves no set at `out`, never a mixed one).
    const std::string old = staging_ + ".old";
    TT_CHECK(::rename(out_.c_str(), old.c_str()) == 0, "ShardSetWriter: cannot move the old set '",
             out_, "' aside: ", std::strerror(errno));
    TT_CHECK(::rename(staging_.c_str(), out_.c_str()) == 0, "ShardSetWriter: cannot publish '",
             staging_, "' as '", out_, "': ", std::strerror(errno));
    staging_ = old;
  }
  committed_ = true;
  std::error_code ec;
  fs::remove_all(staging_, ec);  // the old set
}

}  // namespace tt
