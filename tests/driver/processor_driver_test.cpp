// The Processor API, punctuation and error handlers through the TopologyTestDriver.
#include <gtest/gtest.h>

#include <map>

#include "error_of.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

struct event {
  BOOST_HANA_DEFINE_STRUCT(event, (std::string, user), (std::int64_t, n));
};

/// Sums per key in a store; emits totals on punctuation of either kind.
class summing : public sluice::processor<std::string, event, std::string, std::int64_t> {
 public:
  summing(sluice::punctuation_type type, bool cancel_after_first) : type_(type), cancel_(cancel_after_first) {}
  void init(context_type& ctx) override {
    processor::init(ctx);
    sums_.emplace(ctx.store<std::string, std::int64_t>("sums"));
    handle_ = ctx.schedule(1s, type_, [this](std::int64_t t) {
      for (auto it = sums_->all(); it.valid(); it.next())
        context().forward(sluice::record<std::string, std::int64_t>{it.key(), it.value(), t, {}});
      if (cancel_) handle_.cancel();
    });
  }
  void process(const sluice::record<std::string, event>& r) override {
    sums_->put(r.key, sums_->get(r.key).value_or(0) + r.value.n);
  }

 private:
  sluice::punctuation_type type_;
  bool cancel_;
  std::optional<sluice::key_value_store<std::string, std::int64_t>> sums_;
  sluice::cancellable handle_;
};

sluice::topology summing_topology(sluice::punctuation_type type, bool cancel = false) {
  sluice::streams_builder b;
  b.add_state_store({.name = "sums"});
  b.stream<std::string, event>("events")
      .process([type, cancel] { return std::make_unique<summing>(type, cancel); }, "sums")
      .to("totals");
  return b.build();
}

}  // namespace

TEST(processor_api, stream_time_punctuator_fires_as_record_timestamps_advance) {
  topology_test_driver d(summing_topology(sluice::punctuation_type::stream_time));
  auto in = d.input_topic<std::string, event>("events");
  auto out = d.output_topic<std::string, std::int64_t>("totals");
  // Kafka Streams' grid: due at 0, so the first record fires it (after being processed).
  in.pipe("a", event{"a", 5}, 100);
  auto first = out.read();
  EXPECT_EQ(first.key, "a");
  EXPECT_EQ(first.value, 5);
  EXPECT_EQ(first.timestamp, 100);
  in.pipe("a", event{"a", 5}, 900);  // next due at 1000
  EXPECT_TRUE(out.empty());
  d.advance_wall_clock(10s);  // wall clock does not drive stream-time punctuators
  EXPECT_TRUE(out.empty());
  in.pipe("b", event{"b", 1}, 1000);
  auto totals = out.read_key_values_to_map();
  EXPECT_EQ(totals["a"], 10);
  EXPECT_EQ(totals["b"], 1);
}

TEST(processor_api, wall_clock_punctuator_fires_only_when_the_clock_advances) {
  topology_test_driver d(summing_topology(sluice::punctuation_type::wall_clock));
  auto in = d.input_topic<std::string, event>("events");
  auto out = d.output_topic<std::string, std::int64_t>("totals");
  in.pipe("a", event{"a", 2}, 100000);
  EXPECT_TRUE(out.empty());
  d.advance_wall_clock(999ms);
  EXPECT_TRUE(out.empty());
  d.advance_wall_clock(1ms);
  EXPECT_EQ(out.read_value(), 2);
}

TEST(processor_api, cancelled_punctuator_stops_firing) {
  topology_test_driver d(summing_topology(sluice::punctuation_type::wall_clock, /*cancel=*/true));
  d.input_topic<std::string, event>("events").pipe("a", event{"a", 1});
  d.advance_wall_clock(1s);
  d.advance_wall_clock(1s);
  EXPECT_EQ((d.output_topic<std::string, std::int64_t>("totals").size()), 1u);
}

TEST(processor_api, stores_are_per_partition_and_can_be_prepopulated) {
  topology_test_driver d(summing_topology(sluice::punctuation_type::stream_time), {}, {.partitions = 2});
  auto in = d.input_topic<std::string, event>("events");
  in.pipe("x", event{"x", 1}, 1, {}, 0);
  in.pipe("x", event{"x", 1}, 2, {}, 1);
  EXPECT_EQ((*d.store<std::string, std::int64_t>("sums", 0).get("x")), 1);
  EXPECT_EQ((*d.store<std::string, std::int64_t>("sums", 1).get("x")), 1);
  d.store<std::string, std::int64_t>("sums", 0).put("y", 40);
  in.pipe("y", event{"y", 2}, 3, {}, 0);
  EXPECT_EQ((*d.store<std::string, std::int64_t>("sums", 0).get("y")), 42);
}

TEST(processor_api, rocksdb_stores_run_in_the_driver_on_request) {
  topology_test_driver d(summing_topology(sluice::punctuation_type::stream_time), {}, {.rocksdb_stores = true});
  auto in = d.input_topic<std::string, event>("events");
  for (int i = 0; i < 100; ++i) in.pipe("k" + std::to_string(i % 10), event{"u", 1});
  EXPECT_EQ((*d.store<std::string, std::int64_t>("sums").get("k3")), 10);
  EXPECT_EQ(d.records("test-driver-sums-changelog").size(), 100u);
}

namespace {

/// Overrides init without calling processor::init (issue 16's newcomer mistake) and keeps
/// its store declared right in process(..., materialized{...}).
class counting_without_base_init : public sluice::processor<std::string, event, std::string, std::int64_t> {
 public:
  void init(context_type& ctx) override { counts_.emplace(ctx.store<std::string, std::int64_t>("counts")); }
  void process(const sluice::record<std::string, event>& r) override {
    auto n = counts_->get(r.key).value_or(0) + 1;
    counts_->put(r.key, n);
    context().forward(sluice::record<std::string, std::int64_t>{r.key, n, r.timestamp, {}});
  }

 private:
  std::optional<sluice::key_value_store<std::string, std::int64_t>> counts_;
};

/// Calls context() in its constructor, before the runtime has given it one.
class context_in_constructor : public sluice::processor<std::string, event> {
 public:
  context_in_constructor() { (void)context().task_id(); }
  void process(const sluice::record<std::string, event>&) override {}
};

}  // namespace

TEST(processor_api, processor_overriding_init_without_the_base_call_has_its_context) {
  sluice::streams_builder b;
  b.stream<std::string, event>("events")
      .process([] { return std::make_unique<counting_without_base_init>(); }, sluice::materialized{.name = "counts"})
      .to("counts-out");
  topology_test_driver d(b.build());
  auto in = d.input_topic<std::string, event>("events");
  in.pipe("a", event{"a", 1});
  in.pipe("a", event{"a", 1});
  auto out = d.output_topic<std::string, std::int64_t>("counts-out");
  EXPECT_EQ(out.read_value(), 1);
  EXPECT_EQ(out.read_value(), 2);
  // The store declared in process() is an ordinary logged store.
  EXPECT_EQ((*d.store<std::string, std::int64_t>("counts").get("a")), 2);
  EXPECT_EQ(d.records("test-driver-counts-changelog").size(), 2u);
}

// A processor that sums in memory and writes its sums back only when the task commits
// (processor_context::before_commit): the store holds nothing between commits, then every
// sum, and the changelog gets one record per key per commit.
namespace {
class summing_in_memory : public sluice::processor<std::string, event, std::string, std::int64_t> {
 public:
  void init(context_type& ctx) override {
    sums_.emplace(ctx.store<std::string, std::int64_t>("sums"));
    ctx.before_commit([this] {
      ++write_backs;
      for (auto& [k, v] : pending_) sums_->put(k, sums_->get(k).value_or(0) + v);
      pending_.clear();
    });
  }
  void process(const sluice::record<std::string, event>& r) override { pending_[r.key] += r.value.n; }
  static inline int write_backs = 0;

 private:
  std::optional<sluice::key_value_store<std::string, std::int64_t>> sums_;
  std::map<std::string, std::int64_t> pending_;
};
}  // namespace

TEST(processor_api, before_commit_callbacks_write_back_what_a_processor_holds_as_part_of_each_commit) {
  sluice::streams_builder b;
  b.add_state_store({.name = "sums"});
  b.stream<std::string, event>("events").process([] { return std::make_unique<summing_in_memory>(); }, "sums");
  summing_in_memory::write_backs = 0;
  topology_test_driver d(b.build(), sluice::config{}, {.commit_every_records = 3});
  auto in = d.input_topic<std::string, event>("events");
  auto sums = d.store<std::string, std::int64_t>("sums");
  const std::string changelog = d.application_id() + "-sums-changelog";
  in.pipe("a", event{"a", 1});
  in.pipe("a", event{"a", 2});
  EXPECT_EQ(summing_in_memory::write_backs, 0);
  EXPECT_FALSE(sums.get("a"));  // held by the processor until the commit
  in.pipe("b", event{"b", 5});  // the third record: the commit
  EXPECT_EQ(summing_in_memory::write_backs, 1);
  EXPECT_EQ(sums.get("a"), 3);
  EXPECT_EQ(sums.get("b"), 5);
  EXPECT_EQ(d.records(changelog).size(), 2u);
  for (int i = 0; i < 3; ++i) in.pipe("a", event{"a", 1});
  EXPECT_EQ(summing_in_memory::write_backs, 2);
  EXPECT_EQ(sums.get("a"), 6);
  EXPECT_EQ(d.records(changelog).size(), 3u);
}

TEST(processor_api, the_context_says_whether_the_app_runs_exactly_once) {
  struct reporting : sluice::processor<std::string, event> {
    explicit reporting(int* seen) : seen_(seen) {}
    void process(const sluice::record<std::string, event>&) override { *seen_ = context().exactly_once() ? 1 : 0; }
    int* seen_;
  };
  for (const std::string guarantee : {"at_least_once", "exactly_once"}) {
    int seen = -1;
    sluice::streams_builder b;
    b.stream<std::string, event>("events").process([&seen] { return std::make_unique<reporting>(&seen); });
    sluice::config c;
    c.set("processing.guarantee", guarantee);
    topology_test_driver d(b.build(), c);
    d.input_topic<std::string, event>("events").pipe("a", event{"a", 1});
    EXPECT_EQ(seen, guarantee == "exactly_once" ? 1 : 0) << guarantee;
  }
}

TEST(processor_api, context_used_before_init_is_a_clear_error_not_a_crash) {
  sluice::streams_builder b;
  b.stream<std::string, event>("events").process([] { return std::make_unique<context_in_constructor>(); });
  auto message = sluice::test::error_of([&] { topology_test_driver d(b.build()); }, sluice::errc::invalid_topology);
  EXPECT_NE(message.find("before init()"), std::string::npos) << message;
  EXPECT_NE(message.find("constructor"), std::string::npos) << message;
}

TEST(processor_api, store_declared_in_process_and_again_by_add_state_store_is_named_twice) {
  sluice::streams_builder b;
  b.add_state_store({.name = "counts"});
  auto message = sluice::test::error_of(
      [&] {
        b.stream<std::string, event>("events").process([] { return std::make_unique<counting_without_base_init>(); },
                                                       sluice::materialized{.name = "counts"});
      },
      sluice::errc::invalid_topology);
  EXPECT_NE(message.find("'counts' is declared twice"), std::string::npos) << message;
}

TEST(error_handlers, dead_letter_keeps_original_bytes_and_names_the_error) {
  sluice::config c;
  c.set("deserialization.error.handler", "dead_letter");
  sluice::streams_builder b;
  b.stream<std::string, event>("events").to("out");
  topology_test_driver d(b.build(), c);
  d.pipe_raw("events", std::string_view("k"), std::string_view("{broken"), 5);
  d.input_topic<std::string, event>("events").pipe("k", event{"u", 1});
  EXPECT_EQ((d.output_topic<std::string, event>("out").size()), 1u);
  auto& dlq = d.records("test-driver-dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(*dlq.front().value, "{broken");
  EXPECT_EQ(**dlq.front().headers.last("sluice.error.kind"), "deserialization");
  EXPECT_EQ(**dlq.front().headers.last("sluice.source.topic"), "events");
  EXPECT_EQ(**dlq.front().headers.last("sluice.source.offset"), "0");
  EXPECT_EQ(d.metrics().total("sluice_records_dead_lettered_total"), 1);
}

// Issue 12, finding 5: a value the broker took (just under its 1,048,588-byte default) whose
// dead-letter copy is over the producer's message.max.bytes, set lower here. The copy is cut
// to a budget derived from that limit, less its headers and framing, in one send, and the
// records after it are processed.
TEST(error_handlers, dead_letter_copy_over_the_producers_message_max_bytes_is_cut_to_fit_it_with_the_reason) {
  sluice::config c;
  c.set("deserialization.error.handler", "dead_letter");
  c.set("producer.message.max.bytes", "20000");
  sluice::streams_builder b;
  b.stream<std::string, event>("events").to("out");
  topology_test_driver d(b.build(), c);
  const std::string poison = "{broken" + std::string(1'040'000, 'x');
  d.pipe_raw("events", std::string_view("k"), std::string_view(poison), 5, {{"trace", std::string("t-1")}});
  d.input_topic<std::string, event>("events").pipe("k", event{"u", 1});
  EXPECT_EQ((d.output_topic<std::string, event>("out").size()), 1u) << "the records after it are processed";
  auto& dlq = d.records("test-driver-dlq");
  ASSERT_EQ(dlq.size(), 1u);
  const auto& dead = dlq.front();
  ASSERT_TRUE(dead.value.has_value());
  EXPECT_EQ(*dead.value, poison.substr(0, dead.value->size())) << "a prefix of the original value";
  EXPECT_EQ(dead.key, "k");
  // Key, value, headers and framing within the producer's limit, and no byte budget wasted:
  // the value takes what the headers leave.
  std::size_t bytes = 64 + dead.key->size() + dead.value->size();
  for (const auto& h : dead.headers) bytes += 10 + h.key.size() + (h.value ? h.value->size() : 0);
  EXPECT_LE(bytes, 20000u);
  EXPECT_GT(dead.value->size(), 18000u);
  EXPECT_EQ(**dead.headers.last("sluice.original.value.bytes"), std::to_string(poison.size()));
  EXPECT_EQ(**dead.headers.last("sluice.original.key.bytes"), "1");
  const std::string note = **dead.headers.last("sluice.truncated");
  EXPECT_NE(note.find("exceeds the producer's message.max.bytes (20000)"), std::string::npos) << note;
  EXPECT_NE(note.find("value " + std::to_string(dead.value->size()) + " of " + std::to_string(poison.size())),
            std::string::npos)
      << note;
  EXPECT_EQ(**dead.headers.last("sluice.error.kind"), "deserialization");
  EXPECT_EQ(**dead.headers.last("trace"), "t-1") << "small original headers are kept";
  EXPECT_EQ(d.metrics().total("sluice_records_dead_lettered_total"), 1);
  EXPECT_EQ(d.metrics().total("sluice_records_dead_lettered_truncated_total"), 1);
}

namespace {
/// "in" -> a value of `n` bytes per record n -> "out": one input makes an output of any size.
sluice::topology inflating_topology() {
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("in")
      .map_values([](std::int64_t n) { return std::string(static_cast<std::size_t>(n), 'v'); })
      .to("out");
  return b.build();
}
}  // namespace

// Issue 12: an output record over its topic's limit failed the transaction under exactly-once
// and stopped the job on every restart. It is caught before it is produced: a processing
// error of the input record, under the processing handler.
TEST(error_handlers, an_output_record_over_message_max_bytes_is_a_processing_error_dead_lettered_whole) {
  sluice::config c;
  c.set("processing.error.handler", "dead_letter");
  c.set("producer.message.max.bytes", "20000");
  topology_test_driver d(inflating_topology(), c);
  auto in = d.input_topic<std::string, std::int64_t>("in");
  in.pipe("a", 100);
  in.pipe("big", 30000);
  in.pipe("b", 19000);
  auto out = d.output_topic<std::string, std::string>("out");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.read_key(), "a");
  EXPECT_EQ(out.read_key(), "b") << "a record just under the limit passes";
  auto& dlq = d.records("test-driver-dlq");
  ASSERT_EQ(dlq.size(), 1u);
  EXPECT_EQ(dlq.front().key, "big") << "the input record, whole";
  EXPECT_EQ(**dlq.front().headers.last("sluice.error.kind"), "processing");
  const std::string message = **dlq.front().headers.last("sluice.error.message");
  EXPECT_NE(message.find("for topic 'out' exceeds the limit of 20000 bytes set by the producer's message.max.bytes"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("a record of 300"), std::string::npos) << "its size: " << message;
  EXPECT_EQ(d.metrics().total("sluice_records_dead_lettered_total"), 1);
}

TEST(error_handlers, an_output_record_over_message_max_bytes_under_fail_stops_naming_topic_size_limit_and_setting) {
  sluice::config c;
  c.set("producer.message.max.bytes", "20000");
  topology_test_driver d(inflating_topology(), c);
  auto in = d.input_topic<std::string, std::int64_t>("in");
  const auto message = sluice::test::error_of([&] { in.pipe("big", 30000); }, sluice::errc::processing);
  EXPECT_NE(message.find("in[0]@0"), std::string::npos) << message;
  EXPECT_NE(message.find("topic 'out'"), std::string::npos) << message;
  EXPECT_NE(message.find("a record of 300"), std::string::npos) << message;
  EXPECT_NE(message.find("limit of 20000 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("raise producer.message.max.bytes"), std::string::npos) << message;
  EXPECT_TRUE((d.output_topic<std::string, std::string>("out").empty())) << "nothing was produced";
}

TEST(error_handlers,
     a_producer_message_max_bytes_outside_librdkafkas_range_or_not_a_number_is_refused_naming_key_and_value) {
  for (const std::string bad : {"999", "20k", "2000000000"}) {
    sluice::config c;
    c.set("producer.message.max.bytes", bad);
    const auto message =
        sluice::test::error_of([&] { topology_test_driver d(inflating_topology(), c); }, sluice::errc::invalid_config);
    EXPECT_NE(message.find("message.max.bytes"), std::string::npos) << message;
    EXPECT_NE(message.find(bad), std::string::npos) << message;
  }
}

TEST(error_handlers, an_output_record_over_message_max_bytes_under_log_and_continue_is_skipped_and_counted) {
  sluice::config c;
  c.set("processing.error.handler", "log_and_continue");
  c.set("producer.message.max.bytes", "20000");
  topology_test_driver d(inflating_topology(), c);
  auto in = d.input_topic<std::string, std::int64_t>("in");
  in.pipe("big", 30000);
  in.pipe("a", 10);
  auto out = d.output_topic<std::string, std::string>("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.read_key(), "a");
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(error_handlers, log_and_continue_skips_and_counts_processing_failures) {
  sluice::config c;
  c.set("processing.error.handler", "log_and_continue");
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>("in")
      .map_values([](std::int64_t v) {
        if (v == 0) throw std::runtime_error("division by zero");
        return 100 / v;
      })
      .to("out");
  topology_test_driver d(b.build(), c);
  auto in = d.input_topic<std::string, std::int64_t>("in");
  in.pipe("a", 0);
  in.pipe("b", 4);
  EXPECT_EQ((d.output_topic<std::string, std::int64_t>("out").read_value()), 25);
  EXPECT_EQ(d.metrics().total("sluice_records_skipped_total"), 1);
}

TEST(error_handlers, fail_stops_with_a_message_naming_the_record_and_the_fix) {
  sluice::streams_builder b;
  b.stream<std::string, event>("events").to("out");
  topology_test_driver d(b.build());
  try {
    d.pipe_raw("events", std::nullopt, std::string_view(R"({"user":"u","n":1})"), 5);
    FAIL() << "expected the fail handler to throw";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::serialization);
    std::string msg = e.what();
    EXPECT_NE(msg.find("events[0]@0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("null key"), std::string::npos) << msg;
    EXPECT_NE(msg.find("log_and_continue or dead_letter"), std::string::npos) << msg;
  }
}
