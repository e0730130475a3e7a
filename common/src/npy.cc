#include "tt/npy.h"

#include <cstring>
#include <fstream>
#include <limits>

#include "tt/error.h"
#include "tt/file.h"

namespace tt {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

const char* descr_of(NpyDType d) {
  switch (d) {
    case NpyDType::kFloat32:
      return "<f4";
    case NpyDType::kFloat64:
      return "<f8";
    case NpyDType::kInt64:
      return "<i8";
  }
  return "?";
}

// Minimal, strict parser for the header dict written by numpy.save.
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string name) : s_(std::move(text)), name_(std::move(name)) {}

  void parse(NpyArray& out) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        std::string d = parse_string();
        if (d == "<f4")
          out.dtype = NpyDType::kFloat32;
        else if (d == "<f8")
          out.dtype = NpyDType::kFloat64;
        else if (d == "<i8")
          out.dtype = NpyDType::kInt64;
        else
          fail("unsupported dtype '" + d + "' (supported: <f4, <f8, <i8)");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (s_.compare(i_, 5, "False") == 0) {
          i_ += 5;
        } else if (s_.compare(i_, 4, "True") == 0) {
          fail("Fortran-ordered arrays are not supported");
        } else
          fail("fortran_order must be True or False");
        have_order = true;
      } else if (key == "shape") {
        out.shape = parse_shape();
        have_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      fail("expected ',' or '}' in header");
    }
    if (!have_descr || !have_order || !have_shape)
      fail("header lacks descr, fortran_order or shape");
    skip_ws();
    if (i_ != s_.size()) fail("trailing characters after the header dict");
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n')) ++i_;
  }
  void expect(char c) {
    if (peek() != c)
      fail(std::string("expected '") + c + "' at header offset " + std::to_string(i_));
    ++i_;
  }
  std::string parse_string() {
    char q = peek();
    if (q != '\'' && q != '"')
      fail("expected a quoted string at header offset " + std::to_string(i_));
    ++i_;
    std::size_t end = s_.find(q, i_);
    if (end == std::string::npos) fail("unterminated string in header");
    std::string r = s_.substr(i_, end - i_);
    i_ = end + 1;
    return r;
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') {
        ++i_;
        break;
      }
      if (peek() < '0' || peek() > '9') fail("shape entries must be non-negative integers");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("shape entry too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      shape.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() == ')') {
        ++i_;
        break;
      }
      fail("malformed shape tuple");
    }
    return shape;
  }
  [[noreturn]] void fail(const std::string& what) const {
    TT_THROW("read_npy(", name_, "): malformed header: ", what);
  }

  std::string s_;
  std::string name_;
  std::size_t i_ = 0;
};

}  // namespace

std::size_t npy_itemsize(NpyDType dtype) {
  return dtype == NpyDType::kFloat32 ? 4 : 8;
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray parse_npy(const std::vector<std::byte>& bytes, const std::string& name) {
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  TT_CHECK(bytes.size() >= kMagicLen + 4, "read_npy(", name, "): file too short (", bytes.size(),
           " bytes) to hold a .npy header");
  TT_CHECK(std::memcmp(bytes.data(), kMagic, kMagicLen) == 0, "read_npy(", name,
           "): bad magic: not a .npy file");
  const unsigned major = at(6), minor = at(7);
  TT_CHECK((major >= 1 && major <= 3) && minor == 0, "read_npy(", name, "): unsupported version ",
           major, ".", minor, " (supported: 1.0, 2.0, 3.0)");
  std::size_t header_len = 0, pos = 0;
  if (major == 1) {
    header_len = at(8) | (at(9) << 8);
    pos = 10;
  } else {
    TT_CHECK(bytes.size() >= 12, "read_npy(", name, "): truncated header length");
    header_len = static_cast<std::size_t>(at(8)) | (static_cast<std::size_t>(at(9)) << 8) |
                 (static_cast<std::size_t>(at(10)) << 16) |
                 (static_cast<std::size_t>(at(11)) << 24);
    pos = 12;
  }
  TT_CHECK(header_len <= bytes.size() - pos, "read_npy(", name, "): truncated header (needs ",
           header_len, " bytes, file has ", bytes.size() - pos, " after the preamble)");
  std::string header(reinterpret_cast<const char*>(bytes.data() + pos), header_len);
  for (char c : header) {
    TT_CHECK(c == '\n' || (c >= 0x20 && c < 0x7f), "read_npy(", name,
             "): header contains a non-ASCII byte");
  }
  NpyArray out;
  HeaderParser(header, name).parse(out);
  pos += header_len;

  // Guard the size computation against overflow before comparing with the file size.
  const std::size_t item = npy_itemsize(out.dtype);
  std::size_t need = item;
  for (int64_t d : out.shape) {
    const auto ud = static_cast<std::size_t>(d);
    TT_CHECK(ud == 0 || need <= std::numeric_limits<std::size_t>::max() / ud, "read_npy(", name,
             "): shape too large");
    need *= ud;
  }
  const std::size_t have = bytes.size() - pos;
  TT_CHECK(have == need, "read_npy(", name, "): data section has ", have, " bytes but dtype ",
           descr_of(out.dtype), " and shape of ", out.shape.size(), " dims need ", need,
           have < need ? " (truncated file)" : " (trailing bytes)");
  out.data.resize(need);
  if (need > 0) std::memcpy(out.data.data(), bytes.data() + pos, need);
  return out;
}

NpyArray read_npy(const std::string& path) {
  return parse_npy(read_whole_file<std::vector<std::byte>>(path, ".npy file"), path);
}

std::vector<std::byte> serialize_npy(const NpyArray& array) {
  for (int64_t d : array.shape) TT_CHECK(d >= 0, "write_npy: negative dimension ", d);
  const std::size_t need = static_cast<std::size_t>(array.numel()) * npy_itemsize(array.dtype);
  TT_CHECK(array.data.size() == need, "write_npy: data has ", array.data.size(),
           " bytes but the shape and dtype need ", need);
  std::string header =
      std::string("{'descr': '") + descr_of(array.dtype) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < array.shape.size(); ++i) {
    header += std::to_string(array.shape[i]);
    if (array.shape.size() == 1 || i + 1 < array.shape.size()) header += ",";
    if (i + 1 < array.shape.size()) header += " ";
  }
  header += "), }";
  const std::size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  TT_CHECK(header.size() <= 65535, "write_npy: header too long");
  // One allocation, filled front to back.
  std::vector<std::byte> out(kMagicLen + 4 + header.size() + need);
  std::size_t at = 0;
  auto put = [&](const void* p, std::size_t n) {
    if (n > 0) std::memcpy(out.data() + at, p, n);
    at += n;
  };
  put(kMagic, kMagicLen);
  const unsigned char preamble[4] = {1, 0, static_cast<unsigned char>(header.size() & 0xff),
                                     static_cast<unsigned char>(header.size() >> 8)};
  put(preamble, 4);
  put(header.data(), header.size());
  put(array.data.data(), array.data.size());
  return out;
}

void write_npy(const std::string& path, const NpyArray& array) {
  const auto bytes = serialize_npy(array);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  TT_CHECK(out, "write_npy(", path, "): cannot open file for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.flush();
  TT_CHECK(out, "write_npy(", path, "): write failed");
}

}  // namespace tt
