// A global table's store on its own: lookups, tombstones, and the ordered scans the
// /stores/... queries of global tables read.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/global_tables.hpp"

namespace sluice::runtime {
namespace {

using entries = std::vector<std::pair<std::string, std::string>>;

entries scan_all(const global_table_store& s, std::optional<std::string_view> from, std::size_t stop_after = 1000) {
  entries out;
  s.scan(from, [&](std::string_view k, std::string_view v) {
    out.emplace_back(k, v);
    return out.size() < stop_after;
  });
  return out;
}

TEST(global_table_store, scans_visit_live_keys_in_byte_order_from_the_first_key_not_below_the_start) {
  global_table_store s(3);
  EXPECT_EQ(s.partitions(), 3);
  s.apply("b", std::string("2"));
  s.apply("a", std::string("1"));
  s.apply(std::string("\xff", 1), std::string("high"));  // above every ASCII key, as RocksDB orders bytes
  s.apply("c", std::string("3"));
  s.apply("b", std::string("two"));  // overwritten
  s.apply("c", std::nullopt);        // a tombstone removes the key
  s.apply("zz", std::nullopt);       // a tombstone of an absent key is nothing
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(scan_all(s, std::nullopt), (entries{{"a", "1"}, {"b", "two"}, {std::string("\xff", 1), "high"}}));
  EXPECT_EQ(scan_all(s, "aa"), (entries{{"b", "two"}, {std::string("\xff", 1), "high"}}));
  EXPECT_EQ(scan_all(s, "b"), (entries{{"b", "two"}, {std::string("\xff", 1), "high"}}));
  EXPECT_EQ(scan_all(s, std::nullopt, 1), (entries{{"a", "1"}})) << "the scan stops when the visitor says so";
  std::string value;
  ASSERT_TRUE(s.get("b", value));
  EXPECT_EQ(value, "two");
  EXPECT_FALSE(s.get("c", value));
}

}  // namespace
}  // namespace sluice::runtime
