// Tests of chapter 02: the kernel registry, signature checks, the first kernels and binary_op.
#include "tt/ops.h"
#include "tt/testing.h"

namespace tt {
namespace {

// Two registrations on consecutive lines of one file: TT_CONCAT must expand __COUNTER__, or
// both would define the same variable and this file would not compile.
int64_t test_kernel_a(int64_t x) {
  return x + 1;
}
int64_t test_kernel_b(int64_t x) {
  return x * 10;
}
TT_REGISTER_KERNEL("test.a", DeviceType::kCPU, test_kernel_a);
TT_REGISTER_KERNEL("test.b", DeviceType::kCPU, test_kernel_b);
// Two kernels for the same (op, device): find() must report it rather than pick one.
void dup_kernel_1() {}
void dup_kernel_2() {}
TT_REGISTER_KERNEL("test.dup", DeviceType::kCPU, dup_kernel_1);
TT_REGISTER_KERNEL("test.dup", DeviceType::kCPU, dup_kernel_2);

// ----- ch02.1 find -----------------------------------------------------------------------------

TEST(Ch02_1_Find, FindsEveryStaticRegistration) {
  auto& reg = KernelRegistry::instance();
  EXPECT_EQ(reg.find<int64_t(int64_t)>("test.a", DeviceType::kCPU)(1), 2);
  EXPECT_EQ(call_kernel<int64_t(int64_t)>("test.b", Device::cpu(), 4), 40);
  EXPECT_EQ(reg.find<BinaryKernel>("add", DeviceType::kCPU), &cpu::add);
}

TEST(Ch02_1_Find, MissingDeviceListsWhatExists) {
  auto& reg = KernelRegistry::instance();
  EXPECT_TT_ERROR(reg.find<BinaryKernel>("add", DeviceType::kCUDA), "add", "cuda",
                  "registered for: cpu");
}

TEST(Ch02_1_Find, UnknownOpListsKnownOps) {
  auto& reg = KernelRegistry::instance();
  EXPECT_TT_ERROR(reg.find<BinaryKernel>("no_such_op", DeviceType::kCPU), "no_such_op",
                  "unknown op", "add", "mul");
}

TEST(Ch02_1_Find, DuplicateRegistrationIsReported) {
  auto& reg = KernelRegistry::instance();
  EXPECT_TT_ERROR(reg.find<void()>("test.dup", DeviceType::kCPU), "test.dup", "2 kernels",
                  "test_dispatcher.cc");
}

TEST(Ch02_1_Find, WrongSignatureThroughFind) {
  auto& reg = KernelRegistry::instance();
  EXPECT_TT_ERROR(reg.find<double(double)>("test.a", DeviceType::kCPU), "test.a", "long (long)",
                  "double (double)");
}

// ----- ch02.2 signature check ------------------------------------------------------------------

TEST(Ch02_2_Signature, MismatchNamesBothSignatures) {
  KernelEntry e;
  e.op = "matmul";
  e.device = DeviceType::kCUDA;
  e.signature = typeid(BinaryKernel);
  e.signature_name = demangled_type_name(typeid(BinaryKernel));
  EXPECT_NO_THROW(check_kernel_signature(e, typeid(BinaryKernel), e.signature_name));
  EXPECT_TT_ERROR(
      check_kernel_signature(e, typeid(void(const Tensor&)), "void (tt::Tensor const&)"), "matmul",
      "cuda", "void (tt::Tensor const&, tt::Tensor const&, tt::Tensor const&)",
      "void (tt::Tensor const&)");
}

TEST(Ch02_2_Signature, ReferenceAndValueParametersDiffer) {
  KernelEntry e;
  e.op = "f";
  e.signature = typeid(void(const Tensor&));
  e.signature_name = "void (tt::Tensor const&)";
  EXPECT_TT_ERROR(check_kernel_signature(e, typeid(void(Tensor)), "void (tt::Tensor)"), "f");
}

// ----- ch02.3 kernels --------------------------------------------------------------------------

TEST(Ch02_3_Kernels, ContiguousFloat) {
  Tensor a = tensor({1, 2, 3}), b = tensor({10, 20, 30}), out = empty({3});
  cpu::add(out, a, b);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{11, 22, 33}));
  cpu::sub(out, a, b);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{-9, -18, -27}));
  cpu::mul(out, a, b);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{10, 40, 90}));
  cpu::div(out, b, a);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{10, 10, 10}));
}

TEST(Ch02_3_Kernels, StridedAndBroadcastInputs) {
  // a: transposed [2, 3] view; b: a row broadcast with stride 0.
  Tensor base = from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor a(base.storage(), {2, 3}, {1, 2}, 0, DType::kFloat64);  // [[0,2,4],[1,3,5]]
  Tensor row = from_vector(std::vector<double>{100, 200, 300}, {3});
  Tensor b(row.storage(), {2, 3}, {0, 1}, 0, DType::kFloat64);
  Tensor out = empty({2, 3}, {.dtype = DType::kFloat64});
  cpu::add(out, a, b);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{100, 202, 304, 101, 203, 305}));
}

TEST(Ch02_3_Kernels, Int64AndDivisionByZero) {
  Tensor a = tensor_i64({7, -7}), b = tensor_i64({2, 2}),
         out = empty({2}, {.dtype = DType::kInt64});
  cpu::div(out, a, b);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{3, -3}));
  EXPECT_TT_ERROR(cpu::div(out, a, tensor_i64({1, 0})), "div", "division by zero");
}

// ----- ch02.4 binary_op ------------------------------------------------------------------------

TEST(Ch02_4_BinaryOp, ValidatesInputs) {
  Tensor a = zeros({2, 3});
  EXPECT_TT_ERROR(binary_op("add", a, zeros({3, 2})), "add", "[2, 3]", "[3, 2]");
  EXPECT_TT_ERROR(binary_op("mul", a, zeros({2, 3}, {.dtype = DType::kFloat64})), "mul", "float32",
                  "float64");
}

TEST(Ch02_4_BinaryOp, DispatchesToTheRegisteredKernel) {
  Tensor a = tensor({1, 2}), b = tensor({3, 4});
  EXPECT_EQ(binary_op("add", a, b).to_vector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(binary_op("div", b, a).to_vector<float>(), (std::vector<float>{3, 2}));
  EXPECT_TT_ERROR(binary_op("pow", a, b), "pow", "unknown op");
}

TEST(Ch02_Registry, ListNamesFileAndSignature) {
  bool found = false;
  for (const auto& line : KernelRegistry::instance().list()) {
    if (line.rfind("add [cpu]", 0) == 0) {
      found = true;
      EXPECT_NE(line.find("binary_ops.cc"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tt
