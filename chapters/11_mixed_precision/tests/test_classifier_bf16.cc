// The bfloat16 classifier on the CPU (chapter 10's fused classifier with bfloat16 logits through
// the cuBLASLt emulation), against float64 on the bfloat16-rounded values; bounds derived in
// classifier_bf16_test_util.h.
#include "classifier_bf16_test_util.h"

namespace tt {
namespace {

using test11::check_classifier_case;

TEST(Ch11_ClassifierBf16, LossAndGradientsMatchFloat64OnRoundedInputs) {
  check_classifier_case(2, 3, 16, 50, 64, 0, Device::cpu(), 2500);  // padded Vp
  check_classifier_case(1, 5, 24, 37, 37, 0, Device::cpu(), 2510);  // odd V, no padding
}

TEST(Ch11_ClassifierBf16, ChunksAccumulateDwInFloat32) {
  check_classifier_case(3, 5, 16, 70, 128, 2, Device::cpu(), 2520);  // 8 chunks, last shorter
  check_classifier_case(3, 5, 16, 70, 70, 2, Device::cpu(), 2530);  // unpadded wte, padded per call
}

TEST(Ch11_ClassifierBf16, RejectsOtherDtypes) {
  const Tensor targets = zeros({1, 2}, {DType::kInt64});
  EXPECT_THROW(classifier_loss_bf16(zeros({1, 2, 8}), zeros({10, 8}), 10, targets), Error);
  EXPECT_THROW(classifier_loss_bf16(zeros({1, 2, 8}, {DType::kBFloat16}),
                                    zeros({10, 8}, {DType::kBFloat16}), 10, targets),
               Error);
}

TEST(Ch11_ClassifierBf16, SplitVocabularyMatchesTheWholeOne) {
  test11::check_split_vocabulary(Device::cpu(), 2540);
}

}  // namespace
}  // namespace tt
