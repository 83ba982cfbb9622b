// The Kafka-compatible primitive serdes: exact byte layouts and their errors.
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serde_test_util.hpp"
#include "sluice/serde/serde.hpp"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::hex;
using testing::round_trip;
using testing::serialization_error_of;

template <class S>
std::string bytes_of(const typename S::value_type& v) {
  std::string out = "garbage that must be overwritten";
  S::serialize(v, out);
  return out;
}

static_assert(serde_for<string_serde, std::string>);
static_assert(serde_for<bytes_serde, bytes>);
static_assert(serde_for<int16_serde, std::int16_t>);
static_assert(serde_for<int32_serde, std::int32_t>);
static_assert(serde_for<int64_serde, std::int64_t>);
static_assert(serde_for<float_serde, float>);
static_assert(serde_for<double_serde, double>);
static_assert(serde_for<bool_serde, bool>);
static_assert(serde_for<void_serde, std::monostate>);
static_assert(!serde_for<int32_serde, std::int64_t>);
static_assert(!serde_for<int32_serde, std::optional<std::int32_t>>);

TEST(primitive_serde, int32_is_big_endian_like_kafka_integer_serializer) {
  EXPECT_EQ(hex(bytes_of<int32_serde>(258)), "00 00 01 02");
  EXPECT_EQ(hex(bytes_of<int32_serde>(-1)), "ff ff ff ff");
  EXPECT_EQ(hex(bytes_of<int32_serde>(std::numeric_limits<std::int32_t>::min())), "80 00 00 00");
  for (std::int32_t v :
       {0, 1, -1, 258, std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min()})
    EXPECT_EQ(round_trip<int32_serde>(v), v);
}

TEST(primitive_serde, int64_is_big_endian_like_kafka_long_serializer) {
  EXPECT_EQ(hex(bytes_of<int64_serde>(258)), "00 00 00 00 00 00 01 02");
  EXPECT_EQ(hex(bytes_of<int64_serde>(0x0102030405060708)), "01 02 03 04 05 06 07 08");
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{-2}, std::numeric_limits<std::int64_t>::max(),
                         std::numeric_limits<std::int64_t>::min()})
    EXPECT_EQ(round_trip<int64_serde>(v), v);
}

TEST(primitive_serde, int16_is_big_endian_like_kafka_short_serializer) {
  EXPECT_EQ(hex(bytes_of<int16_serde>(-2)), "ff fe");
  EXPECT_EQ(round_trip<int16_serde>(-32768), -32768);
}

TEST(primitive_serde, unsigned_integers_use_the_same_fixed_width_layout) {
  EXPECT_EQ(hex(bytes_of<fixed_int_serde<std::uint32_t>>(0xfffffffe)), "ff ff ff fe");
  EXPECT_EQ(round_trip<fixed_int_serde<std::uint64_t>>(~0ULL), ~0ULL);
}

TEST(primitive_serde, double_is_ieee_big_endian_like_kafka_double_serializer) {
  EXPECT_EQ(hex(bytes_of<double_serde>(1.0)), "3f f0 00 00 00 00 00 00");
  EXPECT_EQ(hex(bytes_of<float_serde>(1.0f)), "3f 80 00 00");
  EXPECT_EQ(round_trip<double_serde>(-0.1), -0.1);
  EXPECT_TRUE(std::signbit(round_trip<double_serde>(-0.0)));
  EXPECT_TRUE(std::isnan(round_trip<double_serde>(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(round_trip<double_serde>(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_trip<float_serde>(3.5f), 3.5f);
}

TEST(primitive_serde, bool_is_one_byte_like_kafka_boolean_serializer) {
  EXPECT_EQ(hex(bytes_of<bool_serde>(true)), "01");
  EXPECT_EQ(hex(bytes_of<bool_serde>(false)), "00");
  EXPECT_TRUE(bool_serde::deserialize(std::string_view("\x07", 1)));
  EXPECT_FALSE(bool_serde::deserialize(std::string_view("\x00", 1)));
}

TEST(primitive_serde, strings_and_bytes_are_copied_unchanged) {
  const std::string binary("a\0\xff\n", 4);
  EXPECT_EQ(bytes_of<string_serde>("héllo"), "héllo");
  EXPECT_EQ(bytes_of<bytes_serde>(binary), binary);
  EXPECT_EQ(round_trip<bytes_serde>(binary), binary);
  EXPECT_EQ(round_trip<string_serde>(""), "");
}

TEST(primitive_serde, void_writes_nothing_and_accepts_only_empty_input) {
  EXPECT_EQ(bytes_of<void_serde>({}), "");
  EXPECT_THAT(serialization_error_of([] { void_serde::deserialize("x"); }),
              HasSubstr("expected no bytes for void, got 1"));
}

TEST(primitive_serde, wrong_length_names_the_expected_width) {
  EXPECT_THAT(serialization_error_of([] { int64_serde::deserialize("abc"); }),
              HasSubstr("expected 8 bytes for int64, got 3"));
  EXPECT_THAT(serialization_error_of([] { int32_serde::deserialize(""); }),
              HasSubstr("expected 4 bytes for int32, got 0"));
  EXPECT_THAT(serialization_error_of([] { int16_serde::deserialize("abc"); }),
              HasSubstr("expected 2 bytes for int16, got 3"));
  EXPECT_THAT(serialization_error_of([] { double_serde::deserialize("1234567"); }),
              HasSubstr("expected 8 bytes for double, got 7"));
  EXPECT_THAT(serialization_error_of([] { bool_serde::deserialize(""); }),
              HasSubstr("expected 1 byte for bool, got 0"));
}

TEST(primitive_serde, serialization_error_is_a_sluice_error) {
  try {
    int32_serde::deserialize("");
    FAIL() << "no error";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::serialization);
    EXPECT_EQ(make_error_code(e.code()).message(), "serialization error");
  }
}

TEST(primitive_serde, reused_buffer_keeps_its_capacity) {
  std::string out;
  int64_serde::serialize(1, out);
  const auto capacity = out.capacity();
  const auto* data = out.data();
  for (std::int64_t v = 0; v < 100; ++v) {
    int64_serde::serialize(v, out);
    EXPECT_EQ(out.capacity(), capacity);
  }
  EXPECT_EQ(out.data(), data);
}

}  // namespace
}  // namespace sluice
