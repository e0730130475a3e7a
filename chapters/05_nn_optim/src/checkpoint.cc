// The checkpoint file format (tt/checkpoint.h): serialization, a parser that validates every
// byte it uses, and an atomic write (temporary file + fsync + rename).
#include "tt/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "tt/file.h"

namespace tt::ckpt {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint format is little-endian; add byte swapping for this machine");

namespace {

/// Size of the fixed header: magic, version, count, data offset, file size.
constexpr std::size_t kHeaderSize = 8 + 4 + 4 + 8 + 8;
/// Size of the checksum trailer.
constexpr std::size_t kTrailerSize = 8;
/// Dims accepted per tensor (a sanity bound for the parser).
constexpr uint8_t kMaxDims = 16;

uint64_t align_up(uint64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

/// Appends little-endian values to a byte vector.
struct Writer {
  std::vector<std::byte>& out;
  template <typename T>
  void put(T value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    out.insert(out.end(), p, p + n);
  }
  void pad_to(uint64_t size) { out.resize(size, std::byte{0}); }
};

/// Reads little-endian values with a bounds check before every read.
struct Reader {
  const std::vector<std::byte>& bytes;
  std::size_t pos;
  std::size_t end;
  const std::string& source;

  void need(std::size_t n, const char* what) const {
    TT_CHECK(pos <= end && n <= end - pos, "checkpoint ", source,
             ": truncated table while reading ", what, " at byte ", pos);
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return value;
  }
};

uint8_t dtype_code(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 0;
    case DType::kFloat64:
      return 1;
    case DType::kInt64:
      return 2;
    case DType::kBFloat16:
      return 3;
  }
  TT_THROW("checkpoint: unsupported dtype ", static_cast<int>(dtype));
}

/// Closes a file descriptor and removes a temporary file unless released (error paths).
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  TT_THROW("checkpoint: ", what, " '", path, "' failed: ", std::strerror(errno));
}

/// The test hook of write_file_atomic (see set_before_rename_hook).
std::function<void(const std::string&)>& before_rename_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

/// Throws when a float tensor of `state` (already on the host, contiguous) holds NaN or Inf:
/// save_checkpoint never writes the state of a diverged run over a good checkpoint.
void check_finite(const StateDict& state, const std::vector<Tensor>& host,
                  const std::string& path) {
  for (std::size_t i = 0; i < host.size(); ++i) {
    const Tensor& t = host[i];
    if (!is_floating(t.dtype())) continue;
    const auto check = [&](double v, int64_t j) {
      TT_CHECK(std::isfinite(v), "save_checkpoint: refusing to write '", path, "': '",
               state[i].first, "' (shape ", t.shape(), ", ", dtype_name(t.dtype()), ") holds ", v,
               " at flat index ", j, " (the run diverged); the file on disk, if any, is left ",
               "unchanged");
    };
    if (t.dtype() == DType::kBFloat16) {  // read exactly, as float
      const bfloat16* p = t.data<bfloat16>();
      for (int64_t j = 0, n = t.numel(); j < n; ++j) check(bfloat16_to_float(p[j]), j);
      continue;
    }
    dispatch_floating(t.dtype(), "save_checkpoint", [&]<typename T>() {
      const T* p = static_cast<const T*>(t.data_ptr());
      for (int64_t j = 0, n = t.numel(); j < n; ++j) check(static_cast<double>(p[j]), j);
    });
  }
}

}  // namespace

void set_before_rename_hook(std::function<void(const std::string& temp_path)> hook) {
  before_rename_hook() = std::move(hook);
}

uint64_t fnv1a64(const void* data, std::size_t n, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

namespace {
/// serialize(), checking that every float value is finite when `finite_path` is given.
std::vector<std::byte> serialize_impl(const StateDict& state, const std::string* finite_path) {
  // Validate everything first and bring every tensor to the host, contiguous.
  std::set<std::string> names;
  std::vector<Tensor> host;
  uint64_t table_size = 0;
  for (const auto& [name, t] : state) {
    TT_CHECK(!name.empty() && name.size() <= std::numeric_limits<uint32_t>::max(),
             "checkpoint: invalid tensor name of length ", name.size());
    TT_CHECK(names.insert(name).second, "checkpoint: duplicate key '", name, "'");
    TT_CHECK(t.defined(), "checkpoint: key '", name, "' holds an undefined tensor");
    TT_CHECK(t.dim() <= kMaxDims, "checkpoint: key '", name, "' has ", t.dim(), " dims (at most ",
             static_cast<int>(kMaxDims), ")");
    host.push_back(t.to(Device::cpu()).contiguous());
    table_size += 4 + name.size() + 1 + 1 + 8 * static_cast<uint64_t>(t.dim()) + 8 + 8;
  }
  TT_CHECK(state.size() <= std::numeric_limits<uint32_t>::max(), "checkpoint: too many tensors");
  if (finite_path != nullptr) check_finite(state, host, *finite_path);
  const uint64_t data_offset = align_up(kHeaderSize + table_size);
  std::vector<uint64_t> offsets;
  uint64_t data_size = 0;
  for (const Tensor& t : host) {
    offsets.push_back(data_size);
    data_size = align_up(data_size + t.numel() * dtype_size(t.dtype()));
  }
  const uint64_t file_size = data_offset + data_size + kTrailerSize;

  std::vector<std::byte> out;
  out.reserve(file_size);
  Writer w{out};
  w.put_bytes(kMagic, sizeof(kMagic));
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(static_cast<uint32_t>(state.size()));
  w.put<uint64_t>(data_offset);
  w.put<uint64_t>(file_size);
  for (std::size_t i = 0; i < state.size(); ++i) {
    const std::string& name = state[i].first;
    const Tensor& t = host[i];
    w.put<uint32_t>(static_cast<uint32_t>(name.size()));
    w.put_bytes(name.data(), name.size());
    w.put<uint8_t>(dtype_code(t.dtype()));
    w.put<uint8_t>(static_cast<uint8_t>(t.dim()));
    for (int64_t d : t.shape()) w.put<int64_t>(d);
    w.put<uint64_t>(offsets[i]);
    w.put<uint64_t>(t.numel() * dtype_size(t.dtype()));
  }
  for (std::size_t i = 0; i < host.size(); ++i) {
    w.pad_to(data_offset + offsets[i]);
    w.put_bytes(host[i].data_ptr(), host[i].numel() * dtype_size(host[i].dtype()));
  }
  w.pad_to(data_offset + data_size);
  w.put<uint64_t>(fnv1a64(out.data(), out.size()));
  return out;
}
}  // namespace

std::vector<std::byte> serialize(const StateDict& state) {
  return serialize_impl(state, nullptr);
}

StateDict parse(const std::vector<std::byte>& bytes, const std::string& source) {
  const std::size_t size = bytes.size();
  TT_CHECK(size >= kHeaderSize + kTrailerSize, "checkpoint ", source, ": truncated (", size,
           " bytes; a checkpoint has at least ", kHeaderSize + kTrailerSize, ")");
  TT_CHECK(std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0, "checkpoint ", source,
           ": bad magic (not a TinyInfiniTrain checkpoint)");
  Reader r{bytes, sizeof(kMagic), size - kTrailerSize, source};
  const auto version = r.get<uint32_t>("the version");
  TT_CHECK(version == kVersion, "checkpoint ", source, ": unsupported version ", version,
           " (this build reads version ", kVersion, ")");
  const auto count = r.get<uint32_t>("the tensor count");
  const auto data_offset = r.get<uint64_t>("the data offset");
  const auto file_size = r.get<uint64_t>("the file size");
  TT_CHECK(file_size == size, "checkpoint ", source, ": ",
           file_size > size ? "truncated" : "trailing bytes", " (the header says ", file_size,
           " bytes, the file has ", size, ")");
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + size - kTrailerSize, sizeof(stored));
  TT_CHECK(stored == fnv1a64(bytes.data(), size - kTrailerSize), "checkpoint ", source,
           ": checksum mismatch (the file is corrupted)");
  // The table lies between the header and the data: a data offset inside the header would make
  // the table's end lie before its start.
  TT_CHECK(data_offset % kAlignment == 0 && data_offset >= kHeaderSize &&
               data_offset <= size - kTrailerSize,
           "checkpoint ", source, ": bad data offset ", data_offset, " (a multiple of ", kAlignment,
           " in [", kHeaderSize, ", ", size - kTrailerSize, "])");

  // The table: every field is checked before it is used.
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t offset, nbytes;
  };
  std::vector<Entry> entries;
  std::set<std::string> names;
  r.end = data_offset;
  const uint64_t data_size = size - kTrailerSize - data_offset;
  for (uint32_t i = 0; i < count; ++i) {
    Entry e;
    const auto len = r.get<uint32_t>("a name length");
    r.need(len, "a name");
    e.name.assign(reinterpret_cast<const char*>(bytes.data() + r.pos), len);
    r.pos += len;
    TT_CHECK(!e.name.empty() && names.insert(e.name).second, "checkpoint ", source,
             ": empty or duplicate key '", e.name, "'");
    const auto code = r.get<uint8_t>("a dtype");
    TT_CHECK(code <= 3, "checkpoint ", source, ": key '", e.name, "' has unknown dtype code ",
             static_cast<int>(code));
    constexpr DType kByCode[] = {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBFloat16};
    e.dtype = kByCode[code];
    const auto ndim = r.get<uint8_t>("a rank");
    TT_CHECK(ndim <= kMaxDims, "checkpoint ", source, ": key '", e.name, "' has ",
             static_cast<int>(ndim), " dims");
    // The product of the sizes, counting 0 as 1, is bounded too: an empty tensor of shape
    // [0, 2^40, 2^40] has no bytes, but its strides would overflow int64.
    uint64_t numel = 1, extent = 1;
    for (uint8_t d = 0; d < ndim; ++d) {
      const auto n = r.get<int64_t>("a shape");
      const uint64_t at_least_1 = n > 0 ? static_cast<uint64_t>(n) : 1;
      TT_CHECK(n >= 0 && extent <= (uint64_t{1} << 48) / at_least_1, "checkpoint ", source,
               ": key '", e.name, "' has an invalid size ", n);
      extent *= at_least_1;
      numel *= static_cast<uint64_t>(n);
      e.shape.push_back(n);
    }
    e.offset = r.get<uint64_t>("a data offset");
    e.nbytes = r.get<uint64_t>("a byte count");
    TT_CHECK(e.nbytes == numel * dtype_size(e.dtype), "checkpoint ", source, ": key '", e.name,
             "' has ", e.nbytes, " bytes for shape ", e.shape, " of ", dtype_name(e.dtype));
    TT_CHECK(
        e.offset % kAlignment == 0 && e.offset <= data_size && e.nbytes <= data_size - e.offset,
        "checkpoint ", source, ": the data of key '", e.name, "' lies outside the file");
    entries.push_back(std::move(e));
  }

  StateDict out;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    if (e.nbytes > 0) std::memcpy(t.data_ptr(), bytes.data() + data_offset + e.offset, e.nbytes);
    out.emplace_back(e.name, t);
  }
  return out;
}

/// The mode write_file_atomic gives `path`: its current permission bits when it exists, else
/// 0666 without the process's umask (what open(O_CREAT, 0666) would give).
static mode_t file_mode_for(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return st.st_mode & 07777;
  const mode_t mask = ::umask(0);  // umask can only be read by setting it
  ::umask(mask);
  return 0666 & ~mask;
}

void write_file_atomic(const std::string& path, const std::vector<std::byte>& bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // The temporary file lives in the target's directory: rename() is atomic only within one
  // file system.
  TempFile tmp;
  std::string name = path + ".tmp.XXXXXX";
  tmp.fd = ::mkstemp(name.data());
  if (tmp.fd < 0) throw_errno("creating a temporary file for", path);
  tmp.path = name;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(tmp.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno("writing", tmp.path);
    done += static_cast<std::size_t>(n);
  }
  // mkstemp creates the file with mode 0600; the target gets the mode an ordinary write would
  // give it (the target's own mode when it exists, else 0666 minus the umask), so a file that
  // is rewritten atomically (a checkpoint, a run log cut back on --resume) stays readable.
  if (::fchmod(tmp.fd, file_mode_for(path)) != 0) throw_errno("setting the mode of", tmp.path);
  if (::fsync(tmp.fd) != 0) throw_errno("fsync of", tmp.path);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) throw_errno("closing", tmp.path);
  if (before_rename_hook()) before_rename_hook()(tmp.path);
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    throw_errno("renaming the temporary file to", path);
  tmp.keep = true;
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<std::byte> read_file(const std::string& path) {
  return read_whole_file<std::vector<std::byte>>(path, "checkpoint");
}

void save(const std::string& path, const StateDict& state) {
  write_file_atomic(path, serialize(state));
}

StateDict load(const std::string& path) {
  return parse(read_file(path), path);
}

StateDict checkpoint_state(const nn::Module& model, const optim::Optimizer* optimizer) {
  StateDict all = nn::prefixed("model", model.state_dict());
  if (optimizer != nullptr) {
    for (auto& entry : nn::prefixed("optimizer", optimizer->state_dict())) {
      all.push_back(std::move(entry));
    }
  }
  return all;
}

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, const StateDict& metadata) {
  StateDict all = checkpoint_state(model, optimizer);
  for (auto& entry : nn::prefixed(kMetadataPrefix, metadata)) all.push_back(std::move(entry));
  write_file_atomic(path, serialize_impl(all, &path));
}

StateDict checkpoint_metadata(const std::vector<std::byte>& bytes, const std::string& source) {
  StateDict out;
  const std::string prefix = std::string(kMetadataPrefix) + ".";
  for (auto& [name, t] : parse(bytes, source)) {
    if (name.starts_with(prefix)) out.emplace_back(name.substr(prefix.size()), t);
  }
  return out;
}

void load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer) {
  load_checkpoint(read_file(path), path, model, optimizer);
}

void load_checkpoint(const std::vector<std::byte>& bytes, const std::string& source,
                     nn::Module& model, optim::Optimizer* optimizer) {
  StateDict state = parse(bytes, source);
  const std::string prefix = std::string(kMetadataPrefix) + ".";
  std::erase_if(state, [&](const auto& entry) { return entry.first.starts_with(prefix); });
  nn::apply_state_dict(checkpoint_state(model, optimizer), state, source);
}

}  // namespace tt::ckpt
