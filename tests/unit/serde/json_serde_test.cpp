// json_serde: exact text, escaping, round trips of nested structs, and decode errors.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serde_test_util.hpp"
#include "sluice/detail/store_codec.hpp"
#include "sluice/serde/json.hpp"
#include "test_types.hpp"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::line_item;
using testing::order;
using testing::round_trip;
using testing::serialization_error_of;
using testing::text;
using testing::throttle_setting;

static_assert(serde_for<json_serde<order>, order>);

template <class T>
std::string json_of(const T& value) {
  std::string out;
  json_serde<T>::serialize(value, out);
  return out;
}

TEST(json_serde, writes_compact_json_in_declaration_order) {
  EXPECT_EQ(json_of(throttle_setting{"eu", 60000, 5}), R"({"name":"eu","ttl_ms":60000,"burst":5})");
  EXPECT_EQ(json_of(line_item{"a", -2, 3.0}), R"({"sku":"a","quantity":-2,"price":3.0})");
  EXPECT_EQ(json_of(line_item{"a", 0, -0.0}), R"({"sku":"a","quantity":0,"price":-0.0})");
  EXPECT_EQ(json_of(line_item{"a", 0, 0.1}), R"({"sku":"a","quantity":0,"price":0.1})");
}

TEST(json_serde, empty_optional_is_left_out_and_absent_or_null_reads_as_nullopt) {
  EXPECT_EQ(json_of(throttle_setting{"eu", 1, std::nullopt}), R"({"name":"eu","ttl_ms":1})");
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(R"({"name":"eu","ttl_ms":1})").burst, std::nullopt);
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(R"({"name":"eu","ttl_ms":1,"burst":null})").burst, std::nullopt);
}

TEST(json_serde, nested_struct_with_vectors_optionals_and_maps_round_trips) {
  const order o = testing::sample_order();
  EXPECT_EQ(round_trip<json_serde<order>>(o), o);
  const std::string json = json_of(o);
  EXPECT_THAT(json, HasSubstr(R"("slots":[1,null,-2])"));
  EXPECT_THAT(json, HasSubstr(R"("counters":{"a":1,"b":-9000000000})"));
  EXPECT_THAT(json, HasSubstr(R"("tags":{"empty":[],"x":["1","2"]})"));
  EXPECT_THAT(json, HasSubstr(R"("sequence":18446744073709551615)"));
  EXPECT_THAT(json, ::testing::Not(HasSubstr("note")));
  EXPECT_EQ(nlohmann::json::parse(json).dump(), nlohmann::json::parse(json).dump());  // valid
}

TEST(json_serde, escapes_quotes_backslashes_and_control_characters) {
  const std::string body = std::string("q\"b\\n\n t\t\x01\x1f\b\f\r", 14) + '\0' + "\x7f";
  EXPECT_EQ(json_of(text{body}), R"({"body":"q\"b\\n\n t\t\u0001\u001f\b\f\r\u0000)"
                                 "\x7f"
                                 R"("})");
  EXPECT_EQ(round_trip<json_serde<text>>(text{body}).body, body);
}

TEST(json_serde, passes_utf8_through_unescaped) {
  const std::string body = "héllo ✓ 𝄞 日本";
  EXPECT_EQ(json_of(text{body}), "{\"body\":\"" + body + "\"}");
  EXPECT_EQ(round_trip<json_serde<text>>(text{body}).body, body);
  EXPECT_EQ(json_serde<text>::deserialize(R"({"body":"\u00e9\ud834\udd1e"})").body, "é𝄞");
}

TEST(json_serde, refuses_to_write_invalid_utf8_or_non_finite_numbers) {
  EXPECT_THAT(serialization_error_of([] { json_of(text{"ok\xff"}); }),
              HasSubstr("field 'body': string is not valid UTF-8 (byte 2)"));
  EXPECT_THAT(serialization_error_of([] { json_of(text{"\xed\xa0\x80"}); }),  // a surrogate
              HasSubstr("not valid UTF-8"));
  order o = testing::sample_order();
  o.items[1].price = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(serialization_error_of([&] { json_of(o); }),
              HasSubstr("field 'items[1].price': NaN and infinity cannot be written as JSON"));
}

TEST(json_serde, ignores_unknown_fields) {
  const auto t = json_serde<throttle_setting>::deserialize(
      R"({"extra":{"deep":[1,2,{"x":null}]},"name":"eu","ttl_ms":7,"more":"x"})");
  EXPECT_EQ(t, (throttle_setting{"eu", 7, std::nullopt}));
}

TEST(json_serde, a_repeated_member_reads_as_its_last_occurrence) {
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(R"({"name":"a","ttl_ms":"x","name":"b","ttl_ms":2})"),
            (throttle_setting{"b", 2, std::nullopt}));
  const auto m = json_serde<std::map<std::string, std::int32_t>>::deserialize(R"({"a":true,"b":1,"a":2})");
  EXPECT_EQ(m, (std::map<std::string, std::int32_t>{{"a", 2}, {"b", 1}}));
  // More members than the pairwise check covers: found by sorting.
  std::string wide = R"({"name":"first")";
  for (int i = 0; i < 40; ++i) wide += ",\"m" + std::to_string(i) + "\":" + std::to_string(i);
  wide += R"(,"ttl_ms":5,"name":"last"})";
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(wide), (throttle_setting{"last", 5, std::nullopt}));
}

TEST(json_serde, members_in_any_order_are_found) {
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(R"({"burst":3,"ttl_ms":2,"name":"n"})"),
            (throttle_setting{"n", 2, 3}));
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(R"({"ttl_ms":2,"name":"n","burst":null})"),
            (throttle_setting{"n", 2, std::nullopt}));
}

TEST(json_serde, wrong_type_names_the_field_path) {
  EXPECT_THAT(
      serialization_error_of([] { json_serde<throttle_setting>::deserialize(R"({"name":"eu","ttl_ms":"60s"})"); }),
      HasSubstr("field 'ttl_ms': expected integer, got string"));
  order o = testing::sample_order();
  std::string json = json_of(o);
  auto doc = nlohmann::json::parse(json);
  doc["items"][1]["price"] = "cheap";
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr("field 'items[1].price': expected number, got string"));
  doc = nlohmann::json::parse(json);
  doc["tags"]["x"][1] = 5;
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr(R"(field 'tags["x"][1]': expected string, got number)"));
  doc = nlohmann::json::parse(json);
  doc["gift"]["quantity"] = 1.5;
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr("field 'gift.quantity': expected integer, got number 1.5"));
  EXPECT_THAT(serialization_error_of([] { json_serde<throttle_setting>::deserialize("[1]"); }),
              HasSubstr("expected object, got array"));
  EXPECT_THAT(serialization_error_of([] { json_serde<text>::deserialize(R"({"body":true})"); }),
              HasSubstr("field 'body': expected string, got boolean"));
}

TEST(json_serde, missing_field_is_named) {
  EXPECT_THAT(serialization_error_of([] { json_serde<throttle_setting>::deserialize(R"({"name":"eu"})"); }),
              HasSubstr("missing field 'ttl_ms'"));
  EXPECT_THAT(serialization_error_of([] {
                json_serde<order>::deserialize(R"({"id":"x","paid":true,"priority":1,"region":1,
                  "created_ms":1,"sequence":1,"discount":0,"items":[{"sku":"a","quantity":1}]})");
              }),
              HasSubstr("missing field 'items[0].price'"));
}

TEST(json_serde, integer_overflow_is_an_error) {
  auto ttl = [](const std::string& number) {
    return serialization_error_of(
        [&] { json_serde<throttle_setting>::deserialize(R"({"name":"a","ttl_ms":)" + number + "}"); });
  };
  EXPECT_THAT(ttl("9223372036854775808"),
              HasSubstr("field 'ttl_ms': integer 9223372036854775808 out of range for int64"));
  EXPECT_THAT(ttl("-9223372036854775809"), HasSubstr("out of range for int64"));
  EXPECT_THAT(ttl("100000000000000000000000"), HasSubstr("out of range for int64"));
  EXPECT_EQ(json_serde<throttle_setting>::deserialize(R"({"name":"a","ttl_ms":-9223372036854775808})").ttl_ms,
            std::numeric_limits<std::int64_t>::min());
  EXPECT_THAT(serialization_error_of(
                  [] { json_serde<throttle_setting>::deserialize(R"({"name":"a","ttl_ms":1,"burst":2147483648})"); }),
              HasSubstr("field 'burst': integer 2147483648 out of range for int32"));
  const std::string o = json_of(testing::sample_order());
  auto doc = nlohmann::json::parse(o);
  doc["region"] = 65536;
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr("field 'region': integer 65536 out of range for uint16"));
  doc["region"] = -1;
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr("field 'region': integer -1 out of range for uint16"));
  doc = nlohmann::json::parse(o);
  doc["priority"] = -129;
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr("field 'priority': integer -129 out of range for int8"));
  doc = nlohmann::json::parse(o);
  doc["discount"] = 1e300;
  EXPECT_THAT(serialization_error_of([&] { json_serde<order>::deserialize(doc.dump()); }),
              HasSubstr("field 'discount': number 1e+300 out of range for float"));
}

// The interactive queries' JSON for a store's scalar keys and values (written out of line,
// in the library): strings escaped with invalid UTF-8 replaced, integers of every width and
// sign exact, floats in their shortest form, optionals as null or their value.
TEST(json_serde, store_codecs_write_scalars_as_json_text) {
  using sluice::detail::to_json_text;
  EXPECT_EQ(to_json_text(std::string("a\"b\\c\n")), R"("a\"b\\c\n")");
  EXPECT_EQ(to_json_text(std::string("caf\xc3\xa9 \xff")), "\"caf\xc3\xa9 \xef\xbf\xbd\"");
  EXPECT_EQ(to_json_text(true), "true");
  EXPECT_EQ(to_json_text(std::numeric_limits<std::int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(to_json_text(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(to_json_text(std::int8_t{-5}), "-5");
  EXPECT_EQ(to_json_text(std::uint16_t{65535}), "65535");
  EXPECT_EQ(to_json_text(2.5), "2.5");
  EXPECT_EQ(to_json_text(0.1f), "0.10000000149011612");
  EXPECT_EQ(to_json_text(std::optional<std::int32_t>{}), "null");
  EXPECT_EQ(to_json_text(std::optional<std::int32_t>{7}), "7");
}

TEST(json_serde, invalid_json_is_a_serialization_error) {
  for (const char* bad :
       {"{", "}", "{\"name\":", "{\"name\":\"eu\",}", "nul", "{'a':1}", "{\"name\":\"eu\",\"ttl_ms\":1} trailing",
        "\"\xff\"", "{\"name\":\"\\ud800\",\"ttl_ms\":1}", "[[[[[[[["}) {
    EXPECT_THAT(serialization_error_of([&] { json_serde<throttle_setting>::deserialize(bad); }),
                HasSubstr("invalid JSON"))
        << bad;
  }
  EXPECT_THAT(serialization_error_of([] { json_serde<throttle_setting>::deserialize(""); }),
              HasSubstr("invalid JSON: empty input"));
}

TEST(json_serde, deeply_nested_garbage_does_not_crash) {
  const std::string deep(1'000'000, '[');
  EXPECT_THAT(serialization_error_of([&] { json_serde<text>::deserialize(deep); }),
              HasSubstr("deeper than 1000 levels"));
  const std::string balanced = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_THAT(serialization_error_of([&] { json_serde<text>::deserialize(balanced); }),
              HasSubstr("the JSON nests arrays and objects deeper than 1000 levels (200000 bytes)"));
}

TEST(json_serde, nesting_is_bounded_at_one_thousand_levels_counting_only_outside_strings) {
  auto nested = [](std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  EXPECT_EQ(json_nesting_depth(nested(1000)), 1000u);
  EXPECT_EQ(json_nesting_depth(nested(1001)), 1001u);
  EXPECT_EQ(json_nesting_depth(nested(80'000)), 1001u) << "the scan stops past the limit";
  EXPECT_EQ(json_nesting_depth("[1]"), 0u) << "documents shorter than the limit are not scanned";
  // Brackets inside strings, escaped quotes included, do not count.
  const std::string in_string = R"({"a":")" + std::string(5000, '[') + R"(\"[[[","b":[[1]]})";
  EXPECT_EQ(json_nesting_depth(in_string), 3u);
  const std::string at_limit = R"({"body":")" + std::string(2000, 'x') + R"(","deep":)" + nested(999) + "}";
  EXPECT_EQ(json_serde<text>::deserialize(at_limit).body, std::string(2000, 'x')) << "1,000 levels are accepted";
  const std::string over = R"({"body":"x","deep":)" + nested(1000) + "}";
  EXPECT_THAT(serialization_error_of([&] { json_serde<text>::deserialize(over); }),
              HasSubstr("deeper than 1000 levels"));
}

TEST(json_serde, a_two_megabyte_string_round_trips) {
  std::string body(2 * 1024 * 1024, 'x');
  for (std::size_t i = 0; i < body.size(); i += 997) body[i] = '"';
  EXPECT_EQ(round_trip<json_serde<text>>(text{body}).body, body);
}

TEST(json_serde, reused_buffer_keeps_its_capacity_for_same_sized_values) {
  std::string out;
  json_serde<throttle_setting>::serialize({"aaaa", 1000, 5}, out);
  const auto capacity = out.capacity();
  for (int i = 0; i < 100; ++i) {
    json_serde<throttle_setting>::serialize({"bbbb", 2000 + i % 10, 6}, out);
    EXPECT_EQ(out.capacity(), capacity);
  }
}

TEST(json_serde, works_for_containers_at_the_top_level) {
  const std::map<std::string, std::vector<std::int32_t>> m{{"a", {1, 2}}, {"b\"", {}}};
  EXPECT_EQ(json_of(m), R"({"a":[1,2],"b\"":[]})");
  EXPECT_EQ(round_trip<json_serde<std::remove_const_t<decltype(m)>>>(m), m);
}

// The one scan of string bytes under every JSON path: it stops at the first quote,
// backslash, control byte or UTF-8 lead byte wherever it falls (in or after the 16-byte
// blocks, at a block's first or last byte), and runs to the end when there is none.
TEST(json_string_bytes, the_plain_run_ends_at_the_first_byte_a_string_cannot_hold_as_it_is) {
  for (const unsigned char stop : {'"', '\\', '\0', '\n', '\x1f', '\x7f', '\x80', '\xc3', '\xff'}) {
    for (std::size_t length = 0; length <= 40; ++length) {
      for (std::size_t at = 0; at <= length; ++at) {
        std::string s(length, 'a');
        if (at < length) s[at] = static_cast<char>(stop);
        if (at + 1 < length) s[at + 1] = '"';  // a later stop must not win
        const auto* begin = reinterpret_cast<const unsigned char*>(s.data());
        const auto* end = begin + s.size();
        const bool plain = stop == 0x7f;  // DEL is printable ASCII for JSON: no escape needed
        const std::size_t expected = at == length ? length : plain ? (at + 1 < length ? at + 1 : length) : at;
        ASSERT_EQ(serde_detail::json::skip_plain_string_bytes(begin, end) - begin,
                  static_cast<std::ptrdiff_t>(expected))
            << "stop byte " << static_cast<int>(stop) << " at " << at << " of " << length;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
