// Every DSL operation through the TopologyTestDriver.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "error_of.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::testing::topology_test_driver;

namespace {
struct item {
  BOOST_HANA_DEFINE_STRUCT(item, (std::string, name), (std::int64_t, qty));
};

/// (key, timestamp) of each record of `topic`, in order.
using stamped = std::vector<std::pair<std::string, std::int64_t>>;
template <class V>
stamped stamps(topology_test_driver& d, const std::string& topic) {
  stamped out;
  for (auto& r : d.output_topic<std::string, V>(topic).read_all()) out.emplace_back(r.key, r.timestamp);
  return out;
}
}  // namespace

TEST(dsl, filter_and_filter_not_keep_and_drop_by_predicate) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, std::int64_t>("in");
  s.filter([](const std::string&, std::int64_t v) { return v > 10; }).to("big");
  s.filter_not([](const std::string&, std::int64_t v) { return v > 10; }).to("small");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("in");
  in.pipe("a", 5);
  in.pipe("b", 50);
  in.pipe("c", 11);
  auto big = d.output_topic<std::string, std::int64_t>("big").read_all();
  auto small = d.output_topic<std::string, std::int64_t>("small").read_all();
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].key, "b");
  EXPECT_EQ(big[1].value, 11);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small[0].key, "a");
}

TEST(dsl, map_values_map_and_select_key_transform_and_keep_timestamp_and_headers) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, item>("in");
  s.map_values([](const item& i) { return i.qty * 2; }).to("doubled");
  s.map([](const std::string& k, const item& i) { return std::pair{i.name, k}; }).to("swapped");
  s.select_key([](const std::string&, const item& i) { return i.name; }).to("rekeyed");
  topology_test_driver d(b.build());
  d.input_topic<std::string, item>("in").pipe("k1", item{"apple", 3}, 1234, sluice::headers{{"h", "v"}});
  auto doubled = d.output_topic<std::string, std::int64_t>("doubled").read();
  EXPECT_EQ(doubled.key, "k1");
  EXPECT_EQ(doubled.value, 6);
  EXPECT_EQ(doubled.timestamp, 1234);
  ASSERT_NE(doubled.headers.last("h"), nullptr);
  EXPECT_EQ(**doubled.headers.last("h"), "v");
  auto swapped = d.output_topic<std::string, std::string>("swapped").read();
  EXPECT_EQ(swapped.key, "apple");
  EXPECT_EQ(swapped.value, "k1");
  auto rekeyed = d.output_topic<std::string, item>("rekeyed").read();
  EXPECT_EQ(rekeyed.key, "apple");
  EXPECT_EQ(rekeyed.value.qty, 3);
}

TEST(dsl, flat_map_and_flat_map_values_emit_zero_or_more_records) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, std::string>("in");
  s.flat_map_values([](const std::string& v) { return std::vector<std::string>(v.size(), v); }).to("repeated");
  s.flat_map([](const std::string& k, const std::string& v) {
     return std::vector<std::pair<std::string, std::int64_t>>{{k + "-len", static_cast<std::int64_t>(v.size())}};
   }).to("lengths");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::string>("in");
  in.pipe("a", "xyz");
  in.pipe("b", "");
  EXPECT_EQ((d.output_topic<std::string, std::string>("repeated").size()), 3u);
  auto lengths = d.output_topic<std::string, std::int64_t>("lengths").read_all();
  ASSERT_EQ(lengths.size(), 2u);
  EXPECT_EQ(lengths[0].key, "a-len");
  EXPECT_EQ(lengths[0].value, 3);
  EXPECT_EQ(lengths[1].value, 0);
}

TEST(dsl, peek_sees_every_record_and_passes_it_on) {
  int seen = 0;
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").peek([&seen](const std::string&, const std::string&) { ++seen; }).to("out");
  topology_test_driver d(b.build());
  d.input_topic<std::string, std::string>("in").pipe_all({{"a", "1"}, {"b", "2"}});
  EXPECT_EQ(seen, 2);
  EXPECT_EQ((d.output_topic<std::string, std::string>("out").size()), 2u);
}

TEST(dsl, split_routes_to_the_first_matching_branch_and_the_default) {
  sluice::streams_builder b;
  auto split = b.stream<std::string, std::int64_t>("in").split();
  split.branch("negative", [](const std::string&, std::int64_t v) { return v < 0; }).to("neg");
  split.branch("small", [](const std::string&, std::int64_t v) { return v < 10; }).to("small");
  split.default_branch("rest").to("rest");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("in");
  for (std::int64_t v : {-1, 5, 50, -7, 9}) in.pipe("k", v);
  EXPECT_EQ((d.output_topic<std::string, std::int64_t>("neg").size()), 2u);
  EXPECT_EQ((d.output_topic<std::string, std::int64_t>("small").size()), 2u);
  EXPECT_EQ((d.output_topic<std::string, std::int64_t>("rest").read_value()), 50);
}

TEST(dsl, merge_combines_two_streams) {
  sluice::streams_builder b;
  auto a = b.stream<std::string, std::string>("a");
  auto c = b.stream<std::string, std::string>("c");
  a.merge(c).to("out");
  topology_test_driver d(b.build());
  d.input_topic<std::string, std::string>("a").pipe("1", "from-a");
  d.input_topic<std::string, std::string>("c").pipe("2", "from-c");
  auto out = d.output_topic<std::string, std::string>("out").read_all();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].value, "from-a");
  EXPECT_EQ(out[1].value, "from-c");
}

TEST(dsl, group_by_key_count_reduce_and_aggregate_keep_state_per_key) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, std::int64_t>("in");
  s.group_by_key().count("counts").to_stream().to("counts-out");
  s.group_by_key().reduce([](std::int64_t a, std::int64_t v) { return a + v; }, "sums").to_stream().to("sums-out");
  s.group_by_key()
      .aggregate([] { return std::string(); },
                 [](const std::string&, std::int64_t v, std::string acc) { return acc + std::to_string(v); }, "concat")
      .to_stream()
      .to("concat-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("in");
  in.pipe("a", 1);
  in.pipe("b", 10);
  in.pipe("a", 2);
  auto counts = d.output_topic<std::string, std::int64_t>("counts-out").read_key_values_to_map();
  EXPECT_EQ(counts["a"], 2);
  EXPECT_EQ(counts["b"], 1);
  auto sums = d.output_topic<std::string, std::int64_t>("sums-out").read_key_values_to_map();
  EXPECT_EQ(sums["a"], 3);
  EXPECT_EQ((d.output_topic<std::string, std::string>("concat-out").read_key_values_to_map()["a"]), "12");
  EXPECT_EQ((*d.store<std::string, std::int64_t>("counts").get("a")), 2);
}

// Kafka Streams 3.9's KStreamAggregate and KStreamReduce stamp an update with the later of
// the record's timestamp and the stored aggregate's (a new key's with the record's): an
// out-of-order record does not move a key's aggregate back in time.
TEST(dsl, count_reduce_and_aggregate_stamp_an_update_with_the_later_of_the_record_and_the_aggregate) {
  sluice::streams_builder b;
  auto g = b.stream<std::string, std::int64_t>("in").group_by_key();
  g.count("counts").to_stream().to("counts-out");
  g.reduce([](std::int64_t a, std::int64_t v) { return a + v; }, "sums").to_stream().to("sums-out");
  g.aggregate([] { return std::string(); },
              [](const std::string&, std::int64_t v, std::string acc) { return acc + std::to_string(v); }, "concat")
      .to_stream()
      .to("concat-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, std::int64_t>("in");
  in.pipe("a", 1, 100);
  in.pipe("a", 2, 40);   // out of order: stamped 100, the aggregate's
  in.pipe("b", 3, 50);   // a new key: its own timestamp, though older than a's
  in.pipe("a", 4, 120);  // later: its own
  in.pipe("a", 5, 110);  // out of order again: 120
  const stamped expected = {{"a", 100}, {"a", 100}, {"b", 50}, {"a", 120}, {"a", 120}};
  EXPECT_EQ(stamps<std::int64_t>(d, "counts-out"), expected);
  EXPECT_EQ(stamps<std::int64_t>(d, "sums-out"), expected);
  EXPECT_EQ(stamps<std::string>(d, "concat-out"), expected);
  // The stores read as before through a plain handle; the timestamps do not show.
  EXPECT_EQ((*d.store<std::string, std::int64_t>("counts").get("a")), 4);
  EXPECT_EQ((*d.store<std::string, std::int64_t>("sums").get("a")), 12);
  EXPECT_EQ((*d.store<std::string, std::string>("concat").get("a")), "1245");
  // The changelog holds each aggregate alone, stamped with its timestamp, which the restore
  // puts back in front of it (as Kafka Streams' timestamped stores log).
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t>> logged;
  for (auto& r : d.output_topic<std::string, std::int64_t>("test-driver-counts-changelog").read_all())
    logged.emplace_back(r.key, r.value, r.timestamp);
  ASSERT_FALSE(logged.empty());
  EXPECT_EQ(logged.back(), std::make_tuple(std::string("a"), std::int64_t{4}, std::int64_t{120}));
}

TEST(dsl, group_by_repartitions_through_an_internal_topic) {
  sluice::streams_builder b;
  b.stream<std::string, item>("in")
      .group_by([](const std::string&, const item& i) { return i.name; })
      .count("by-name")
      .to_stream()
      .to("out");
  auto t = b.build();
  EXPECT_EQ(t.subtopologies().size(), 2u);
  EXPECT_NE(t.describe().find("by-name-repartition"), std::string::npos);
  topology_test_driver d(std::move(t), {}, {.partitions = 4});
  auto in = d.input_topic<std::string, item>("in");
  for (int i = 0; i < 20; ++i) in.pipe("k" + std::to_string(i), item{i % 2 ? "odd" : "even", i});
  auto counts = d.output_topic<std::string, std::int64_t>("out").read_key_values_to_map();
  EXPECT_EQ(counts["odd"], 10);
  EXPECT_EQ(counts["even"], 10);
  EXPECT_FALSE(d.records("test-driver-by-name-repartition").empty());
  EXPECT_FALSE(d.records("test-driver-by-name-changelog").empty());
}

TEST(dsl, stream_table_join_and_left_join_look_up_the_latest_table_value) {
  sluice::streams_builder b;
  auto prices = b.table<std::string, std::int64_t>("prices", "prices-store");
  auto orders = b.stream<std::string, std::int64_t>("orders");
  orders.join(prices, [](std::int64_t qty, std::int64_t price) { return qty * price; }).to("totals");
  orders
      .left_join(prices,
                 [](std::int64_t qty, const std::optional<std::int64_t>& price) { return price ? qty * *price : -1; })
      .to("left-totals");
  topology_test_driver d(b.build());
  auto p = d.input_topic<std::string, std::int64_t>("prices");
  auto o = d.input_topic<std::string, std::int64_t>("orders");
  o.pipe("apple", 2);
  p.pipe("apple", 100);
  o.pipe("apple", 3);
  p.pipe("apple", 200);
  o.pipe("apple", 1);
  auto totals = d.output_topic<std::string, std::int64_t>("totals").read_all();
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals[0].value, 300);
  EXPECT_EQ(totals[1].value, 200);
  auto left = d.output_topic<std::string, std::int64_t>("left-totals").read_all();
  ASSERT_EQ(left.size(), 3u);
  EXPECT_EQ(left[0].value, -1);
}

TEST(dsl, a_table_forwards_a_deletion_to_its_stream_as_a_tombstone_as_kafka_streams_to_stream_does) {
  sluice::streams_builder b;
  auto prices = b.table<std::string, std::int64_t>("prices", "prices-store");
  prices.to_stream().to("price-updates");
  b.stream<std::string, std::int64_t>("orders")
      .left_join(prices,
                 [](std::int64_t qty, const std::optional<std::int64_t>& price) { return price ? qty * *price : -1; })
      .to("totals");
  topology_test_driver d(b.build());
  auto p = d.input_topic<std::string, std::int64_t>("prices");
  auto o = d.input_topic<std::string, std::int64_t>("orders");
  p.pipe("apple", 100, 1);
  d.pipe_raw("prices", std::string_view("apple"), std::nullopt, 2);  // deletes apple
  d.pipe_raw("prices", std::string_view("pear"), std::nullopt, 3);   // a key the table never had: forwarded too
  o.pipe("apple", 2, 4);
  // The tombstones are null values on the output topic, not empty ones.
  const auto& raw = d.records("price-updates");
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_TRUE(raw[0].value.has_value());
  EXPECT_FALSE(raw[1].value.has_value());
  EXPECT_FALSE(raw[2].value.has_value());
  using update = std::tuple<std::string, std::optional<std::int64_t>, std::int64_t>;
  std::vector<update> updates;
  for (auto& r : d.output_topic<std::string, std::optional<std::int64_t>>("price-updates").read_all())
    updates.emplace_back(r.key, r.value, r.timestamp);
  const std::vector<update> expected = {{"apple", 100, 1}, {"apple", std::nullopt, 2}, {"pear", std::nullopt, 3}};
  EXPECT_EQ(updates, expected);
  EXPECT_FALSE((d.store<std::string, std::int64_t>("prices-store").get("apple").has_value()));
  EXPECT_EQ((d.output_topic<std::string, std::int64_t>("totals").read_value()), -1);  // the join saw the deletion
}

TEST(dsl, stream_global_table_join_uses_a_key_selector) {
  sluice::streams_builder b;
  auto names = b.global_table<std::string, std::string>("customer-names");
  b.stream<std::string, item>("orders")
      .join(
          names, [](const std::string&, const item& i) { return i.name; },
          [](const item& i, const std::string& n) { return n + ":" + std::to_string(i.qty); })
      .to("named");
  topology_test_driver d(b.build(), {}, {.partitions = 3});
  d.input_topic<std::string, std::string>("customer-names").pipe("c1", "Ada");
  auto orders = d.input_topic<std::string, item>("orders");
  orders.pipe("o1", item{"c1", 4});
  orders.pipe("o2", item{"unknown", 1});
  auto named = d.output_topic<std::string, std::string>("named").read_all();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].value, "Ada:4");
}

namespace {

/// Orders left-joined with a global table of items (item-valued): the issue-16 case of a
/// table value that does not decode.
sluice::topology orders_with_global_items() {
  sluice::streams_builder b;
  auto items = b.global_table<std::string, item>("items");
  b.stream<std::string, std::string>("orders")
      .left_join(
          items, [](const std::string&, const std::string& item_id) { return item_id; },
          [](const std::string& item_id, const std::optional<item>& i) {
            return item_id + ":" + (i ? std::to_string(i->qty) : std::string("none"));
          })
      .to("priced");
  return b.build();
}

}  // namespace

TEST(dsl, global_table_value_that_does_not_decode_is_skipped_when_read_and_the_stream_record_is_not_blamed) {
  sluice::config c;
  c.set("deserialization.error.handler", "dead_letter");
  topology_test_driver d(orders_with_global_items(), c);
  d.input_topic<std::string, item>("items").pipe("i1", item{"bolt", 3});
  d.pipe_raw("items", std::string_view("i1"), std::string_view("{not json"), 1);  // offset 1
  d.input_topic<std::string, std::string>("orders").pipe("o1", "i1");
  // The order is joined with the last value that decoded; nothing is dead-lettered for it.
  auto priced = d.output_topic<std::string, std::string>("priced").read_all();
  ASSERT_EQ(priced.size(), 1u);
  EXPECT_EQ(priced[0].value, "i1:3");
  EXPECT_TRUE(d.records("test-driver-dlq").empty());
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(dsl, global_table_value_that_does_not_decode_under_fail_names_table_topic_partition_offset_and_key) {
  topology_test_driver d(orders_with_global_items());
  d.input_topic<std::string, item>("items").pipe("i1", item{"bolt", 3});
  try {
    d.pipe_raw("items", std::string_view("i2"), std::string_view("{not json"), 1);
    FAIL() << "expected the fail handler to throw when the table's record is read";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::serialization);
    std::string msg = e.what();
    EXPECT_NE(msg.find("global table 'items-global' at items[0]@1 with key 'i2'"), std::string::npos) << msg;
  }
}

namespace {

/// Orders (key: item id, value: quantity) left-joined with a table of items (item-valued,
/// co-partitioned): the issue-16 case of a table value that does not decode.
sluice::topology orders_with_table_items() {
  sluice::streams_builder b;
  auto items = b.table<std::string, item>("items", "items-store");
  b.stream<std::string, std::int64_t>("orders")
      .left_join(items,
                 [](std::int64_t qty, const std::optional<item>& i) {
                   return std::to_string(qty) + "x" + (i ? i->name : std::string("none"));
                 })
      .to("priced");
  return b.build();
}

}  // namespace

TEST(dsl, table_value_that_does_not_decode_is_dead_lettered_when_read_and_the_stream_record_is_not_blamed) {
  sluice::config c;
  c.set("deserialization.error.handler", "dead_letter");
  topology_test_driver d(orders_with_table_items(), c);
  d.input_topic<std::string, item>("items").pipe("i1", item{"bolt", 3}, 1);
  d.pipe_raw("items", std::string_view("i1"), std::string_view("{not json"), 2);  // offset 1
  d.input_topic<std::string, std::int64_t>("orders").pipe("i1", 5, 3);
  // The table's record is dead-lettered as the table topic's; the order is joined with the
  // last value that decoded and is not dead-lettered.
  auto& dlq = d.records("test-driver-dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(*dlq.front().value, "{not json");
  EXPECT_EQ(**dlq.front().headers.last("sluice.error.kind"), "deserialization");
  EXPECT_EQ(**dlq.front().headers.last("sluice.source.topic"), "items");
  EXPECT_EQ(**dlq.front().headers.last("sluice.source.offset"), "1");
  auto priced = d.output_topic<std::string, std::string>("priced").read_all();
  ASSERT_EQ(priced.size(), 1u);
  EXPECT_EQ(priced[0].key, "i1");
  EXPECT_EQ(priced[0].value, "5xbolt");
  EXPECT_EQ((d.store<std::string, item>("items-store").get("i1"))->name, "bolt");
}

TEST(dsl, table_value_that_does_not_decode_under_fail_names_table_topic_partition_offset_and_key) {
  topology_test_driver d(orders_with_table_items());
  d.input_topic<std::string, item>("items").pipe("i1", item{"bolt", 3}, 1);
  auto msg =
      sluice::test::error_of([&] { d.pipe_raw("items", std::string_view("i2"), std::string_view("{not json"), 2); },
                             sluice::errc::serialization);
  EXPECT_NE(msg.find("deserialization error on record items[0]@1 with key 'i2': value"), std::string::npos) << msg;
}

TEST(dsl, describe_and_dot_name_every_node_and_store) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").group_by_key().count("c").to_stream().to("out");
  auto t = b.build();
  auto text = t.describe();
  EXPECT_NE(text.find("Source: KSTREAM-SOURCE-0000000000 (topics: [in])"), std::string::npos) << text;
  EXPECT_NE(text.find("(stores: [c])"), std::string::npos) << text;
  EXPECT_NE(text.find("<application.id>-c-changelog"), std::string::npos) << text;
  auto dot = t.to_dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("store:c"), std::string::npos);
}
