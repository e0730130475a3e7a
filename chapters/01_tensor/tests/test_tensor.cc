// Tests of chapter 01's given code: creation, metadata, printing, devices, .npy conversion.
// (They rely on the exercises too, so on a fresh starter they fail with an exercise id.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tt/backend.h"
#include "tt/npy_tensor.h"
#include "tt/temp_dir.h"
#include "tt/tensor.h"
#include "tt/testing.h"

namespace tt {
namespace {

TEST(Ch01_Tensor, CreationFunctions) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Strides{3, 1}));
  EXPECT_EQ(z.dtype(), DType::kFloat32);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ones({2}, {.dtype = DType::kInt64}).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(full({2}, 2.5, {.dtype = DType::kFloat64}).to_vector<double>(),
            (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(arange(0, 5).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5, 0, -2, {.dtype = DType::kInt64}).to_vector<int64_t>(),
            (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(arange(0, 0).numel(), 0);
  EXPECT_EQ(scalar_tensor(3.0).dim(), 0);
  EXPECT_EQ(scalar_tensor(3.0).item(), 3.0);
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Strides{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), Strides{});
}

TEST(Ch01_Tensor, RandomIsSeededAndDeterministic) {
  Generator g1(42), g2(42), g3(43);
  Tensor a = randn({1000}, g1), b = randn({1000}, g2), c = randn({1000}, g3);
  EXPECT_TRUE(allclose(a, b, 0, 0));
  EXPECT_FALSE(allclose(a, c));
  // Moments of N(0, 1) over 1000 samples.
  const auto v = a.to_vector<float>();
  double mean = 0, var = 0;
  for (float x : v) mean += x;
  mean /= v.size();
  for (float x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(var, 1.0, 0.15);
  Tensor u = uniform({1000}, -2, 3, g1);
  for (float x : u.to_vector<float>()) {
    EXPECT_GE(x, -2.0f);
    EXPECT_LT(x, 3.0f);
  }
}

TEST(Ch01_Tensor, CopiesShareViewsDoNot) {
  Tensor a = arange(0, 6).view({2, 3});
  Tensor alias = a;  // same tensor
  EXPECT_TRUE(alias.is_same(a));
  Tensor c = a.clone();
  EXPECT_NE(c.data_ptr(), a.data_ptr());
  c.fill_(7);
  EXPECT_EQ(a.to_vector<float>()[0], 0.0f);
  EXPECT_TRUE(a.contiguous().is_same(a));  // no copy when already contiguous
}

TEST(Ch01_Tensor, IsContiguousIgnoresSizeOneDims) {
  Tensor a = zeros({3, 1, 4});
  Tensor odd(a.storage(), {3, 1, 4}, {4, 99, 1}, 0, DType::kFloat32);
  EXPECT_TRUE(odd.is_contiguous());
  Tensor tr(a.storage(), {4, 3}, {1, 4}, 0, DType::kFloat32);
  EXPECT_FALSE(tr.is_contiguous());
}

TEST(Ch01_Tensor, InvalidGeometryThrows) {
  auto storage = zeros({4}).storage();
  EXPECT_TT_ERROR(Tensor(storage, {2, 3}, {3, 1}, 0, DType::kFloat32), "[2, 3]", "storage");
  EXPECT_TT_ERROR(empty({2, -1}), "empty", "[2, -1]");
  EXPECT_TT_ERROR(Tensor().shape(), "undefined");
  EXPECT_TT_ERROR(zeros({2}).data<double>(), "float32");
  EXPECT_TT_ERROR(zeros({2}).item(), "item", "[2]");
  EXPECT_TT_ERROR(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), "[2, 2]");
}

TEST(Ch01_Tensor, HugeShapesAndNonFiniteRangesThrowBeforeAllocating) {
  // numel * element size must fit in int64: no signed overflow, no absurd allocation.
  EXPECT_TT_ERROR(empty({int64_t{1} << 40, int64_t{1} << 40}), "empty", "[1099511627776, ",
                  "2^63 bytes");
  EXPECT_TT_ERROR(empty({0, int64_t{1} << 62, 4}), "empty", "2^63 bytes");  // strides overflow
  EXPECT_EQ(empty({0, int64_t{1} << 40}).numel(), 0);
  EXPECT_TT_ERROR(arange(0, INFINITY), "arange", "finite", "inf");
  EXPECT_TT_ERROR(arange(0, NAN), "arange", "finite", "nan");
  EXPECT_TT_ERROR(arange(0, 1e30), "arange", "too many");
}

TEST(Ch01_Tensor, ZeroDimTensorsHaveNoDimToIndex) {
  // A 0-d tensor has no size(0): asking is an error, never a read past the shape.
  const Tensor s = scalar_tensor(5);
  EXPECT_TT_ERROR(s.size(0), "Tensor::size", "0-d");
  EXPECT_TT_ERROR(s.stride(-1), "Tensor::stride", "0-d");
  EXPECT_TT_ERROR(s.slice(0, 0, 1), "slice", "0-d");
  EXPECT_TT_ERROR(s.select(0, 0), "select", "0-d");
  EXPECT_TT_ERROR(s.narrow(0, 0, 1), "narrow", "0-d");
  EXPECT_TT_ERROR(s.transpose(0, 1), "transpose", "dim 1", "[]");
  // Like PyTorch, dims 0 and -1 name "the" dim of a 0-d tensor for transpose and squeeze.
  EXPECT_EQ(s.transpose(0, -1).item(), 5.0);
  EXPECT_EQ(s.squeeze(0).dim(), 0);
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1}));
  EXPECT_TT_ERROR(s.unsqueeze(2), "unsqueeze", "dim 2", "[-1, 0]", "[]");
}

TEST(Ch01_Tensor, DevicesParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::parse("cuda").str(), "cuda:0");
  EXPECT_TT_ERROR(Device::parse("gpu"), "gpu");
  EXPECT_TT_ERROR(Device::parse("cuda:x"), "cuda:x");
}

TEST(Ch01_Tensor, GpuTensorsNeedABackend) {
  if (has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "a CUDA backend is registered";
  EXPECT_TT_ERROR(zeros({2}, {.device = Device::cuda(0)}), "cuda");
}

TEST(Ch01_Print, PyTorchStyle) {
  EXPECT_EQ(arange(0, 4).view({2, 2}).to_string(), "tensor([[0., 1.],\n        [2., 3.]])");
  EXPECT_EQ(tensor({0.5f, -1.25f}).to_string(), "tensor([ 0.5000, -1.2500])");
  EXPECT_EQ(tensor_i64({1, 20}).to_string(), "tensor([ 1, 20])");
  EXPECT_EQ(scalar_tensor(2.5, {.dtype = DType::kFloat64}).to_string(),
            "tensor(2.5000, dtype=float64)");
  EXPECT_EQ(zeros({0}).to_string(), "tensor([], size=[0])");
  const std::string big = zeros({100, 100}).to_string();
  EXPECT_NE(big.find("..."), std::string::npos);
  EXPECT_NE(big.find("size=[100, 100]"), std::string::npos);
  Tensor p = zeros({2}).set_requires_grad();
  EXPECT_NE(p.to_string().find("requires_grad=True"), std::string::npos);
}

TEST(Ch01_Print, ThreeDimensionsSeparateBlocks) {
  EXPECT_EQ(arange(0, 4).view({2, 1, 2}).to_string(),
            "tensor([[[0., 1.]],\n\n        [[2., 3.]]])");
}

TEST(Ch01_Tensor, AutogradFieldsBasics) {
  Tensor t = zeros({2});
  EXPECT_FALSE(t.requires_grad());
  t.set_requires_grad();
  EXPECT_TRUE(t.requires_grad());
  EXPECT_TRUE(t.is_leaf());
  EXPECT_FALSE(t.detach().requires_grad());
  EXPECT_EQ(t.detach().data_ptr(), t.data_ptr());
  EXPECT_TT_ERROR(t.set_grad(zeros({3})), "set_grad", "[3]");
  EXPECT_TT_ERROR(zeros({2}, {.dtype = DType::kInt64}).set_requires_grad(), "int64");
}

TEST(Ch01_Tensor, LiveCountReturnsToBaseline) {
  const int64_t before = TensorImpl::live_count();
  {
    Tensor a = zeros({4, 4});
    Tensor b = a.view({16}).slice(0, 2, 8);
    EXPECT_EQ(TensorImpl::live_count(), before + 2);  // a and the slice (the view was a temporary)
  }
  EXPECT_EQ(TensorImpl::live_count(), before);
}

TEST(Ch01_CpuAllocator, LargeFreedBlocksComeBackWithoutTheSystem) {
  CpuAllocator alloc;
  CpuAllocator::release_cached();
  const std::size_t big = 3 * CpuAllocator::kCacheMinBytes + 8;  // rounded up to 64 bytes
  const AllocatorStats s0 = alloc.stats();
  void* p = alloc.allocate(big);
  ASSERT_NE(p, nullptr);
  alloc.deallocate(p, big);
  const AllocatorStats s1 = alloc.stats();
  EXPECT_EQ(s1.allocated, s0.allocated) << "a freed block is not in use";
  void* q = alloc.allocate(big);
  const AllocatorStats s2 = alloc.stats();
  EXPECT_EQ(s2.num_allocs, s0.num_allocs + 2);
  if (CpuAllocator::caching_enabled()) {
    EXPECT_EQ(s1.reserved, s1.allocated + big + 56) << "the freed block is held, rounded";
    EXPECT_EQ(q, p) << "the cached block of that size is handed out again";
    EXPECT_EQ(s2.num_system_allocs, s0.num_system_allocs + 1) << "only the first came from malloc";
    EXPECT_EQ(s2.reserved, s2.allocated) << "a block handed out is no longer cached";
  } else {  // AddressSanitizer builds and TT_CPU_CACHING=0: every block from the system
    EXPECT_EQ(s1.reserved, s1.allocated);
    EXPECT_EQ(s2.num_system_allocs, s0.num_system_allocs + 2);
  }
  // A size not in the cache, and a small block, come from the system.
  void* r = alloc.allocate(big + 4096);
  void* small = alloc.allocate(1000);
  EXPECT_EQ(alloc.stats().num_system_allocs, s2.num_system_allocs + 2);
  alloc.deallocate(small, 1000);
  EXPECT_EQ(alloc.stats().reserved, alloc.stats().allocated) << "small blocks are not cached";
  alloc.deallocate(r, big + 4096);
  alloc.deallocate(q, big);
  // The cache never holds more than the peak of the bytes in use (plus 1 MiB for rounding).
  EXPECT_LE(alloc.stats().reserved - alloc.stats().allocated,
            alloc.stats().peak_allocated + CpuAllocator::kCacheMinBytes);
  CpuAllocator::release_cached();
  EXPECT_EQ(alloc.stats().reserved, alloc.stats().allocated) << "release_cached frees every block";
}

TEST(Ch01_CpuAllocator, TheCacheKeepsAtMostThePeakDroppingItsOldestBlocks) {
  CpuAllocator alloc;
  CpuAllocator::release_cached();
  if (!CpuAllocator::caching_enabled()) {
    EXPECT_EQ(alloc.stats().reserved, alloc.stats().allocated) << "caching is off: nothing held";
    return;
  }
  // Blocks of growing sizes, each freed before the next (a sequence whose length grows every
  // step, as in generation without a KV cache), never reuse each other: the cache must not keep
  // them all: at most the peak (at least the largest block) plus 1 MiB stays cached.
  const std::size_t mib = CpuAllocator::kCacheMinBytes;
  std::size_t largest = 0;
  for (std::size_t k = 1; k <= 64; ++k) {
    const std::size_t n = k * mib + 64 * k;
    void* p = alloc.allocate(n);
    alloc.deallocate(p, n);
    largest = std::max(largest, n);
    const AllocatorStats s = alloc.stats();
    ASSERT_LE(s.reserved - s.allocated, s.peak_allocated + mib)
        << "after a block of " << n << " bytes";
  }
  // Never more than kCacheMaxBytes, whatever the peak: two blocks of 0.6 GiB (never touched, so
  // they cost address space only) push the peak past 1 GiB; only the newer stays cached.
  const std::size_t big = CpuAllocator::kCacheMaxBytes / 10 * 6;
  void* b1 = alloc.allocate(big);
  void* b2 = alloc.allocate(big);
  ASSERT_GT(alloc.stats().peak_allocated, CpuAllocator::kCacheMaxBytes);
  alloc.deallocate(b1, big);
  alloc.deallocate(b2, big);
  EXPECT_LE(alloc.stats().reserved - alloc.stats().allocated, CpuAllocator::kCacheMaxBytes);
  EXPECT_GE(alloc.stats().reserved - alloc.stats().allocated, big) << "the newer block is kept";
  CpuAllocator::release_cached();
  // The newest block is the one kept when the cache is full (the oldest went first).
  void* again = alloc.allocate(largest);
  const std::size_t sys = alloc.stats().num_system_allocs;
  alloc.deallocate(again, largest);
  void* last = alloc.allocate(largest);
  EXPECT_EQ(alloc.stats().num_system_allocs, sys) << "the last freed block is reused";
  alloc.deallocate(last, largest);
  CpuAllocator::release_cached();
}

TEST(Ch01_Npy, TensorRoundTrip) {
  const testing::TempDir dir;
  const std::string path = dir.file("roundtrip.npy");
  Tensor t = arange(0, 6, 1, {.dtype = DType::kFloat64}).view({2, 3}).transpose(0, 1);
  save_npy(path, t);
  Tensor r = load_npy(path);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vector<double>(), t.contiguous().to_vector<double>());
}

TEST(Ch01_Helpers, TensorNearReportsTheMismatch) {
  Tensor a = tensor({1, 2, 3}), b = tensor({1, 2.5, 3});
  auto r = testing::tensor_near("a", "b", "atol", "rtol", a, b, 1e-3, 0);
  ASSERT_FALSE(r);
  const std::string msg = r.message();
  EXPECT_NE(msg.find("index [1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max abs err 0.5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("atol=0.001"), std::string::npos) << msg;
  EXPECT_TRUE(testing::tensor_near("a", "a", "", "", a, a, 0, 0));
  EXPECT_FALSE(testing::tensor_near("a", "c", "", "", a, tensor({1, 2}), 1, 1));
}

TEST(Ch01_Tensor, ShapesWhoseSizesOverflowInt64AreRejected) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_TRUE(testing::throws_tt_error([&] { shape_numel({big, big}); }, {"overflows int64"}));
  // No elements, but the strides of the two big dims would overflow (e.g. a hostile .npy).
  EXPECT_TRUE(testing::throws_tt_error([&] { empty({0, big, big}); }, {"[0, 1099511627776, "}));
  EXPECT_TRUE(testing::throws_tt_error(
      [&] {
        contiguous_strides({0, big, big});
      },
      {"contiguous_strides", "overflow"}));
  EXPECT_EQ(shape_numel({0, big}), 0);
}

TEST(Ch01_Helpers, TensorNearMatchesNanAndInfinitiesExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = tensor({-inf, inf, nan, 1});
  EXPECT_TRUE(testing::tensor_near("x", "x", "", "", x, x, 0, 0));
  EXPECT_FALSE(testing::tensor_near("x", "y", "", "", x, tensor({inf, inf, nan, 1}), 1, 1));
  EXPECT_FALSE(testing::tensor_near("x", "y", "", "", x, tensor({-inf, inf, 0, 1}), 1, 1));
  EXPECT_FALSE(testing::tensor_near("x", "y", "", "", x, tensor({-inf, 1e30f, nan, 1}), 1, 1));
}

}  // namespace
}  // namespace tt
