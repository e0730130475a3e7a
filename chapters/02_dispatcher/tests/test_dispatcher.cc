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

// Kernels for the observer tests: tensors, a vector of tensors, a scalar; one that throws.
double observed_kernel(const Tensor& out, const std::vector<Tensor>& more, const Tensor& maybe,
                       double scale) {
  return scale * static_cast<double>(out.numel() + static_cast<int64_t>(more.size())) +
         (maybe.defined() ? 1.0 : 0.0);
}
void throwing_kernel(const Tensor& /*out*/) {
  throw Error("throwing_kernel: failed on purpose");
}
TT_REGISTER_KERNEL("test.observed", DeviceType::kCPU, observed_kernel);
TT_REGISTER_KERNEL("test.throwing", DeviceType::kCPU, throwing_kernel);

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

// ----- the kernel observer hook of call_kernel (given) ----------------------------------------

/// Records every begin/end it is told about, as "begin op" / "end op" lines plus the calls.
struct RecordingObserver final : KernelObserver {
  std::vector<std::string> events;
  std::vector<std::vector<KernelTensorArg>> tensors;
  std::uint64_t next_token = 41;
  std::vector<std::uint64_t> end_tokens;

  std::uint64_t on_kernel_begin(const KernelCall& call) override {
    events.push_back("begin " + call.op + " " + device_type_name(call.device.type));
    tensors.push_back(call.tensors);
    return ++next_token;
  }
  void on_kernel_end(const KernelCall& call, std::uint64_t token) noexcept override {
    events.push_back("end " + call.op);
    end_tokens.push_back(token);
  }
};

/// Installs an observer for one test and restores the previous one.
struct ScopedObserver {
  explicit ScopedObserver(KernelObserver* o) : previous(set_kernel_observer(o)) {}
  ~ScopedObserver() { set_kernel_observer(previous); }
  KernelObserver* previous;
};

TEST(Ch02_Observer, SeesEachCallWithItsTensors) {
  RecordingObserver rec;
  // A [3] row broadcast to [2, 3] (stride 0): its footprint is 3 floats, not 6.
  Tensor row = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor broadcast(row.storage(), {2, 3}, {0, 1}, 0, DType::kFloat32);
  Tensor out = empty({2, 3}), i64 = empty({5}, {.dtype = DType::kInt64});
  double result = 0;
  {
    ScopedObserver scope(&rec);
    EXPECT_EQ(kernel_observer(), &rec);
    result = call_kernel<double(const Tensor&, const std::vector<Tensor>&, const Tensor&, double)>(
        "test.observed", Device::cpu(), out, std::vector<Tensor>{broadcast, i64}, Tensor(), 2.0);
  }
  EXPECT_EQ(kernel_observer(), nullptr);
  EXPECT_EQ(result, 2.0 * (6 + 2));  // the kernel ran once, with its arguments
  ASSERT_EQ(rec.events, (std::vector<std::string>{"begin test.observed cpu", "end test.observed"}));
  EXPECT_EQ(rec.end_tokens, (std::vector<std::uint64_t>{42}));  // begin's token comes back
  // out, then the vector's two elements; the undefined tensor and the double are skipped.
  ASSERT_EQ(rec.tensors.size(), 1u);
  const auto& t = rec.tensors[0];
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].shape, (Shape{2, 3}));
  EXPECT_EQ(t[0].bytes, 6u * 4u);
  EXPECT_EQ(t[1].shape, (Shape{2, 3}));
  EXPECT_EQ(t[1].bytes, 3u * 4u);
  EXPECT_EQ(t[2].dtype, DType::kInt64);
  EXPECT_EQ(t[2].bytes, 5u * 8u);
}

TEST(Ch02_Observer, EndIsReportedWhenTheKernelThrows) {
  RecordingObserver rec;
  ScopedObserver scope(&rec);
  EXPECT_TT_ERROR(call_kernel<void(const Tensor&)>("test.throwing", Device::cpu(), empty({1})),
                  "failed on purpose");
  EXPECT_EQ(rec.events, (std::vector<std::string>{"begin test.throwing cpu", "end test.throwing"}));
}

TEST(Ch02_Observer, OffByDefaultAndRestorable) {
  EXPECT_EQ(kernel_observer(), nullptr);
  RecordingObserver a, b;
  EXPECT_EQ(set_kernel_observer(&a), nullptr);
  EXPECT_EQ(set_kernel_observer(&b), &a);
  EXPECT_EQ(set_kernel_observer(nullptr), &b);
  // Without an observer nothing is recorded anywhere.
  EXPECT_EQ(call_kernel<int64_t(int64_t)>("test.b", Device::cpu(), 4), 40);
  EXPECT_TRUE(a.events.empty());
  EXPECT_TRUE(b.events.empty());
}

}  // namespace
}  // namespace tt
