#include "sieve/core/status.h"

#include <gtest/gtest.h>

namespace sieve {
namespace {

Expected<int> parse_positive(int v) {
    if (v <= 0) return invalid_argument_error("value {} is not positive", v);
    return v;
}

Expected<int> doubled(int v) {
    SIEVE_ASSIGN_OR_RETURN(int x, parse_positive(v));
    return 2 * x;
}

Status check_both(int a, int b) {
    SIEVE_RETURN_IF_ERROR(parse_positive(a).status());
    SIEVE_RETURN_IF_ERROR(parse_positive(b).status());
    return Status::ok();
}

TEST(Status, CarriesCodeAndMessage) {
    Status s = unsupported_error("op {} on {}", "rms_norm", "avx2");
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), StatusCode::unsupported);
    EXPECT_EQ(s.to_string(), "unsupported: op rms_norm on avx2");
    EXPECT_EQ(s.with_context("layer 3").message(), "layer 3: op rms_norm on avx2");
    EXPECT_TRUE(Status::ok().is_ok());
}

TEST(Expected, PropagatesErrors) {
    EXPECT_EQ(*doubled(4), 8);
    auto bad = doubled(-1);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().message(), "value -1 is not positive");
    EXPECT_TRUE(check_both(1, 2).is_ok());
    EXPECT_EQ(check_both(1, 0).message(), "value 0 is not positive");
}

TEST(Expected, OkStatusIsNotAValue) {
    Expected<int> e = Status::ok();
    EXPECT_FALSE(e.has_value());
    EXPECT_EQ(e.status().code(), StatusCode::internal);
}

}  // namespace
}  // namespace sieve
