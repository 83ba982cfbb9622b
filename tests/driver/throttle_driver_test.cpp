// The throttle topology through the TopologyTestDriver: every test computes the expected
// pass/throttle decisions with a reference model written here (a plain list of passed
// effective times per key, no sluice code) and compares them record by record.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "error_of.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/throttle.hpp"

using sluice::testing::topology_test_driver;
using sluice::topologies::throttle_options;
using sluice::topologies::throttled_action;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t day_ms = 24LL * 3600 * 1000;

/// The specification, literally: effective time per key, and a list of passed times.
class reference_model {
 public:
  bool offer(const std::string& key, std::int64_t timestamp, std::int64_t window_ms, std::int64_t limit) {
    auto& k = keys_[key];
    std::int64_t t = k.seen ? std::max(timestamp, k.last_effective) : timestamp;
    k.seen = true;
    k.last_effective = t;
    std::int64_t in_window = 0;
    for (auto p : k.passed)
      if (p > t - window_ms && p <= t) ++in_window;
    if (in_window >= limit) return false;
    k.passed.push_back(t);
    return true;
  }

 private:
  struct key_state {
    bool seen = false;
    std::int64_t last_effective = 0;
    std::vector<std::int64_t> passed;
  };
  std::map<std::string, key_state> keys_;
};

struct harness {
  explicit harness(throttle_options o, sluice::config c = {}) {
    sluice::streams_builder b;
    auto in = b.stream<std::string, std::string>("in");
    auto out = sluice::topologies::apply_throttle(b, in, o);
    out.passed.to("passed");
    if (out.throttled) out.throttled->to("throttled");
    driver = std::make_unique<topology_test_driver>(b.build(), std::move(c));
  }
  /// Pipes one record; returns whether it passed (read from the output topics).
  bool pipe(const std::string& key, const std::string& value, std::int64_t ts) {
    auto before = driver->records("passed").size();
    driver->input_topic<std::string, std::string>("in").pipe(key, value, ts);
    return driver->records("passed").size() > before;
  }
  std::unique_ptr<topology_test_driver> driver;
};

throttle_options opts(std::chrono::milliseconds window, std::int64_t limit) {
  throttle_options o;
  o.window = window;
  o.limit = limit;
  return o;
}

}  // namespace

TEST(throttle, passes_exactly_limit_records_per_window) {
  harness h(opts(10s, 3));
  std::vector<bool> got;
  for (int i = 0; i < 6; ++i) got.push_back(h.pipe("k", "r" + std::to_string(i), 1000 + i));
  EXPECT_EQ(got, (std::vector<bool>{true, true, true, false, false, false}));
  auto passed = h.driver->output_topic<std::string, std::string>("passed").read_all();
  ASSERT_EQ(passed.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(passed[static_cast<std::size_t>(i)].value, "r" + std::to_string(i));
    EXPECT_EQ(passed[static_cast<std::size_t>(i)].timestamp, 1000 + i);
  }
  EXPECT_EQ(h.driver->metrics().total("sluice_throttle_throttled_total"), 3);
  EXPECT_EQ(h.driver->metrics().total("sluice_throttle_passed_total"), 3);
}

TEST(throttle, record_exactly_one_window_after_a_passed_one_passes) {
  harness h(opts(1s, 1));
  // (t - window, t] excludes t - window: 1000 ms after a pass, the pass no longer counts.
  EXPECT_TRUE(h.pipe("k", "a", 0));
  EXPECT_FALSE(h.pipe("k", "b", 999));
  EXPECT_TRUE(h.pipe("k", "c", 1000));
  EXPECT_FALSE(h.pipe("k", "d", 1999));
  EXPECT_TRUE(h.pipe("k", "e", 2000));
  EXPECT_TRUE(h.pipe("other", "f", 2000));  // keys are independent
}

TEST(throttle, out_of_order_timestamps_count_at_the_effective_time) {
  harness h(opts(1s, 1));
  EXPECT_TRUE(h.pipe("k", "a", 5000));
  EXPECT_FALSE(h.pipe("k", "b", 100));   // effective 5000
  EXPECT_FALSE(h.pipe("k", "c", 5999));  // effective 5999: 5000 still in (4999, 5999]
  EXPECT_TRUE(h.pipe("k", "d", 6000));   // effective 6000
  EXPECT_FALSE(h.pipe("k", "e", 0));     // effective 6000
  EXPECT_TRUE(h.pipe("j", "f", 0));      // a new key starts at its own timestamp
  EXPECT_FALSE(h.pipe("j", "g", 999));
}

TEST(throttle, limit_one_matches_the_reference_model_on_shuffled_timestamps) {
  harness h(opts(2s, 1));
  reference_model model;
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) {
    std::string key = "k" + std::to_string(rng() % 20);
    // Up to 1.5 s out of order; from 0 up, since a negative record timestamp is invalid (a
    // deserialization error, as Kafka Streams' default timestamp extractor has it).
    std::int64_t ts = i * 10 + static_cast<std::int64_t>(rng() % 3000);
    ASSERT_EQ(h.pipe(key, std::to_string(i), ts), model.offer(key, ts, 2000, 1)) << "record " << i;
  }
}

TEST(throttle, randomized_limits_match_the_reference_model) {
  for (std::int64_t limit : {2, 5, 17}) {
    harness h(opts(3s, limit));
    reference_model model;
    std::mt19937 rng(static_cast<unsigned>(limit));
    for (int i = 0; i < 4000; ++i) {
      std::string key = "k" + std::to_string(rng() % 7);
      std::int64_t ts = i * 5 + static_cast<std::int64_t>(rng() % 500);
      ASSERT_EQ(h.pipe(key, std::to_string(i), ts), model.offer(key, ts, 3000, limit))
          << "limit " << limit << " record " << i;
    }
  }
}

TEST(throttle, thirty_one_day_window) {
  harness h(opts(31LL * day_ms * 1ms, 2));
  reference_model model;
  const std::vector<std::int64_t> ts = {0,           day_ms,          30 * day_ms, 31 * day_ms - 1, 31 * day_ms,
                                        32 * day_ms, 32 * day_ms + 1, 62 * day_ms, 63 * day_ms};
  std::vector<bool> got, want;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    got.push_back(h.pipe("k", std::to_string(i), ts[i]));
    want.push_back(model.offer("k", ts[i], 31 * day_ms, 2));
  }
  EXPECT_EQ(got, want);
  // Spelled out: 0 and 1 d pass; 30 d and 31 d - 1 ms are throttled; at 31 d the pass at 0
  // has left (0, 31 d]; at 32 d the one at 1 d has left too.
  EXPECT_EQ(got, (std::vector<bool>{true, true, false, false, true, true, false, true, true}));
}

TEST(throttle, one_hundred_thousand_keys) {
  harness h(opts(1min, 2));
  reference_model model;
  constexpr int keys = 100'000;
  std::size_t passed = 0, want_passed = 0;
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < keys; ++k) {
      std::string key = "user-" + std::to_string(k);
      std::int64_t ts = 1000 + round * 100 + k % 50;
      passed += h.pipe(key, "v", ts);
      want_passed += model.offer(key, ts, 60'000, 2);
    }
  EXPECT_EQ(want_passed, 2u * keys);
  EXPECT_EQ(passed, want_passed);
  EXPECT_EQ(h.driver->metrics().total("sluice_throttle_throttled_total"), keys);
}

TEST(throttle, store_holds_at_most_limit_times_per_key) {
  harness h(opts(10s, 5));
  for (int i = 0; i < 1000; ++i) h.pipe("k", "v", i * 100);  // 100 per window offered, 5 pass
  // One meta entry holding at most `limit` passed times, however many records came.
  auto store = h.driver->store<std::string, std::string>("throttle-log");
  EXPECT_EQ(store.approximate_count(), 1u);
  std::size_t entries = 0;
  for (auto it = store.all(); it.valid(); it.next()) {
    ++entries;
    // Tag byte, last effective time, then the passes at 90000..90400, in (89900, 99900].
    EXPECT_EQ(it.value().size(), 9u + 8u * 5u);
  }
  EXPECT_EQ(entries, 1u);
}

TEST(throttle, a_limit_above_the_held_times_keeps_at_most_limit_entries) {
  // More times in the window than a meta value holds: they spill into entries of their own,
  // one per passed time, and go back into the value once the window has emptied.
  constexpr std::int64_t limit = sluice::topologies::throttle_detail::log_inline_capacity + 4;
  harness h(opts(10s, limit));
  reference_model model;
  for (int i = 0; i < 1000; ++i)  // 100 per window offered, `limit` pass
    ASSERT_EQ(h.pipe("k", "v", i * 100), model.offer("k", i * 100, 10'000, limit)) << "record " << i;
  auto store = h.driver->store<std::string, std::string>("throttle-log");
  EXPECT_EQ(store.approximate_count(), 1u + limit);
  // A gap longer than the window: every entry leaves, the one pass is held in the value.
  ASSERT_TRUE(h.pipe("k", "v", 200'000));
  EXPECT_EQ(store.approximate_count(), 1u);
}

namespace {

std::string be64(std::uint64_t v) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  return out;
}

/// Writes a key's state as the layout before the fold did: a 24-byte meta value (last
/// effective time, head, tail) and one 8-byte entry per passed time, sequence numbers from
/// `head`. A store restored from that layout's changelog holds exactly these bytes.
void write_unfolded(topology_test_driver& driver, const std::string& key, std::uint64_t head,
                    const std::vector<std::int64_t>& passed, std::int64_t last_effective) {
  namespace td = sluice::topologies::throttle_detail;
  auto raw = driver.store<std::string, std::string>("throttle-log");
  std::string k;
  td::log_key_serde::serialize(td::log_key{key, true, 0}, k);
  raw.put(k, be64(static_cast<std::uint64_t>(last_effective)) + be64(head) + be64(head + passed.size()));
  for (std::size_t i = 0; i < passed.size(); ++i) {
    td::log_key_serde::serialize(td::log_key{key, false, head + i}, k);
    raw.put(k, be64(static_cast<std::uint64_t>(passed[i])));
  }
}

}  // namespace

TEST(throttle, a_store_written_by_the_layout_before_the_fold_gives_the_same_decisions) {
  harness h(opts(10s, 12));
  reference_model model;
  // "a" at its limit (twelve passes, first sequence number 0), "b" with two (numbers 3 and 4).
  std::vector<std::int64_t> a, b;
  for (std::int64_t t = 0; t < 1200; t += 100) a.push_back(t);
  b = {500, 600};
  for (auto t : a) model.offer("a", t, 10'000, 12);
  for (auto t : b) model.offer("b", t, 10'000, 12);
  write_unfolded(*h.driver, "a", 0, a, 1100);
  write_unfolded(*h.driver, "b", 3, b, 600);
  std::mt19937 rng(11);
  std::int64_t ts = 1000;
  for (int i = 0; i < 2000; ++i) {
    std::string key = rng() % 2 ? "a" : "b";
    ts += static_cast<std::int64_t>(rng() % 400);
    ASSERT_EQ(h.pipe(key, "v", ts), model.offer(key, ts, 10'000, 12)) << "record " << i;
  }
  // A gap longer than the window: each key's next decision holds its times in its value.
  ts += 20'000;
  ASSERT_TRUE(h.pipe("a", "v", ts));
  ASSERT_TRUE(h.pipe("b", "v", ts));
  auto store = h.driver->store<std::string, std::string>("throttle-log");
  EXPECT_EQ(store.approximate_count(), 2u);
}

TEST(throttle, throttled_records_carry_the_reason_header) {
  throttle_options o = opts(1min, 1);
  o.on_throttled = throttled_action::forward;
  harness h(o);
  sluice::headers hs{{"trace", std::string("t-1")}};
  h.driver->input_topic<std::string, std::string>("in").pipe("alice", "first", 500, hs);
  h.driver->input_topic<std::string, std::string>("in").pipe("alice", "second", 600, hs);

  auto passed = h.driver->output_topic<std::string, std::string>("passed").read_all();
  ASSERT_EQ(passed.size(), 1u);
  EXPECT_EQ(passed[0].key, "alice");
  EXPECT_EQ(passed[0].value, "first");
  EXPECT_EQ(passed[0].timestamp, 500);
  EXPECT_EQ(passed[0].headers, hs);  // unchanged

  auto throttled = h.driver->output_topic<std::string, std::string>("throttled").read_all();
  ASSERT_EQ(throttled.size(), 1u);
  EXPECT_EQ(throttled[0].value, "second");
  EXPECT_EQ(throttled[0].timestamp, 600);
  auto* reason = throttled[0].headers.last(sluice::topologies::throttle_reason_header);
  ASSERT_NE(reason, nullptr);
  ASSERT_TRUE(reason->has_value());
  auto j = nlohmann::json::parse(**reason);
  EXPECT_EQ(j.at("key"), "alice");
  EXPECT_EQ(j.at("limit"), 1);
  EXPECT_EQ(j.at("window_ms"), 60000);
  EXPECT_NE(throttled[0].headers.last("trace"), nullptr);
}

TEST(throttle, key_fields_from_json_values_form_the_throttle_key) {
  throttle_options o = opts(1min, 1);
  o.key_fields = {"workflow", "recipient"};
  harness h(o, sluice::config{}.set("processing.error.handler", "log_and_continue"));
  auto v = [](std::string wf, std::string rc, int id) {
    return nlohmann::json{{"workflow", wf}, {"recipient", rc}, {"id", id}}.dump();
  };
  EXPECT_TRUE(h.pipe("x", v("wf1", "alice", 1), 0));
  EXPECT_FALSE(h.pipe("y", v("wf1", "alice", 2), 1));  // the record key plays no part
  EXPECT_TRUE(h.pipe("x", v("wf1", "bob", 3), 2));
  EXPECT_TRUE(h.pipe("x", v("wf2", "alice", 4), 3));
  // Parts are length-prefixed: ("a,b", "c") is not ("a", "b,c").
  EXPECT_TRUE(h.pipe("x", v("a,b", "c", 5), 4));
  EXPECT_TRUE(h.pipe("x", v("a", "b,c", 6), 5));
  // Non-string fields count by their JSON text.
  EXPECT_TRUE(h.pipe("x", nlohmann::json{{"workflow", 7}, {"recipient", true}}.dump(), 6));
  EXPECT_FALSE(h.pipe("x", nlohmann::json{{"workflow", 7}, {"recipient", true}}.dump(), 7));
  // A value without a key field is a processing error: skipped and counted, not passed.
  EXPECT_FALSE(h.pipe("x", nlohmann::json{{"workflow", "wf1"}}.dump(), 8));
  EXPECT_FALSE(h.pipe("x", "not json", 9));
  EXPECT_EQ(h.driver->metrics().total("sluice_records_skipped_total"), 2);
}

TEST(throttle, rules_arriving_mid_stream_apply_to_later_records) {
  throttle_options o = opts(1min, 1);
  o.key_fields = {"workflow", "recipient"};
  o.rules_topic = "throttle-rules";
  harness h(o);
  auto v = [](std::string wf, std::string rc) { return nlohmann::json{{"workflow", wf}, {"recipient", rc}}.dump(); };
  reference_model model;
  auto check = [&](const std::string& wf, const std::string& rc, std::int64_t ts, std::int64_t w, std::int64_t l) {
    bool want = model.offer(wf + "," + rc, ts, w, l);
    EXPECT_EQ(h.pipe("k", v(wf, rc), ts), want) << wf << "/" << rc << " at " << ts;
  };
  check("wf1", "alice", 0, 60'000, 1);
  check("wf1", "alice", 10, 60'000, 1);  // default: limit 1 per minute
  auto rules = h.driver->input_topic<std::string, std::string>("throttle-rules");
  rules.pipe("wf1", R"({"window_ms": 1000, "limit": 3})", 20);
  check("wf1", "alice", 30, 1000, 3);  // the pass at 0 counts under the new rule too
  check("wf1", "alice", 40, 1000, 3);
  check("wf1", "alice", 50, 1000, 3);    // 3 in (−950, 50]: throttled
  check("wf1", "alice", 1001, 1000, 3);  // 0 left the window
  check("wf1", "bob", 60, 1000, 3);
  check("wf2", "alice", 70, 60'000, 1);  // no rule for wf2: defaults
  check("wf2", "alice", 80, 60'000, 1);
  // An invalid rule falls back to the defaults and is counted.
  rules.pipe("wf2", R"({"window_ms": 5, "limit": 3})", 90);
  check("wf2", "alice", 100, 60'000, 1);
  EXPECT_GE(h.driver->metrics().total("sluice_throttle_invalid_rules_total"), 1);
  // Changing the rule again applies from the next record.
  rules.pipe("wf1", R"({"limit": 1})", 2000);
  check("wf1", "alice", 2001, 60'000, 1);
}

TEST(throttle, job_topology_passes_bytes_unchanged_and_drops_without_a_throttled_topic) {
  throttle_options o = opts(1s, 1);
  topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", o));
  d.pipe_raw("in", std::string_view("k"), std::nullopt, 5, {{"h", std::nullopt}});
  d.pipe_raw("in", std::string_view("k"), std::string_view("x"), 6);
  d.pipe_raw("in", std::nullopt, std::string_view("y"), 7);
  auto& out = d.records("out");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "k");
  EXPECT_FALSE(out[0].value.has_value());
  EXPECT_EQ(out[0].timestamp, 5);
  EXPECT_EQ(out[0].headers, (sluice::headers{{"h", std::nullopt}}));
  EXPECT_FALSE(out[1].key.has_value());
  EXPECT_EQ(d.metrics().total("sluice_throttle_throttled_total"), 1);
}

TEST(throttle, job_topology_refuses_to_write_into_its_own_input_naming_the_setting) {
  for (const auto& [output, throttled, setting] :
       {std::tuple{"in", "", "output.topic"}, {"out", "in", "throttled.topic"}}) {
    auto msg =
        sluice::test::error_of([&] { sluice::topologies::throttle_job_topology("in", output, throttled, opts(1s, 1)); },
                               sluice::errc::invalid_topology);
    EXPECT_NE(msg.find(std::string(setting) + " 'in' is also input.topic"), std::string::npos) << msg;
  }
  // Passed and throttled records may share a topic: neither loops.
  EXPECT_NO_THROW(sluice::topologies::throttle_job_topology("in", "out", "out", opts(1s, 1)));
  throttle_options o = opts(1s, 1);
  o.rules_topic = "in";
  auto msg = sluice::test::error_of([&] { sluice::topologies::throttle_job_topology("in", "out", "", o); },
                                    sluice::errc::invalid_topology);
  EXPECT_NE(msg.find("throttle.rules.topic 'in' is also input.topic"), std::string::npos) << msg;
}

TEST(throttle, options_out_of_range_are_rejected_with_the_value_and_range) {
  auto rejects = [](throttle_options o, const std::string& needle) {
    auto msg = sluice::test::error_of([&] { sluice::topologies::validate(o); }, sluice::errc::invalid_config);
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  rejects(opts(999ms, 1), "window 999 ms is out of range; allowed 1000 ms (1 s) .. 2678400000 ms (31 days)");
  rejects(opts(32LL * day_ms * 1ms, 1), "window 2764800000 ms");
  rejects(opts(1s, 0), "limit 0 is out of range; allowed 1 .. 1000000");
  rejects(opts(1s, 1'000'001), "limit 1000001");
  EXPECT_NO_THROW(sluice::topologies::validate(opts(1s, 1'000'000)));
  EXPECT_NO_THROW(sluice::topologies::validate(opts(31LL * day_ms * 1ms, 1)));
}
