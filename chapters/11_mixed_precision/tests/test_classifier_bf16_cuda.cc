// The bfloat16 classifier on CUDA (cuBLASLt bfloat16 GEMMs, the row kernel on bfloat16 logits),
// with the same bounds as the CPU tests (classifier_bf16_test_util.h). Skip without a GPU.
#include "classifier_bf16_test_util.h"

namespace tt {
namespace {

using test11::check_classifier_case;

TEST(Ch11_ClassifierBf16Cuda, LossAndGradientsMatchFloat64OnRoundedInputs) {
  TT_SKIP_IF_NO_CUDA();
  check_classifier_case(2, 3, 16, 50, 64, 0, Device::cuda(), 2600);
  check_classifier_case(1, 5, 24, 37, 37, 0, Device::cuda(), 2610);
  check_classifier_case(4, 64, 64, 1000, 1024, 0, Device::cuda(), 2620);
}

TEST(Ch11_ClassifierBf16Cuda, ChunksAccumulateDwInFloat32) {
  TT_SKIP_IF_NO_CUDA();
  check_classifier_case(3, 5, 16, 70, 128, 2, Device::cuda(), 2630);
}

TEST(Ch11_ClassifierBf16Cuda, SplitVocabularyMatchesTheWholeOne) {
  TT_SKIP_IF_NO_CUDA();
  test11::check_split_vocabulary(Device::cuda(), 2640);
}

}  // namespace
}  // namespace tt
