// Tests of common/: the .npy reader/writer and the error macros.
#include <cstring>

#include "tt/npy.h"
#include "tt/testing_common.h"

namespace tt {
namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::vector<std::byte> make_npy(const std::string& header_dict, std::size_t data_bytes,
                                char major = 1) {
  std::string h = header_dict;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string s = std::string("\x93NUMPY", 6) + major + '\0';
  s += static_cast<char>(h.size() & 0xff);
  s += static_cast<char>(h.size() >> 8);
  s += h;
  s += std::string(data_bytes, '\0');
  return bytes_of(s);
}

TEST(Common_Npy, RoundTripAllDtypes) {
  for (NpyDType d : {NpyDType::kFloat32, NpyDType::kFloat64, NpyDType::kInt64}) {
    NpyArray a;
    a.dtype = d;
    a.shape = {2, 3};
    a.data.resize(6 * npy_itemsize(d));
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::byte>(i * 7);
    NpyArray b = parse_npy(serialize_npy(a));
    EXPECT_EQ(b.dtype, d);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
  }
  NpyArray s;  // 0-d and 1-d shapes print as () and (n,)
  s.dtype = NpyDType::kFloat64;
  s.data.resize(8);
  EXPECT_EQ(parse_npy(serialize_npy(s)).shape, std::vector<int64_t>{});
}

TEST(Common_Npy, ParsesNumpyHeaders) {
  auto a = parse_npy(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  auto b = parse_npy(make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 0), }", 0));
  EXPECT_EQ(b.numel(), 0);
}

TEST(Common_Npy, RejectsMalformedFiles) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  EXPECT_TT_ERROR(parse_npy(bytes_of("hello")), "too short");
  EXPECT_TT_ERROR(parse_npy(bytes_of("NOTNUMPY-file-with-enough-bytes")), "bad magic");
  EXPECT_TT_ERROR(parse_npy(make_npy(ok, 15)), "truncated");
  EXPECT_TT_ERROR(parse_npy(make_npy(ok, 17)), "trailing");
  EXPECT_TT_ERROR(parse_npy(make_npy(ok, 16, 9)), "version");
  EXPECT_TT_ERROR(
      parse_npy(make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4)),
      "unsupported dtype", ">f4");
  EXPECT_TT_ERROR(
      parse_npy(make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4)),
      "Fortran");
  EXPECT_TT_ERROR(parse_npy(make_npy("{'descr': '<f4', 'shape': (1,), }", 4)), "lacks");
  EXPECT_TT_ERROR(
      parse_npy(make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4)),
      "non-negative");
  EXPECT_TT_ERROR(
      parse_npy(make_npy(
          "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4)),
      "too large");
  EXPECT_TT_ERROR(read_npy("/nonexistent/file.npy"), "cannot open", "/nonexistent/file.npy");
  NpyArray bad;
  bad.shape = {3};
  EXPECT_TT_ERROR(serialize_npy(bad), "write_npy");
}

TEST(Common_Errors, CheckFormatsMessageWithLocation) {
  try {
    TT_CHECK(1 + 1 == 3, "op: shape ", 2, "x", 3);
    FAIL() << "TT_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op: shape 2x3 (at "), std::string::npos) << e.what();
  }
  try {
    TT_TODO("ch99.1", "title: hint");
    FAIL() << "TT_TODO did not throw";
  } catch (const NotImplemented& e) {
    EXPECT_EQ(e.id(), "ch99.1");
    EXPECT_NE(std::string(e.what()).find("TODO ch99.1 not implemented: title: hint"),
              std::string::npos);
  }
  // A starter's NotImplemented must not satisfy an error expectation.
  EXPECT_FALSE(testing::throws_tt_error([] { TT_TODO("ch99.2", "x"); }, {}));
  EXPECT_FALSE(testing::throws_tt_error([] {}, {}));
}

}  // namespace
}  // namespace tt
