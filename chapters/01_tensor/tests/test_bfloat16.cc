// Chapter 01's part of bfloat16: the dtype, storage, exact reads, printing, .npy, and the clear
// errors of everything that needs rounding (chapter 11's cast, not linked into this test).
#include <cstdio>
#include <filesystem>
#include <limits>

#include "tt/npy_tensor.h"
#include "tt/temp_dir.h"
#include "tt/tensor.h"
#include "tt/testing.h"

namespace tt {
namespace {

// Bits of 1.0, -2.5, 0.15625, +inf, -0.0 and a quiet NaN.
const std::vector<bfloat16> kValues = {{0x3F80}, {0xC020}, {0x3E20}, {0x7F80}, {0x8000}, {0x7FC0}};

TEST(Ch01_BFloat16, DTypeFacts) {
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_STREQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_TRUE(is_floating(DType::kBFloat16));
  EXPECT_FALSE(is_floating(DType::kInt64));
  static_assert(dtype_of<bfloat16> == DType::kBFloat16);
  static_assert(std::is_trivially_copyable_v<bfloat16> && sizeof(bfloat16) == 2);
}

TEST(Ch01_BFloat16, ReadingIsExact) {
  EXPECT_EQ(bfloat16_to_float({0x3F80}), 1.0f);
  EXPECT_EQ(bfloat16_to_float({0xC020}), -2.5f);
  EXPECT_EQ(bfloat16_to_float({0x0001}), std::ldexp(1.0f, -133));  // smallest denormal
  EXPECT_EQ(bfloat16_to_float({0x7F7F}), 0x1.FEp127f);             // largest finite
  EXPECT_EQ(bfloat16_to_float({0xFF80}), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(bfloat16_to_float({0x8000})));
  EXPECT_TRUE(std::isnan(bfloat16_to_float({0x7FC0})));
  // Every pattern reads as the float whose upper half it is.
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bfloat16_to_float({static_cast<uint16_t>(b)});
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16) << "bits " << b;
  }
}

TEST(Ch01_BFloat16, StorageViewsAndPrinting) {
  Tensor t = from_vector(kValues, {2, 3});
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  EXPECT_EQ(t.storage()->nbytes(), 12u);
  EXPECT_EQ(t.at<bfloat16>({1, 0}).bits, 0x7F80);
  EXPECT_EQ(t.select(0, 0).select(0, 1).item(), -2.5);
  // Views and bfloat16 -> bfloat16 copies on the CPU keep the bits (no rounding involved).
  const auto tr = t.transpose(0, 1).contiguous().to_vector<bfloat16>();
  const std::vector<uint16_t> want = {0x3F80, 0x7F80, 0xC020, 0x8000, 0x3E20, 0x7FC0};
  ASSERT_EQ(tr.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(tr[i].bits, want[i]) << i;
  EXPECT_EQ(t.to_string(),
            "tensor([[ 1.0000, -2.5000,  0.1562],\n"
            "        [    inf, -0.0000,     nan]], dtype=bfloat16)");
  EXPECT_EQ(empty({4}, {.dtype = DType::kBFloat16}).describe(),
            "Tensor(shape=[4], dtype=bfloat16, device=cpu)");
}

TEST(Ch01_BFloat16, KernelsWithoutBFloat16SupportSayWhich) {
  EXPECT_TT_ERROR(dispatch_dtype(DType::kBFloat16, "my_op", []<typename T>() {}), "my_op",
                  "bfloat16");
  EXPECT_TT_ERROR(dispatch_floating(DType::kBFloat16, "my_op", []<typename T>() {}), "my_op",
                  "bfloat16");
}

TEST(Ch01_BFloat16, ConversionsNeedChapter11) {
  ASSERT_FALSE(has_bfloat16_cast()) << "chapter 01's tests do not link chapter 11";
  Tensor t = from_vector(kValues);
  EXPECT_TT_ERROR(tensor({1.5f}).to(DType::kBFloat16), "float32 -> bfloat16", "cpu", "chapter 11",
                  "ch11.1");
  EXPECT_TT_ERROR(t.to(DType::kFloat64), "bfloat16 -> float32", "chapter 11");
  EXPECT_TT_ERROR(zeros({2}, {.dtype = DType::kBFloat16}), "Tensor::fill_", "chapter 11");
  EXPECT_TT_ERROR(arange(0, 4, 1, {.dtype = DType::kBFloat16}), "chapter 11");
}

TEST(Ch01_BFloat16, NpyHoldsTheFloat32Values) {
  const testing::TempDir dir;
  const std::string path = dir.file("bf16.npy");
  Tensor t = from_vector(kValues, {3, 2}).transpose(0, 1);
  save_npy(path, t);
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.dtype, NpyDType::kFloat32);
  EXPECT_EQ(a.shape, (Shape{2, 3}));
  const std::vector<float> v = load_npy(path).to_vector<float>();
  const std::vector<uint16_t> want = {0x3F80, 0x3E20, 0x8000, 0xC020, 0x7F80, 0x7FC0};
  ASSERT_EQ(v.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(v[i]), static_cast<uint32_t>(want[i]) << 16) << i;
  }
}

}  // namespace
}  // namespace tt
