// Exercise ch06.5: the strided, converting CUDA copy behind copy_, contiguous(), to(dtype) and
// device transfers of non-contiguous tensors. Conversions are static_casts on both sides, so
// results must equal the CPU backend's bit for bit.
#include <string>
#include <vector>

#include "ch06_test_util.h"

namespace tt {
namespace {

using test06::CudaTest;
using test06::random_tensor;
using test06::same_values;
using test06::strided_view;

using Ch06_5_CudaCopy = CudaTest;

TEST_F(Ch06_5_CudaCopy, DtypeConversionOfContiguousTensors) {
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kInt64};
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      if (from == to) continue;
      for (int64_t n : test06::kOddSizes) {
        const Tensor x = random_tensor({n}, from, static_cast<uint64_t>(n) + 3);
        const Tensor converted = x.to(Device::cuda()).to(to);  // converted on the GPU
        ASSERT_EQ(converted.device(), Device::cuda(0));
        EXPECT_TRUE(same_values(converted, x.to(to)))
            << dtype_name(from) << " -> " << dtype_name(to) << ", n = " << n;
      }
    }
  }
}

TEST_F(Ch06_5_CudaCopy, ContiguousOfTransposedAndSlicedViews) {
  for (int64_t n : {int64_t{1}, int64_t{127}, int64_t{128}, int64_t{129}, int64_t{4097}}) {
    const Tensor host = random_tensor({n, 5}, DType::kFloat32, 21);
    const Tensor dev = host.to(Device::cuda());
    const Tensor t = strided_view(dev, {5, n}, {1, 5}).contiguous();
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_TRUE(same_values(t, strided_view(host, {5, n}, {1, 5}))) << "transposed, n = " << n;
    const int64_t rows = (n + 1) / 2;
    const Tensor s = strided_view(dev, {rows, 2}, {10, 2}, 1).contiguous();
    EXPECT_TRUE(same_values(s, strided_view(host, {rows, 2}, {10, 2}, 1)))
        << "stepped slice, n = " << n;
  }
}

TEST_F(Ch06_5_CudaCopy, CopyIntoNonContiguousDestination) {
  // Write a [7, 129] source into the transpose of a [129, 7] tensor, converting to float64.
  const Tensor src_host = random_tensor({7, 129}, DType::kFloat32, 31);
  const Tensor dst_host = zeros({129, 7}, {DType::kFloat64});
  const Tensor dst_dev = dst_host.to(Device::cuda());
  strided_view(dst_dev, {7, 129}, {1, 7}).copy_(src_host.to(Device::cuda()));
  strided_view(dst_host, {7, 129}, {1, 7}).copy_(src_host);
  EXPECT_TRUE(same_values(dst_dev, dst_host));
}

TEST_F(Ch06_5_CudaCopy, BroadcastSourceFillsRows) {
  const Tensor row = random_tensor({1, 768}, DType::kFloat64, 41);
  const Tensor dst = empty({129, 768}, {DType::kFloat32, Device::cuda()});
  dst.copy_(strided_view(row.to(Device::cuda()), {129, 768}, {0, 1}));
  EXPECT_TRUE(same_values(dst, strided_view(row, {129, 768}, {0, 1}).to(DType::kFloat32)));
}

TEST_F(Ch06_5_CudaCopy, NonContiguousDeviceToHost) {
  // to(cpu) of a CUDA view packs it on the GPU first, then copies contiguous bytes.
  const Tensor host = random_tensor({33, 65}, DType::kInt64, 51);
  const Tensor view = strided_view(host.to(Device::cuda()), {65, 11}, {1, 3 * 65});
  const Tensor back = view.to(Device::cpu());
  EXPECT_TRUE(same_values(back, strided_view(host, {65, 11}, {1, 3 * 65})));
}

TEST_F(Ch06_5_CudaCopy, HostToNonContiguousDevice) {
  // copy_ from the host into a CUDA view: staged contiguous on the GPU, then scattered.
  const Tensor src = random_tensor({4, 129}, DType::kFloat32, 61);
  const Tensor dst = zeros({129, 4}).to(Device::cuda());
  strided_view(dst, {4, 129}, {1, 4}).copy_(src);
  const Tensor expected = zeros({129, 4});
  strided_view(expected, {4, 129}, {1, 4}).copy_(src);
  EXPECT_TRUE(same_values(dst, expected));
}

TEST_F(Ch06_5_CudaCopy, SameDtypeContiguousIsAMemcpy) {
  // The given fast path (cudaMemcpyAsync), as a baseline for the kernel tests above.
  const Tensor x = random_tensor({4097}, DType::kFloat64, 71).to(Device::cuda());
  const Tensor y = empty({4097}, {DType::kFloat64, Device::cuda()});
  y.copy_(x);
  EXPECT_TRUE(same_values(y, x));
}

TEST_F(Ch06_5_CudaCopy, ShapeMismatchIsRejected) {
  const Tensor a = empty({4}, {DType::kFloat32, Device::cuda()});
  const Tensor b = empty({5}, {DType::kFloat32, Device::cuda()});
  EXPECT_TT_ERROR(a.copy_(b), "[4]", "[5]");
}

}  // namespace
}  // namespace tt
