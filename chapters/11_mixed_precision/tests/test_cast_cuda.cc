// The CUDA "cast" kernel against the CPU one (whose rounding is exercise ch11.1), bit for bit.
// Every test skips without a GPU.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"
#include "tt/mixed_precision.h"
#include "tt/testing.h"

namespace tt {
namespace {

const Device kCuda = Device::cuda(0);

std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out;
  for (bfloat16 v : t.to(Device::cpu()).to_vector<bfloat16>()) out.push_back(v.bits);
  return out;
}
bool is_nan_bits(uint16_t b) {
  return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
}

// The float32 patterns compared: every bfloat16 with its dropped half 0, just below, at and just
// above the tie, all ones, and 1 million random patterns (every class: denormals, NaNs, ...).
std::vector<float> test_floats() {
  std::vector<float> v;
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      v.push_back(std::bit_cast<float>(hi << 16 | lo));
    }
  }
  std::mt19937 rng(2026);
  for (int i = 0; i < 1000000; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

TEST(Ch11_1_CastCuda, RoundingMatchesTheCpuBitForBit) {
  TT_SKIP_IF_NO_CUDA();
  const std::vector<float> values = test_floats();
  const Tensor x = from_vector(values);
  const std::vector<uint16_t> cpu = bits(x.to(DType::kBFloat16));
  const std::vector<uint16_t> gpu = bits(x.to(kCuda).to(DType::kBFloat16));
  ASSERT_EQ(cpu.size(), gpu.size());
  int64_t nan_payload_differs = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (is_nan_bits(cpu[i])) {  // NaN: both NaN and quiet; the GPU may use its canonical NaN
      ASSERT_TRUE(is_nan_bits(gpu[i]) && (gpu[i] & 0x40u))
          << "float 0x" << std::hex << std::bit_cast<uint32_t>(values[i]) << ": CUDA gave 0x"
          << gpu[i];
      nan_payload_differs += cpu[i] != gpu[i];
      continue;
    }
    ASSERT_EQ(cpu[i], gpu[i]) << "float 0x" << std::hex << std::bit_cast<uint32_t>(values[i])
                              << " (" << std::hexfloat << values[i] << ")";
  }
  std::printf("%zu values equal; %lld NaNs with another payload on the GPU\n", cpu.size(),
              static_cast<long long>(nan_payload_differs));
}

TEST(Ch11_1_CastCuda, WideningIsExactForEveryPattern) {
  TT_SKIP_IF_NO_CUDA();
  std::vector<bfloat16> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = {static_cast<uint16_t>(b)};
  const std::vector<float> f = from_vector(all).to(kCuda).to(DType::kFloat32).to_vector<float>();
  ASSERT_EQ(f.size(), all.size());
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_EQ(std::bit_cast<uint32_t>(f[b]), b << 16) << "bfloat16 0x" << std::hex << b;
  }
}

TEST(Ch11_1_CastCuda, StridesBroadcastCreationAndOtherDtypes) {
  TT_SKIP_IF_NO_CUDA();
  Generator g(3);
  const Tensor x = randn({6, 7, 5}, g);
  const Tensor xd = x.to(kCuda);
  // Permuted source, permuted destination, bfloat16 -> bfloat16 strided copy on the device.
  EXPECT_EQ(bits(xd.permute({2, 0, 1}).to(DType::kBFloat16)),
            bits(x.permute({2, 0, 1}).contiguous().to(DType::kBFloat16)));
  Tensor dst = empty({5, 7, 6}, {DType::kBFloat16, kCuda});
  dst.permute({2, 1, 0}).copy_(xd);
  EXPECT_EQ(bits(dst), bits(x.permute({2, 1, 0}).contiguous().to(DType::kBFloat16)));
  EXPECT_EQ(
      bits(dst.transpose(0, 2).contiguous()),
      bits(x.transpose(0, 2).contiguous().permute({2, 1, 0}).contiguous().to(DType::kBFloat16)));
  // Broadcast fill, creation functions, float64 / int64 through float32.
  const TensorOptions bf16_cuda{DType::kBFloat16, kCuda};
  EXPECT_EQ(bits(full({3, 4}, 0.1, bf16_cuda)), bits(full({3, 4}, 0.1, {DType::kBFloat16})));
  EXPECT_EQ(bits(arange(-3, 3, 0.7, bf16_cuda)), bits(arange(-3, 3, 0.7, {DType::kBFloat16})));
  const Tensor d = x.to(DType::kFloat64);
  EXPECT_EQ(bits(d.to(kCuda).to(DType::kBFloat16)), bits(d.to(DType::kBFloat16)));
  const Tensor h = x.to(DType::kBFloat16);
  EXPECT_EQ(h.to(kCuda).to(DType::kFloat64).to(Device::cpu()).to_vector<double>(),
            h.to(DType::kFloat64).to_vector<double>());
  // Across devices: bfloat16 bits travel unchanged.
  EXPECT_EQ(bits(h.to(kCuda)), bits(h));
  EXPECT_EQ(bits(h.to(kCuda).clone()), bits(h));  // contiguous bfloat16 -> bfloat16 on the GPU
  EXPECT_EQ(bits(x.to(bf16_cuda.dtype).to(kCuda)), bits(xd.to(DType::kBFloat16)));
}

// add_bias_bf16's CUDA kernels: the forward equals the CPU kernel bit for bit (one rounding of a
// float32 sum); dbias, summed in another fixed order, within float32 rounding, and the same on
// every run. Shapes: columns not a multiple of 32, rows over one and two 256-row chunks.
TEST(Ch11_AddBiasBf16Cuda, MatchesTheCpuKernelsAndIsDeterministic) {
  TT_SKIP_IF_NO_CUDA();
  for (const auto& [rows, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 45}, {300, 33}, {70000, 40}, {8192, 1280}}) {
    SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(n));
    Generator gen(17);
    const Tensor y = randn({rows, n}, gen).to(DType::kBFloat16);
    const Tensor b = randn({n}, gen);
    const Tensor dy = randn({rows, n}, gen).to(DType::kBFloat16);
    EXPECT_EQ(bits(add_bias_bf16(y.to(kCuda), b.to(kCuda))), bits(add_bias_bf16(y, b)));
    const Tensor cpu_db = empty({n}), gpu_db = empty({n}, {DType::kFloat32, kCuda});
    cpu::bias_grad_bf16(cpu_db, dy);
    const Tensor dy_gpu = dy.to(kCuda);
    call_kernel<BiasGradBf16Kernel>("bias_grad_bf16", kCuda, gpu_db, dy_gpu);
    EXPECT_TENSOR_NEAR(gpu_db.to(Device::cpu()), cpu_db, 1e-5 * std::sqrt(double(rows)), 1e-5);
    const Tensor again = empty({n}, {DType::kFloat32, kCuda});
    call_kernel<BiasGradBf16Kernel>("bias_grad_bf16", kCuda, again, dy_gpu);
    const std::vector<float> a = gpu_db.to(Device::cpu()).to_vector<float>();
    const std::vector<float> c = again.to(Device::cpu()).to_vector<float>();
    EXPECT_EQ(a, c) << "not deterministic";
  }
}

}  // namespace
}  // namespace tt
