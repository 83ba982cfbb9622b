// binary_serde: the documented layout, round trips, and rejection of truncated or
// garbage input.
#include <limits>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serde_test_util.hpp"
#include "sluice/serde/binary.hpp"
#include "test_types.hpp"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::hex;
using testing::line_item;
using testing::order;
using testing::round_trip;
using testing::serialization_error_of;
using testing::text;
using testing::throttle_setting;

static_assert(serde_for<binary_serde<order>, order>);

template <class T>
std::string binary_of(const T& value) {
  std::string out;
  binary_serde<T>::serialize(value, out);
  return out;
}

TEST(binary_serde, layout_is_version_then_members_in_declaration_order) {
  // version 01; "eu" = 02 65 75; zigzag(-2) = 3 = 03; optional present 01, zigzag(64) = 128
  // = 80 01.
  EXPECT_EQ(hex(binary_of(throttle_setting{"eu", -2, 64})), "01 02 65 75 03 01 80 01");
  EXPECT_EQ(hex(binary_of(throttle_setting{"", 0, std::nullopt})), "01 00 00 00");
  // double is 8 bytes little-endian.
  EXPECT_EQ(hex(binary_of(line_item{"", 1, 1.0})), "01 00 02 00 00 00 00 00 00 f0 3f");
}

TEST(binary_serde, nested_struct_with_vectors_optionals_and_maps_round_trips) {
  const order o = testing::sample_order();
  EXPECT_EQ(round_trip<binary_serde<order>>(o), o);
  order extremes{};
  extremes.priority = std::numeric_limits<std::int8_t>::min();
  extremes.created_ms = std::numeric_limits<std::int64_t>::min();
  extremes.sequence = std::numeric_limits<std::uint64_t>::max();
  extremes.discount = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(round_trip<binary_serde<order>>(extremes), extremes);
}

TEST(binary_serde, strings_may_hold_any_bytes) {
  const std::string raw("\0\xff\xed\xa0\x80", 5);
  EXPECT_EQ(round_trip<binary_serde<text>>(text{raw}).body, raw);
}

TEST(binary_serde, every_truncation_is_an_error_not_an_out_of_bounds_read) {
  const std::string full = binary_of(testing::sample_order());
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::string cut = full.substr(0, n);  // exact-size heap copy: ASan sees overreads
    const std::string message = serialization_error_of([&] { binary_serde<order>::deserialize(cut); });
    if (n == 0)
      EXPECT_THAT(message, HasSubstr("empty input"));
    else
      EXPECT_THAT(message, HasSubstr("truncated input")) << "at " << n;
  }
}

TEST(binary_serde, truncation_names_the_field_and_the_shortfall) {
  std::string bytes = binary_of(line_item{"a", 1, 2.0});
  bytes.resize(bytes.size() - 5);
  EXPECT_THAT(serialization_error_of([&] { binary_serde<line_item>::deserialize(bytes); }),
              HasSubstr("field 'price': truncated input: expected 8 bytes for double, got 3"));
  // A string length larger than what is left is rejected before allocating.
  EXPECT_THAT(
      serialization_error_of([] { binary_serde<text>::deserialize(std::string("\x01\xff\xff\xff\xff\x0f", 6)); }),
      HasSubstr("field 'body': truncated input: string length of 4294967295"));
}

TEST(binary_serde, garbage_is_rejected) {
  EXPECT_THAT(serialization_error_of([] { binary_serde<text>::deserialize("\x02"); }),
              HasSubstr("unknown format version 2"));
  EXPECT_THAT(
      serialization_error_of([] { binary_serde<throttle_setting>::deserialize(std::string("\x01\x00\x00\x07", 4)); }),
      HasSubstr("field 'burst': invalid optional presence byte 7"));
  EXPECT_THAT(serialization_error_of([] { binary_serde<text>::deserialize(std::string("\x01\x00\x00", 3)); }),
              HasSubstr("1 trailing bytes"));
  EXPECT_THAT(serialization_error_of([] {
                binary_serde<throttle_setting>::deserialize(
                    std::string("\x01\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13));
              }),
              HasSubstr("field 'ttl_ms': malformed varint"));
  // Fuzz: random bytes after a valid version byte must throw or decode, never crash.
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string junk(1 + rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    junk[0] = '\x01';
    try {
      (void)binary_serde<order>::deserialize(junk);
    } catch (const serialization_error&) {}
  }
}

TEST(binary_serde, out_of_range_integers_are_rejected) {
  // uint16 region = 65536 as varint 80 80 04; int8 priority zigzag(128) = 256 = 80 02.
  const order o{};
  std::string bytes = binary_of(o);
  // Layout: 01 | id 00 | paid 00 | priority 00 | region 00 | ...
  std::string bad_region = bytes.substr(0, 4) + std::string("\x80\x80\x04", 3) + bytes.substr(5);
  EXPECT_THAT(serialization_error_of([&] { binary_serde<order>::deserialize(bad_region); }),
              HasSubstr("field 'region': integer 65536 out of range for uint16"));
  std::string bad_priority = bytes.substr(0, 3) + std::string("\x80\x02", 2) + bytes.substr(4);
  EXPECT_THAT(serialization_error_of([&] { binary_serde<order>::deserialize(bad_priority); }),
              HasSubstr("field 'priority': integer 128 out of range for int8"));
}

TEST(binary_serde, a_two_megabyte_string_round_trips) {
  const std::string body(2 * 1024 * 1024, 'z');
  EXPECT_EQ(round_trip<binary_serde<text>>(text{body}).body, body);
}

TEST(binary_serde, reused_buffer_keeps_its_capacity_for_same_sized_values) {
  std::string out;
  binary_serde<order>::serialize(testing::sample_order(), out);
  const auto capacity = out.capacity();
  for (int i = 0; i < 100; ++i) {
    order o = testing::sample_order();
    o.created_ms += i % 50;
    binary_serde<order>::serialize(o, out);
    EXPECT_EQ(out.capacity(), capacity);
  }
}

}  // namespace
}  // namespace sluice
