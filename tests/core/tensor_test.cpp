#include "sieve/core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace sieve {
namespace {

TEST(Tensor, ZerosIsAlignedAndZeroed) {
    auto t = Tensor::zeros(DType::bf16, {3, 5});
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % Tensor::kAlignment, 0u);
    EXPECT_EQ(t->numel(), 15);
    EXPECT_EQ(t->nbytes(), 30u);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(t->as<uint16_t>()[i], 0);
    TensorView v = t->view();
    EXPECT_EQ(v.strides, (Shape{5, 1}));
    EXPECT_TRUE(v.is_contiguous());
}

TEST(Tensor, RejectsBadShapes) {
    auto neg = Tensor::zeros(DType::f32, {2, -1});
    ASSERT_FALSE(neg.has_value());
    EXPECT_EQ(neg.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(neg.status().message().find("[2, -1]"), std::string::npos);
    const int64_t big = std::numeric_limits<int64_t>::max() / 2;
    EXPECT_FALSE(Tensor::zeros(DType::f32, {big, 4}).has_value());
    EXPECT_FALSE(Tensor::zeros(DType::f32, {big / 2}).has_value());  // fits int64, not memory
}

TEST(Shape, NumelAndStrides) {
    EXPECT_EQ(shape_numel(Shape{}), 1);
    EXPECT_EQ(shape_numel(Shape{0, 7}), 0);
    EXPECT_EQ(shape_numel(Shape{2, 3, 4}), 24);
    EXPECT_FALSE(shape_numel(Shape{INT64_MAX, 2}).has_value());
    EXPECT_EQ(contiguous_strides(Shape{2, 3, 4}), (Shape{12, 4, 1}));
    EXPECT_EQ(shape_to_string(Shape{2, 3}), "[2, 3]");
}

}  // namespace
}  // namespace sieve
