// bfloat16 tensors once chapter 11 is linked: Tensor::to / copy_ / fill_ and the creation
// functions go through the "cast" kernel, whose rounding is exercise ch11.1.
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "tt/autograd.h"
#include "tt/bfloat16_cast.h"
#include "tt/dispatcher.h"
#include "tt/mixed_precision.h"
#include "tt/npy_tensor.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_reduce.h"
#include "tt/temp_dir.h"
#include "tt/testing.h"

namespace tt {
namespace {

std::vector<uint16_t> bits(const Tensor& t) {
  std::vector<uint16_t> out;
  for (bfloat16 v : t.to_vector<bfloat16>()) out.push_back(v.bits);
  return out;
}
std::vector<uint16_t> rounded(const std::vector<float>& values) {
  std::vector<uint16_t> out;
  for (float v : values) out.push_back(float_to_bfloat16_rne(v).bits);
  return out;
}
// The values a tensor test sweeps: ordinary, ties, tiny, huge, signed zeros, infinities.
const std::vector<float> kValues = {1.0f,    -2.5f,   0.1f,      1.0f / 3,  1.00390625f,
                                    -0.0f,   3e38f,   -3.39e38f, 1e-40f,    -1e-39f,
                                    65504.f, 1.5e-5f, INFINITY,  -INFINITY, 7.0f};

TEST(Ch11_1_TensorCast, CastIsInstalledAndRegistered) {
  EXPECT_TRUE(has_bfloat16_cast());
  EXPECT_TRUE(KernelRegistry::instance().has("cast", DeviceType::kCPU));
}

TEST(Ch11_1_TensorCast, Float32ToBFloat16AndBack) {
  const Tensor x = from_vector(kValues, {3, 5});
  const Tensor h = x.to(DType::kBFloat16);
  EXPECT_EQ(h.dtype(), DType::kBFloat16);
  EXPECT_EQ(h.shape(), x.shape());
  EXPECT_EQ(bits(h), rounded(kValues));
  // Back to float32: exact, the float whose upper half each element is.
  const std::vector<float> back = h.to(DType::kFloat32).to_vector<float>();
  const std::vector<uint16_t> b = bits(h);
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), static_cast<uint32_t>(b[i]) << 16) << i;
  }
}

TEST(Ch11_1_TensorCast, AnyStridesAndBroadcast) {
  const Tensor x = from_vector(kValues, {3, 5});
  // A transposed source into a contiguous bfloat16 tensor, and into a transposed destination.
  const Tensor ht = x.transpose(0, 1).to(DType::kBFloat16);
  EXPECT_EQ(bits(ht), bits(x.transpose(0, 1).contiguous().to(DType::kBFloat16)));
  Tensor dst = empty({5, 3}, {DType::kBFloat16});
  dst.transpose(0, 1).copy_(x);
  EXPECT_EQ(bits(dst), bits(ht));
  // A broadcast row into every row; a bfloat16 view back to float32.
  Tensor rows = empty({4, 5}, {DType::kBFloat16});
  rows.copy_(x.select(0, 1));
  const std::vector<uint16_t> row = rounded({kValues.begin() + 5, kValues.begin() + 10});
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(bits(rows.select(0, r).contiguous()), row) << r;
  const Tensor col = ht.select(1, 2).to(DType::kFloat32);  // a strided bfloat16 column
  EXPECT_EQ(col.to_vector<float>(),
            x.select(0, 2).to(DType::kBFloat16).to(DType::kFloat32).to_vector<float>());
}

TEST(Ch11_1_TensorCast, Float64AndInt64GoThroughFloat32) {
  // 1 + 2^-8 + 2^-30 as float64 lies just above the tie between 1 and 1 + 2^-7; float32 cannot
  // hold 2^-30 and rounds it to the tie 1 + 2^-8, which then rounds to the even 1. This double
  // rounding is the documented behaviour (chapter 11 README, Design).
  const double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  const Tensor d = from_vector(std::vector<double>{v, -1e300, 0.1});
  EXPECT_EQ(bits(d.to(DType::kBFloat16)), (std::vector<uint16_t>{0x3F80, 0xFF80, 0x3DCD}));
  const Tensor i = from_vector(std::vector<int64_t>{0, 1, 257, -1000001});
  EXPECT_EQ(bits(i.to(DType::kBFloat16)), rounded({0.0f, 1.0f, 257.0f, -1000001.0f}));
  const Tensor h = from_vector(std::vector<bfloat16>{{0x4049}, {0xC2F7}});  // 3.140625, -123.5
  EXPECT_EQ(h.to(DType::kFloat64).to_vector<double>(), (std::vector<double>{3.140625, -123.5}));
  EXPECT_EQ(h.to(DType::kInt64).to_vector<int64_t>(), (std::vector<int64_t>{3, -123}));
}

TEST(Ch11_1_TensorCast, CreationFunctions) {
  const TensorOptions bf16{DType::kBFloat16};
  EXPECT_EQ(bits(zeros({3}, bf16)), (std::vector<uint16_t>{0, 0, 0}));
  EXPECT_EQ(bits(ones({2}, bf16)), (std::vector<uint16_t>{0x3F80, 0x3F80}));
  EXPECT_EQ(bits(full({2}, 0.1, bf16)), rounded({0.1f, 0.1f}));
  EXPECT_EQ(bits(full({1}, -0.0, bf16)), (std::vector<uint16_t>{0x8000}));
  EXPECT_EQ(bits(arange(0, 5, 1.25, bf16)), rounded({0.0f, 1.25f, 2.5f, 3.75f}));
  Generator g1(7), g2(7);
  EXPECT_EQ(bits(randn({64}, g1, bf16)), bits(randn({64}, g2).to(DType::kBFloat16)));
  Tensor t = zeros({2, 3}, bf16);
  t.select(1, 1).fill_(1.0 / 3);  // a strided fill
  EXPECT_EQ(bits(t), (std::vector<uint16_t>{0, 0x3EAB, 0, 0, 0x3EAB, 0}));
  EXPECT_EQ(full({2}, 0.1, bf16).to_string(), "tensor([0.1001, 0.1001], dtype=bfloat16)");
  EXPECT_TRUE(allclose(full({2}, 0.1, bf16), full({2}, 0.10009765625), 0, 0));
}

TEST(Ch11_1_TensorCast, NpyRoundTripOfEveryPattern) {
  // Saved as float32 values, loaded back with .to(DType::kBFloat16): every bfloat16 comes back
  // with its bits, a signaling NaN as its quiet version (the conversion's NaN rule).
  std::vector<bfloat16> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = {static_cast<uint16_t>(b)};
  const Tensor t = from_vector(all, {256, 256});
  const testing::TempDir dir;
  const std::string path = dir.file("bf16_all.npy");
  save_npy(path, t);
  const Tensor f = load_npy(path);
  ASSERT_EQ(f.dtype(), DType::kFloat32);
  ASSERT_EQ(f.shape(), (Shape{256, 256}));
  const std::vector<uint16_t> back = bits(f.to(DType::kBFloat16));
  for (uint32_t b = 0; b < 65536; ++b) {
    const bool nan = (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
    ASSERT_EQ(back[b], nan ? (b | 0x40u) : b) << "pattern 0x" << std::hex << b;
  }
}

TEST(Ch11_1_TensorCast, OpsWithoutBFloat16KernelsSaySo) {
  const Tensor a = ones({2}, {DType::kBFloat16});
  EXPECT_TT_ERROR(add(a, a), "bfloat16");
  EXPECT_TT_ERROR(call_kernel<CastKernel>("cast", Device::cpu(), empty({2}, {DType::kFloat64}), a),
                  "cpu::cast", "bfloat16 -> float64");
}

// ----- add_bias_bf16: a float32 bias on a bfloat16 tensor, one rounding ---------------------

/// A bfloat16 [rows, n] of seeded values and a float32 bias [n], on `device`.
std::pair<Tensor, Tensor> bias_case(int64_t rows, int64_t n, Device device = Device::cpu()) {
  Generator gen(31);
  const Tensor y = randn({rows, n}, gen).to(DType::kBFloat16).to(device);
  const Tensor b = randn({n}, gen).to(device);
  return {y, b};
}

TEST(Ch11_AddBiasBf16, EqualsTheThreeStepCompositionBitForBitAndItsGradient) {
  auto [y, b] = bias_case(37, 45);
  const Tensor composed = add(y.to(DType::kFloat32), b).to(DType::kBFloat16);
  EXPECT_EQ(bits(add_bias_bf16(y, b)), bits(composed));
  // Gradients: dy to y unchanged, dbias the float32 column sums of dy.
  y.set_requires_grad(true);
  b.set_requires_grad(true);
  Generator gen(5);
  const Tensor dy = randn({37, 45}, gen).to(DType::kBFloat16);
  autograd::backward(add_bias_bf16(y, b), dy);
  EXPECT_EQ(bits(y.grad()), bits(dy));
  EXPECT_TENSOR_NEAR(b.grad(), sum(dy.to(DType::kFloat32), {0}), 1e-5, 1e-6);
  // A 3-D y (the bias along the last dim) and a strided view of y.
  const Tensor b9 = b.detach().narrow(0, 0, 9).contiguous();
  for (const Tensor& v : {y.detach().view({37, 5, 9}), y.detach().narrow(1, 3, 9)}) {
    EXPECT_EQ(bits(add_bias_bf16(v, b9)),
              bits(add(v.to(DType::kFloat32), b9).to(DType::kBFloat16)));
  }
}

TEST(Ch11_AddBiasBf16, WrongDtypesOrShapesNameTheOpAndTheTensors) {
  // (Named tensors, not a structured binding: the checks capture them in lambdas.)
  const std::pair<Tensor, Tensor> yb = bias_case(4, 8);
  const Tensor y = yb.first, b = yb.second;
  EXPECT_TT_ERROR(add_bias_bf16(y.to(DType::kFloat32), b), "add_bias_bf16", "float32");
  EXPECT_TT_ERROR(add_bias_bf16(y, b.to(DType::kBFloat16)), "add_bias_bf16", "bias");
  EXPECT_TT_ERROR(add_bias_bf16(y, b.narrow(0, 0, 7)), "add_bias_bf16", "[7]");
}

TEST(Ch11_AddBiasBf16, KernelsCheckTheirTensorsByOneRule) {
  // The CPU kernels called directly: the checks the CPU and CUDA kernels share
  // (check_add_bias_bf16_kernel, check_bias_grad_bf16_kernel) name the kernel and the tensors.
  const std::pair<Tensor, Tensor> yb = bias_case(4, 8);
  const Tensor y = yb.first, b = yb.second;
  const Tensor out = empty({4, 8}, {.dtype = DType::kBFloat16});
  EXPECT_TT_ERROR(cpu::add_bias_bf16(empty({4, 7}, {.dtype = DType::kBFloat16}), y, b),
                  "cpu::add_bias_bf16", "[4, 7]");
  const Tensor strided = empty({4, 16}, {.dtype = DType::kBFloat16}).narrow(1, 0, 8);
  EXPECT_TT_ERROR(cpu::add_bias_bf16(out, strided, b), "cpu::add_bias_bf16", "contiguous");
  EXPECT_TT_ERROR(check_add_bias_bf16_kernel("k", DeviceType::kCUDA, out, y, b), "k",
                  "a CUDA device");
  const Tensor dbias = empty({8}, {.dtype = DType::kFloat32});
  EXPECT_TT_ERROR(cpu::bias_grad_bf16(dbias, y.to(DType::kFloat32)), "cpu::bias_grad_bf16",
                  "float32");
  EXPECT_TT_ERROR(cpu::bias_grad_bf16(empty({7}, {.dtype = DType::kFloat32}), y),
                  "cpu::bias_grad_bf16", "[7]");
  EXPECT_TT_ERROR(check_bias_grad_bf16_kernel("k", DeviceType::kCUDA, dbias, y), "k", "CUDA");
  cpu::add_bias_bf16(out, y, b);  // and the right tensors pass
  cpu::bias_grad_bf16(dbias, y);
  EXPECT_EQ(bits(out), bits(add_bias_bf16(y, b)));
}

}  // namespace
}  // namespace tt
