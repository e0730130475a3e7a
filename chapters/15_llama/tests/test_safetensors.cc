// Tests of the safetensors reader and writer (tt/safetensors.h): round trips in F32, BF16 and
// F16, the half-precision conversions, and hostile files that must be refused with a message
// naming the tensor.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "ch15_test_util.h"
#include "tt/layers.h"
#include "tt/safetensors.h"
#include "tt/temp_dir.h"

namespace tt {
namespace {

namespace st = safetensors;

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return std::vector<std::byte>(p, p + s.size());
}

/// A file with the given header text and `data_bytes` zero bytes of data.
std::vector<std::byte> file_with(const std::string& header, std::size_t data_bytes,
                                 uint64_t header_len = UINT64_MAX) {
  std::string s(8, '\0');
  const uint64_t n = header_len == UINT64_MAX ? header.size() : header_len;
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  s += header;
  s += std::string(data_bytes, '\0');
  return bytes_of(s);
}

TEST(Ch15_Safetensors, F32RoundTripIsExactAndSortedByName) {
  const nn::StateDict state = {{"b.weight", ch15::leaf({2, 3}, 1, 1.0, DType::kFloat32, false)},
                               {"a.bias", ch15::leaf({5}, 2, 1.0, DType::kFloat32, false)},
                               {"scalar", full({}, 3.5)}};
  const auto bytes = st::serialize(state);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint64_t>(bytes[i]);
  EXPECT_EQ((8 + header_len) % 8, 0u);  // the data starts 8-byte aligned
  const nn::StateDict back = st::parse(bytes, "mem");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].first, "a.bias");  // the writer lays tensors out by name
  EXPECT_EQ(back[1].first, "b.weight");
  EXPECT_EQ(back[2].first, "scalar");
  EXPECT_TENSOR_NEAR(back[0].second, state[1].second, 0, 0);
  EXPECT_TENSOR_NEAR(back[1].second, state[0].second, 0, 0);
  EXPECT_EQ(back[2].second.dim(), 0);
  EXPECT_EQ(back[2].second.item(), 3.5);
}

TEST(Ch15_Safetensors, Bf16KeepsItsBitsAndF16RoundsToNearestEven) {
  const Tensor x = ch15::leaf({4, 7}, 3, 3.0, DType::kFloat32, false);
  const Tensor xb = x.to(DType::kBFloat16);
  nn::StateDict back = st::parse(st::serialize({{"x", xb}}), "mem");
  ASSERT_EQ(back[0].second.dtype(), DType::kBFloat16);
  EXPECT_TENSOR_NEAR(back[0].second.to(DType::kFloat32), xb.to(DType::kFloat32), 0, 0);
  back = st::parse(st::serialize({{"x", x}}, st::StoreAs::kF16), "mem");
  ASSERT_EQ(back[0].second.dtype(), DType::kFloat32);
  // F16 keeps 11 significant bits: a relative error of at most 2^-11.
  EXPECT_TENSOR_NEAR(back[0].second, x, 0, std::ldexp(1.0, -11));
}

TEST(Ch15_Safetensors, HalfConversionsAreExactOnEveryHalfValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = st::half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(st::half_to_float(st::float_to_half(f))));
      continue;
    }
    ASSERT_EQ(st::float_to_half(f), h) << "half bits " << h << " = " << f;
  }
  EXPECT_EQ(st::half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(st::half_to_float(0x0001), std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(st::float_to_half(65520.0f), 0x7C00);                      // rounds up to inf
  EXPECT_EQ(st::float_to_half(65519.0f), 0x7BFF);                      // the largest half, 65504
  EXPECT_EQ(st::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // a tie goes to even
  EXPECT_EQ(st::float_to_half(std::ldexp(1.0f, -25)), 0x0000);         // a tie goes to even (0)
  EXPECT_EQ(st::float_to_half(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Ch15_Safetensors, MetadataRoundTripsAndFloat64NeedsAStoreChoice) {
  const auto bytes = st::serialize({{"w", ones({2})}}, st::StoreAs::kKeep, {{"format", "pt"}});
  EXPECT_EQ(st::parse_header(bytes, "mem").metadata.at("format"), "pt");
  EXPECT_TT_ERROR(st::serialize({{"w", ones({2}, {DType::kFloat64})}}), "'w'", "float64");
  EXPECT_EQ(
      st::parse(st::serialize({{"w", ones({2}, {DType::kFloat64})}}, st::StoreAs::kF32), "mem")[0]
          .second.dtype(),
      DType::kFloat32);
  EXPECT_TT_ERROR(st::serialize({{"w", ones({2})}, {"w", ones({2})}}), "'w'", "twice");
}

TEST(Ch15_Safetensors, HostileFilesAreRefusedNamingTheProblem) {
  using testing::MisuseCase;
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<MisuseCase> cases = {
      {"shorter than 8 bytes", [] { st::parse(bytes_of("abc"), "f"); }, {"'f'", "3 bytes"}},
      {"header length past the end",
       [&] { st::parse(file_with(ok, 8, 1000), "f"); },
       {"header length 1000", "past the end"}},
      {"header length huge",
       [&] { st::parse(file_with(ok, 8, UINT64_MAX - 3), "f"); },
       {"past the end"}},
      {"not JSON", [] { st::parse(file_with("{nope", 0), "f"); }, {"not valid JSON"}},
      {"not an object", [] { st::parse(file_with("[1,2]", 0), "f"); }, {"not a JSON object"}},
      {"unknown dtype",
       [] {
         st::parse(file_with(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8), "f");
       },
       {"tensor 'a'", "I64"}},
      {"wrong size for shape",
       [] {
         st::parse(file_with(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "f");
       },
       {"tensor 'w'", "needs 12"}},
      {"negative dim",
       [] {
         st::parse(file_with(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "f");
       },
       {"tensor 'w'", "negative"}},
      {"huge shape",
       [] {
         st::parse(
             file_with(
                 R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})",
                 8),
             "f");
       },
       {"tensor 'w'", "larger than the file"}},
      {"offsets past the buffer",
       [] {
         st::parse(file_with(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8), "f");
       },
       {"tensor 'w'", "not inside"}},
      {"end before begin",
       [] {
         st::parse(file_with(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "f");
       },
       {"tensor 'w'", "not inside"}},
      {"overlapping tensors",
       [] {
         st::parse(file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                             12),
                   "f");
       },
       {"tensor 'b'", "overlaps tensor 'a'"}},
      {"a gap",
       [] {
         st::parse(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "f");
       },
       {"gap", "tensor 'a'"}},
      {"trailing bytes", [&] { st::parse(file_with(ok, 12), "f"); }, {"cover 8 bytes", "12"}},
      {"missing data_offsets",
       [] { st::parse(file_with(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "f"); },
       {"tensor 'a'", "data_offsets"}},
      {"float offsets",
       [] {
         st::parse(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})", 4),
                   "f");
       },
       {"tensor 'a'", "data_offsets"}},
      {"unknown key",
       [] {
         st::parse(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4),
                   "f");
       },
       {"tensor 'a'", "unknown key 'x'"}},
      {"metadata not strings",
       [] { st::parse(file_with(R"({"__metadata__":{"format":1}})", 0), "f"); },
       {"__metadata__", "format"}},
  };
  testing::expect_errors(cases);
}

TEST(Ch15_Safetensors, LoadIntoNamesMissingMisshapedAndUnexpectedTensors) {
  Generator gen(5);
  nn::Linear lin(3, 2, true, gen);
  const nn::StateDict good = {{"weight", ones({2, 3})}, {"bias", ones({2}, {DType::kBFloat16})}};
  st::load_into(lin.state_dict(), st::parse(st::serialize(good), "mem"), "good.safetensors");
  EXPECT_TENSOR_NEAR(lin.bias, ones({2}), 0, 0);  // BF16 converted to the target's float32
  using testing::MisuseCase;
  const std::vector<MisuseCase> cases = {
      {"missing",
       [&] {
         st::load_into(lin.state_dict(), {{"weight", ones({2, 3})}}, "m.safetensors");
       },
       {"m.safetensors", "bias"}},
      {"wrong shape",
       [&] {
         st::load_into(lin.state_dict(), {{"weight", ones({3, 2})}, {"bias", ones({2})}},
                       "s.safetensors");
       },
       {"s.safetensors", "weight"}},
      {"unexpected",
       [&] {
         st::load_into(lin.state_dict(),
                       {{"weight", ones({2, 3})}, {"bias", ones({2})}, {"extra", ones({1})}},
                       "u.safetensors");
       },
       {"u.safetensors", "extra"}},
      {"wrong dtype",
       [&] {
         st::load_into(lin.state_dict(),
                       {{"weight", ones({2, 3})}, {"bias", ones({2}, {DType::kInt64})}},
                       "d.safetensors");
       },
       {"d.safetensors", "bias"}},
  };
  testing::expect_errors(cases);
  // All or nothing: nothing was changed by the failed loads.
  EXPECT_TENSOR_NEAR(lin.weight, ones({2, 3}), 0, 0);
}

TEST(Ch15_Safetensors, SaveAndLoadThroughAFile) {
  const testing::TempDir dir;
  const nn::StateDict state = {{"x", ch15::leaf({3, 4}, 9, 1.0, DType::kFloat32, false)}};
  st::save(dir.file("m.safetensors"), state, st::StoreAs::kKeep, {{"format", "pt"}});
  const nn::StateDict back = st::load(dir.file("m.safetensors"));
  EXPECT_TENSOR_NEAR(back[0].second, state[0].second, 0, 0);
  EXPECT_TT_ERROR(st::load(dir.file("absent.safetensors")), "absent.safetensors");
  EXPECT_TT_ERROR(st::load(dir.str()), "is a directory");
}

}  // namespace
}  // namespace tt
