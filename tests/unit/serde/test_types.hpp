// Structs the serde tests encode: nested, with every supported member kind.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/hana/define_struct.hpp>

namespace sluice::testing {

struct line_item {
  BOOST_HANA_DEFINE_STRUCT(line_item, (std::string, sku), (std::int32_t, quantity), (double, price));
  friend bool operator==(const line_item&, const line_item&) = default;
};

struct order {
  BOOST_HANA_DEFINE_STRUCT(order, (std::string, id), (bool, paid), (std::int8_t, priority), (std::uint16_t, region),
                           (std::int64_t, created_ms), (std::uint64_t, sequence), (float, discount),
                           (std::vector<line_item>, items), (std::optional<std::string>, note),
                           (std::optional<line_item>, gift), (std::map<std::string, std::int64_t>, counters),
                           (std::map<std::string, std::vector<std::string>>, tags),
                           (std::vector<std::optional<std::int32_t>>, slots), (std::vector<bool>, flags));
  friend bool operator==(const order&, const order&) = default;
};

struct throttle_setting {
  BOOST_HANA_DEFINE_STRUCT(throttle_setting, (std::string, name), (std::int64_t, ttl_ms),
                           (std::optional<std::int32_t>, burst));
  friend bool operator==(const throttle_setting&, const throttle_setting&) = default;
};

struct text {
  BOOST_HANA_DEFINE_STRUCT(text, (std::string, body));
  friend bool operator==(const text&, const text&) = default;
};

inline order sample_order() {
  order o;
  o.id = "o-17";
  o.paid = true;
  o.priority = -3;
  o.region = 65535;
  o.created_ms = -1'700'000'000'123;
  o.sequence = 18'446'744'073'709'551'615ULL;
  o.discount = 0.1f;
  o.items = {{"apple", 3, 0.25}, {"pear \"green\"", 1, 1e-7}};
  o.note = std::nullopt;
  o.gift = line_item{"card", 1, 0.0};
  o.counters = {{"a", 1}, {"b", -9'000'000'000}};
  o.tags = {{"x", {"1", "2"}}, {"empty", {}}};
  o.slots = {1, std::nullopt, -2};
  o.flags = {true, false, true};
  return o;
}

}  // namespace sluice::testing
