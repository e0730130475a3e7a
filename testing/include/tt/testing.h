/// @file testing.h
/// @brief Test helpers of the chapters: tensor comparison with a useful report and
/// reference-data paths, plus everything of testing_common.h (error expectations, CUDA skips).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tt/tensor.h"
#include "tt/testing_common.h"

namespace tt::testing {

/// Compares two tensors elementwise: |actual - expected| <= atol + rtol * |expected| everywhere
/// (NaN only matches NaN, an infinity only the same infinity). On failure the message gives both shapes and dtypes, the first
/// mismatching index with both values, the max abs and rel error, and the tolerance.
::testing::AssertionResult tensor_near(const char* actual_expr, const char* expected_expr,
                                       const char* atol_expr, const char* rtol_expr,
                                       const Tensor& actual, const Tensor& expected, double atol,
                                       double rtol);

/// Absolute path of a file under reference_data/ (an absolute `relative` is returned as is).
std::string reference_path(const std::string& relative);

}  // namespace tt::testing

/// EXPECT that two tensors agree within atol + rtol*|expected| (see tt::testing::tensor_near).
#define EXPECT_TENSOR_NEAR(actual, expected, atol, rtol) \
  EXPECT_PRED_FORMAT4(::tt::testing::tensor_near, actual, expected, atol, rtol)
/// ASSERT form of EXPECT_TENSOR_NEAR.
#define ASSERT_TENSOR_NEAR(actual, expected, atol, rtol) \
  ASSERT_PRED_FORMAT4(::tt::testing::tensor_near, actual, expected, atol, rtol)
