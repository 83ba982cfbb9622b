// Timestamp extractors per source (issue 16): the extracted time is the record's time for
// every node downstream, for stream time and for stream-time punctuation; a negative or
// failing extraction is a deserialization error, decided by its handler and counted.
#include <gtest/gtest.h>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

struct reading {
  BOOST_HANA_DEFINE_STRUCT(reading, (std::string, sensor), (std::int64_t, at_ms), (std::int64_t, value));
};

/// The extractor under test: the event time carried in the value.
std::int64_t event_time(const std::string&, const reading& r, std::int64_t) { return r.at_ms; }

/// Forwards, per record, the stream time the processor sees; per stream-time punctuation a
/// record keyed "tick" whose value is the stream time passed to the punctuator.
class stream_time_probe : public sluice::processor<std::string, reading, std::string, std::int64_t> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    ctx.schedule(1s, sluice::punctuation_type::stream_time, [this](std::int64_t t) {
      context().forward(sluice::record<std::string, std::int64_t>{"tick", t, t, {}});
    });
  }
  void process(const sluice::record<std::string, reading>& r) override {
    context().forward(sluice::record<std::string, std::int64_t>{r.key, context().stream_time(), r.timestamp, {}});
  }
};

sluice::topology probe_topology() {
  sluice::streams_builder b;
  b.stream<std::string, reading>("readings", event_time)
      .process([] { return std::make_unique<stream_time_probe>(); })
      .to("probe");
  return b.build();
}

}  // namespace

TEST(timestamp_extractor, downstream_records_carry_the_extracted_timestamp) {
  sluice::streams_builder b;
  b.stream<std::string, reading>("readings", event_time)
      .map_values([](const reading& r) { return r.value; })
      .to("values");
  topology_test_driver d(b.build());
  d.input_topic<std::string, reading>("readings").pipe("s1", reading{"s1", 1234, 7}, /*timestamp=*/999999);
  auto r = d.output_topic<std::string, std::int64_t>("values").read();
  EXPECT_EQ(r.value, 7);
  EXPECT_EQ(r.timestamp, 1234);
}

TEST(timestamp_extractor, stream_time_is_the_highest_extracted_timestamp_not_the_record_timestamp) {
  topology_test_driver d(probe_topology());
  auto in = d.input_topic<std::string, reading>("readings");
  auto out = d.output_topic<std::string, std::int64_t>("probe");
  // Record timestamps run far ahead; the extracted ones decide. Out-of-order 50 keeps 100.
  in.pipe("a", reading{"a", 100, 0}, 5'000'000);
  in.pipe("a", reading{"a", 50, 0}, 5'000'001);
  in.pipe("a", reading{"a", 200, 0}, 5'000'002);
  std::vector<std::pair<std::string, std::int64_t>> seen;
  for (auto& r : out.read_all()) seen.emplace_back(r.key, r.value);
  // The tick at 100: the first record processed fires the punctuator due at 0.
  EXPECT_EQ(seen,
            (std::vector<std::pair<std::string, std::int64_t>>{{"a", 100}, {"tick", 100}, {"a", 100}, {"a", 200}}));
}

TEST(timestamp_extractor, stream_time_punctuation_runs_on_the_epoch_grid_after_the_crossing_record) {
  topology_test_driver d(probe_topology());
  auto in = d.input_topic<std::string, reading>("readings");
  auto out = d.output_topic<std::string, std::int64_t>("probe");
  for (std::int64_t t : {1500, 1700, 2100, 2999, 3000, 6500}) in.pipe("k", reading{"k", t, 0}, 1);
  std::vector<std::pair<std::string, std::int64_t>> seen;
  for (auto& r : out.read_all()) seen.emplace_back(r.key, r.value);
  // Due 0 -> fires at 1500, next due 2000 (grid of 1 s from the epoch, not from 1500):
  // 2100 crosses it (processed first, then the tick with the stream time 2100); 3000 crosses
  // the next; 6500 jumps over 4000, 5000 and 6000 and fires once.
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::int64_t>>{{"k", 1500},
                                                                     {"tick", 1500},
                                                                     {"k", 1700},
                                                                     {"k", 2100},
                                                                     {"tick", 2100},
                                                                     {"k", 2999},
                                                                     {"k", 3000},
                                                                     {"tick", 3000},
                                                                     {"k", 6500},
                                                                     {"tick", 6500}}));
}

TEST(timestamp_extractor, a_negative_extraction_is_dead_lettered_and_moves_no_stream_time) {
  sluice::config c;
  c.set("deserialization.error.handler", "dead_letter");
  topology_test_driver d(probe_topology(), c);
  auto in = d.input_topic<std::string, reading>("readings");
  auto out = d.output_topic<std::string, std::int64_t>("probe");
  in.pipe("a", reading{"a", 100, 0}, 1);
  in.pipe("bad", reading{"bad", -5, 0}, 7000);
  in.pipe("a", reading{"a", 900, 0}, 2);
  std::vector<std::pair<std::string, std::int64_t>> seen;
  for (auto& r : out.read_all()) seen.emplace_back(r.key, r.value);
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::int64_t>>{{"a", 100}, {"tick", 100}, {"a", 900}}));
  auto& dlq = d.records("test-driver-dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(*dlq.front().key, "bad");
  EXPECT_EQ(**dlq.front().headers.last("sluice.error.kind"), "deserialization");
  const std::string message = **dlq.front().headers.last("sluice.error.message");
  EXPECT_NE(message.find("returned -5"), std::string::npos) << message;
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(timestamp_extractor, a_throwing_extractor_is_skipped_and_counted_under_log_and_continue) {
  sluice::config c;
  c.set("deserialization.error.handler", "log_and_continue");
  sluice::streams_builder b;
  b.stream<std::string, reading>("readings", [](const std::string&, const reading& r, std::int64_t) -> std::int64_t {
     if (r.at_ms == 0) throw std::invalid_argument("reading without a time");
     return r.at_ms;
   }).to("out");
  topology_test_driver d(b.build(), c);
  auto in = d.input_topic<std::string, reading>("readings");
  in.pipe("a", reading{"a", 0, 1});
  in.pipe("b", reading{"b", 10, 2});
  auto r = d.output_topic<std::string, reading>("out").read_all();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].key, "b");
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(timestamp_extractor, fail_handler_stops_on_a_negative_extraction_naming_the_record) {
  topology_test_driver d(probe_topology());
  try {
    d.input_topic<std::string, reading>("readings").pipe("a", reading{"a", -1, 0}, 5);
    FAIL() << "expected deserialization.error.handler=fail to stop";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::serialization);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("readings[0]@0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("timestamp extractor returned -1"), std::string::npos) << msg;
  }
}

TEST(timestamp_extractor, a_negative_record_timestamp_without_an_extractor_is_a_deserialization_error) {
  sluice::config c;
  c.set("deserialization.error.handler", "log_and_continue");
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").to("out");
  topology_test_driver d(b.build(), c);
  d.pipe_raw("in", std::string_view("k"), std::string_view("v"), -1);
  d.pipe_raw("in", std::string_view("k"), std::string_view("w"), 3);
  auto r = d.output_topic<std::string, std::string>("out").read_all();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].value, "w");
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(timestamp_extractor, a_table_source_takes_an_extractor_and_its_updates_carry_the_extracted_time) {
  sluice::streams_builder b;
  b.table<std::string, reading>("sensors", sluice::materialized{.name = "sensors"}, event_time)
      .to_stream()
      .to("sensor-updates");
  topology_test_driver d(b.build());
  d.input_topic<std::string, reading>("sensors").pipe("s", reading{"s", 42, 1}, 7000);
  d.pipe_raw("sensors", std::string_view("s"), std::nullopt, 8000);  // a tombstone: record time, no extractor call
  auto r = d.output_topic<std::string, std::optional<reading>>("sensor-updates").read_all();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].timestamp, 42);
  EXPECT_FALSE(r[1].value.has_value());  // the deletion, forwarded as Kafka Streams' toStream() does
  EXPECT_EQ(r[1].timestamp, 8000);
  EXPECT_FALSE((d.store<std::string, reading>("sensors").get("s").has_value()));
}
