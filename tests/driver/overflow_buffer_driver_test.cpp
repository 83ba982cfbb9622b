// The overflow buffer through the TopologyTestDriver: the issue's "Done when" list. Wall
// clock moves only with advance_wall_clock(), so every emission time is known exactly; the
// token-bucket bound is checked on the output timestamps of every customer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "error_of.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/overflow_buffer.hpp"

using sluice::raw_message;
using sluice::testing::topology_test_driver;
using sluice::topologies::overflow_buffer_options;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t start_ms = 1'700'000'000'000;

struct harness {
  explicit harness(overflow_buffer_options o = {}, sluice::config c = {}, sluice::testing::driver_options d = {}) {
    sluice::streams_builder b;
    auto out = sluice::topologies::apply_overflow_buffer(
        b,
        b.stream<sluice::topologies::overflow_detail::bytes, sluice::topologies::overflow_detail::bytes>(
            "notifications"),
        o);
    out.emitted.to("out");
    if (out.expired) out.expired->to("expired");
    if (!c.contains("processing.error.handler")) c.set("processing.error.handler", "dead_letter");
    d.start_wall_clock_ms = start_ms;
    driver = std::make_unique<topology_test_driver>(b.build(), std::move(c), d);
  }

  void pipe(const std::string& customer, const std::string& value, std::optional<std::int64_t> ts = std::nullopt) {
    driver->pipe_raw("notifications", customer, value, ts.value_or(driver->wall_clock_ms()));
  }
  void rate(const std::string& customer, const std::string& value) {
    driver->pipe_raw("customer-rates", customer, value, driver->wall_clock_ms());
  }
  void advance(std::int64_t ms) { driver->advance_wall_clock(std::chrono::milliseconds(ms)); }
  /// Moves the clock in drain-interval steps, so every tick happens.
  void run_for(std::int64_t ms, std::int64_t step = 100) {
    for (std::int64_t t = 0; t < ms; t += step) advance(step);
  }
  std::vector<raw_message> take(const std::string& topic) {
    auto& q = driver->records(topic);
    std::vector<raw_message> out(std::make_move_iterator(q.begin()), std::make_move_iterator(q.end()));
    q.clear();
    return out;
  }
  double metric(const std::string& name) { return driver->metrics().total(name); }

  std::unique_ptr<topology_test_driver> driver;
};

std::string header(const raw_message& m, std::string_view key) {
  const auto* v = m.headers.last(key);
  return v != nullptr && *v ? **v : std::string("<absent>");
}

std::string msg(int n) { return R"({"n":)" + std::to_string(n) + "}"; }

int n_of(const raw_message& m) { return nlohmann::json::parse(*m.value).at("n").get<int>(); }

/// The issue's bound, literally: in any interval of emission time of length L a customer
/// has at most max(1, r) + r*L/1000 emissions.
void expect_token_bucket_bound(const std::vector<raw_message>& out, double rate) {
  std::map<std::string, std::vector<std::int64_t>> times;
  for (const auto& m : out) times[m.key.value_or("")].push_back(m.timestamp);
  for (auto& [customer, ts] : times) {
    std::sort(ts.begin(), ts.end());
    for (std::size_t i = 0; i < ts.size(); ++i) {
      for (std::size_t j = i; j < ts.size(); ++j) {
        const double allowed = std::max(1.0, rate) + rate * static_cast<double>(ts[j] - ts[i]) / 1000.0;
        ASSERT_LE(static_cast<double>(j - i + 1), allowed + 1e-9)
            << "customer " << customer << ": " << (j - i + 1) << " emissions within " << ts[j] - ts[i] << " ms";
      }
    }
  }
}

overflow_buffer_options rate_opts(double rate) {
  overflow_buffer_options o;
  o.default_rate_per_second = rate;
  return o;
}

}  // namespace

// The README's worked example: rate 2/s, a burst of 6 at once. Two go out directly (the
// bucket's burst is max(1, 2) = 2), four are buffered and drain one every 500 ms, in order.
TEST(overflow_buffer, job_topology_refuses_to_write_into_its_own_input_naming_the_setting) {
  for (const auto& [output, expired, setting] :
       {std::tuple{"notifications", "", "output.topic"}, {"push-out", "notifications", "expired.topic"}}) {
    auto msg = sluice::test::error_of(
        [&] { sluice::topologies::overflow_buffer_job_topology("notifications", output, expired, {}); },
        sluice::errc::invalid_topology);
    EXPECT_NE(msg.find(std::string(setting) + " 'notifications' is also input.topic"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(sluice::topologies::overflow_buffer_job_topology("notifications", "push-out", "", {}));
  // The rates table read from the input (or fed by the output) would copy every record into
  // each instance's global store.
  for (const auto& [rates, output, expected] :
       {std::tuple{"notifications", "push-out", "rates.topic 'notifications' is also input.topic"},
        {"customer-rates", "customer-rates", "output.topic 'customer-rates' is also rates.topic"}}) {
    overflow_buffer_options o;
    o.rates_topic = rates;
    auto msg = sluice::test::error_of(
        [&] { sluice::topologies::overflow_buffer_job_topology("notifications", output, "", o); },
        sluice::errc::invalid_topology);
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  }
}

TEST(overflow_buffer, worked_example_rate_two_burst_then_drain_in_order) {
  harness h(rate_opts(2));
  for (int i = 0; i < 6; ++i) h.pipe("c-42", msg(i));
  auto direct = h.take("out");
  ASSERT_EQ(direct.size(), 2u);
  EXPECT_EQ(n_of(direct[0]), 0);
  EXPECT_EQ(n_of(direct[1]), 1);
  for (const auto& m : direct) {
    EXPECT_EQ(m.timestamp, start_ms);
    EXPECT_EQ(header(m, "sluice-overflow-delay-ms"), "0");
    EXPECT_EQ(header(m, "sluice-overflow-input-timestamp"), std::to_string(start_ms));
  }
  EXPECT_EQ(h.metric("sluice_overflow_direct_total"), 2);
  EXPECT_EQ(h.metric("sluice_overflow_buffered_total"), 4);
  h.run_for(2000);
  auto drained = h.take("out");
  ASSERT_EQ(drained.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(n_of(drained[static_cast<std::size_t>(i)]), i + 2);
    EXPECT_EQ(drained[static_cast<std::size_t>(i)].timestamp, start_ms + 500 * (i + 1));
    EXPECT_EQ(header(drained[static_cast<std::size_t>(i)], "sluice-overflow-delay-ms"), std::to_string(500 * (i + 1)));
  }
  std::vector<raw_message> all = direct;
  all.insert(all.end(), drained.begin(), drained.end());
  expect_token_bucket_bound(all, 2);
  EXPECT_EQ(h.metric("sluice_overflow_drained_total"), 4);
}

TEST(overflow_buffer, a_record_arriving_without_a_token_is_buffered_then_drained) {
  harness h(rate_opts(2));
  for (int i = 0; i < 3; ++i) h.pipe("c", msg(i));  // 2 direct, 1 buffered
  h.take("out");
  h.advance(400);       // not yet a full token
  h.advance(300);       // 700 ms: one token, the buffered record (n=2) goes
  h.pipe("c", msg(3));  // 0.4 tokens: buffered, waits for its token
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 2);
  h.run_for(1000);
  out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 3);
}

TEST(overflow_buffer, fractional_rate_emits_one_record_every_two_seconds) {
  harness h(rate_opts(0.5));
  for (int i = 0; i < 4; ++i) h.pipe("slow", msg(i));
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 1u);  // burst max(1, 0.5) = 1
  h.run_for(6000);
  auto drained = h.take("out");
  ASSERT_EQ(drained.size(), 3u);
  for (std::size_t i = 0; i < drained.size(); ++i) {
    EXPECT_EQ(n_of(drained[i]), static_cast<int>(i) + 1);
    EXPECT_EQ(drained[i].timestamp, start_ms + 2000 * static_cast<std::int64_t>(i + 1));
  }
  out.insert(out.end(), drained.begin(), drained.end());
  expect_token_bucket_bound(out, 0.5);
}

TEST(overflow_buffer, rate_zero_holds_everything_until_the_rate_changes) {
  harness h;
  h.rate("held", R"({"rate_per_second": 0})");
  for (int i = 0; i < 3; ++i) h.pipe("held", msg(i));
  h.pipe("other", msg(100));  // default rate 10: direct
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, "other");
  h.run_for(10'000);
  EXPECT_TRUE(h.take("out").empty());
  EXPECT_EQ(h.metric("sluice_overflow_buffered_total"), 3);
  h.rate("held", R"({"rate_per_second": 100})");
  h.run_for(2000);
  out = h.take("out");
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(n_of(out[static_cast<std::size_t>(i)]), i);
}

TEST(overflow_buffer, a_rate_change_mid_backlog_applies_from_when_it_is_read) {
  harness h;
  h.rate("c", R"({"rate_per_second": 1})");
  for (int i = 0; i < 20; ++i) h.pipe("c", msg(i));
  EXPECT_EQ(h.take("out").size(), 1u);
  h.run_for(3000);
  auto slow = h.take("out");
  EXPECT_EQ(slow.size(), 3u);  // one per second
  const std::int64_t change_at = h.driver->wall_clock_ms();
  h.rate("c", R"({"rate_per_second": 10})");
  h.run_for(2000);
  auto fast = h.take("out");
  // Within 1 s of the change the customer is looked at again at the new rate: at least the
  // second after that runs at 10/s.
  EXPECT_GE(fast.size(), 10u);
  EXPECT_LE(fast.size(), 16u);  // all that was left
  std::vector<int> order;
  for (const auto& m : slow) order.push_back(n_of(m));
  for (const auto& m : fast) order.push_back(n_of(m));
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i) + 1);
  std::vector<raw_message> after;
  for (const auto& m : fast)
    if (m.timestamp >= change_at) after.push_back(m);
  expect_token_bucket_bound(after, 10);
}

TEST(overflow_buffer, an_invalid_rate_falls_back_to_the_default_and_is_counted) {
  harness h(rate_opts(1));
  h.rate("c", R"({"rate_per_second": "fast"})");
  h.rate("d", R"({"rate_per_second": -3})");
  h.pipe("c", msg(0));
  h.pipe("c", msg(1));
  h.pipe("d", msg(0));
  EXPECT_EQ(h.take("out").size(), 2u);  // default 1/s: one each
  EXPECT_GE(h.metric("sluice_overflow_invalid_rates_total"), 2);
}

TEST(overflow_buffer, scheduled_records_wait_for_deliver_at_and_join_the_line_by_it) {
  harness h(rate_opts(100));
  const std::int64_t t0 = start_ms;
  h.pipe("c", R"({"n":0,"deliver_at_ms":)" + std::to_string(t0 + 3000) + "}");
  h.pipe("c", R"({"n":1,"deliver_at_ms":)" + std::to_string(t0 + 1000) + "}");
  h.pipe("c", msg(2));  // not scheduled: direct, a later scheduled record does not hold it
  h.pipe("c", R"({"n":3,"deliver_at_ms":)" + std::to_string(t0 - 5000) + "}");  // in the past: due now
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(n_of(out[0]), 2);
  EXPECT_EQ(n_of(out[1]), 3);
  h.run_for(900);
  EXPECT_TRUE(h.take("out").empty());
  h.run_for(200);
  out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 1);
  EXPECT_GE(out[0].timestamp, t0 + 1000);
  h.run_for(2000);
  out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 0);
  EXPECT_GE(out[0].timestamp, t0 + 3000);
}

TEST(overflow_buffer, records_expire_after_the_default_ttl_into_the_expired_topic) {
  overflow_buffer_options o = rate_opts(1);
  o.default_ttl = 5000ms;
  harness h(o);
  for (int i = 0; i < 10; ++i) h.pipe("c", msg(i));
  h.run_for(8000);
  auto out = h.take("out");
  auto expired = h.take("expired");
  // 1 direct + one per second until the rest expire at 5 s.
  ASSERT_EQ(out.size() + expired.size(), 10u);
  for (const auto& m : out) EXPECT_LT(m.timestamp, start_ms + 5000);
  ASSERT_FALSE(expired.empty());
  for (const auto& m : expired) {
    auto j = nlohmann::json::parse(header(m, "sluice-overflow-expired"));
    EXPECT_EQ(j.at("customer"), "c");
    EXPECT_EQ(j.at("ttl_ms"), 5000);
    EXPECT_GE(j.at("age_ms").get<std::int64_t>(), 5000);
    EXPECT_EQ(m.timestamp, start_ms + j.at("age_ms").get<std::int64_t>());
  }
  // Input order kept across both outlets: what was emitted comes before what expired.
  std::vector<int> order;
  for (const auto& m : out) order.push_back(n_of(m));
  for (const auto& m : expired) order.push_back(n_of(m));
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i));
  EXPECT_EQ(h.metric("sluice_overflow_expired_total"), static_cast<double>(expired.size()));
}

TEST(overflow_buffer, a_per_record_ttl_shorter_than_the_default_applies) {
  harness h(rate_opts(1));
  h.pipe("c", msg(0));                              // direct
  h.pipe("c", R"({"n":1,"ttl_ms":1500})");          // buffered, expires at +1.5 s
  h.pipe("c", R"({"n":2,"ttl_ms":999999999999})");  // capped at the default 6 h
  h.run_for(3000);
  auto out = h.take("out");
  auto expired = h.take("expired");
  ASSERT_EQ(expired.size(), 0u) << "n=1 is the head at 1 s and gets the token then";
  ASSERT_EQ(out.size(), 3u);
  harness g(rate_opts(0.25));
  g.pipe("c", msg(0));
  g.pipe("c", R"({"n":1,"ttl_ms":1500})");
  g.run_for(5000);
  out = g.take("out");
  expired = g.take("expired");
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(n_of(expired[0]), 1);
  auto j = nlohmann::json::parse(header(expired[0], "sluice-overflow-expired"));
  EXPECT_EQ(j.at("ttl_ms"), 1500);
  EXPECT_LE(expired[0].timestamp, start_ms + 1600);  // no later than one tick after it expired
}

TEST(overflow_buffer, an_expired_record_is_never_emitted) {
  overflow_buffer_options o = rate_opts(2);
  o.default_ttl = 60'000ms;
  harness h(o);
  h.pipe("c", msg(0), start_ms - 120'000);  // already two minutes old: expired on arrival
  h.rate("z", R"({"rate_per_second": 0})");
  h.pipe("z", R"({"n":1,"ttl_ms":2000})");
  h.run_for(5000);
  h.rate("z", R"({"rate_per_second": 1000})");  // too late: it expired at +2 s
  h.run_for(2000);
  EXPECT_TRUE(h.take("out").empty());
  auto expired = h.take("expired");
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(n_of(expired[0]), 0);
  EXPECT_EQ(n_of(expired[1]), 1);
}

TEST(overflow_buffer, without_an_expired_topic_expired_records_are_dropped_and_counted) {
  overflow_buffer_options o = rate_opts(1);
  o.forward_expired = false;
  o.default_ttl = 1000ms;
  harness h(o);
  h.pipe("c", msg(0), start_ms - 5000);
  EXPECT_TRUE(h.take("out").empty());
  EXPECT_EQ(h.metric("sluice_overflow_expired_dropped_total"), 1);
}

// The customer store's changelog gets each customer's last state of a commit, not one record
// per direct record: three records each for two customers between two commits leave two
// changelog records, each the state the store holds (handled offset of the customer's last
// record, three tokens spent), and every record still goes out.
TEST(overflow_buffer, the_customer_store_logs_the_last_state_per_customer_per_commit) {
  harness h(rate_opts(1000), {}, {.commit_every_records = 6});
  for (int i = 0; i < 6; ++i) h.pipe(i % 2 == 0 ? "c-a" : "c-b", msg(i));
  EXPECT_EQ(h.take("out").size(), 6u);
  auto changelog = h.take(h.driver->application_id() + "-overflow-customers-changelog");
  ASSERT_EQ(changelog.size(), 2u);
  auto customers = h.driver->store<std::string, std::string>("overflow-customers");
  std::set<std::string> seen;
  for (const auto& m : changelog) {
    ASSERT_TRUE(m.key && m.value);
    seen.insert(*m.key);
    EXPECT_EQ(m.value, customers.get(*m.key));
    const auto st = sluice::topologies::overflow_detail::customer_state::deserialize(*m.value);
    EXPECT_EQ(st.handled_offset, *m.key == "c-a" ? 4 : 5);
    EXPECT_DOUBLE_EQ(st.tokens, 997);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"c-a", "c-b"}));
}

// The customer states stay decoded in the processor between commits and reach the store at
// the commit (processor_context::before_commit): after two of four records nothing is
// stored; the commit stores the state of the last record.
TEST(overflow_buffer, customer_states_reach_the_store_at_each_commit) {
  harness h(rate_opts(1000), {}, {.commit_every_records = 4});
  auto customers = h.driver->store<std::string, std::string>("overflow-customers");
  h.pipe("c-a", msg(0));
  h.pipe("c-a", msg(1));
  EXPECT_FALSE(customers.get("c-a"));
  h.pipe("c-a", msg(2));
  h.pipe("c-a", msg(3));
  const auto stored = customers.get("c-a");
  ASSERT_TRUE(stored);
  const auto st = sluice::topologies::overflow_detail::customer_state::deserialize(*stored);
  EXPECT_EQ(st.handled_offset, 3);
  EXPECT_DOUBLE_EQ(st.tokens, 996);
  EXPECT_EQ(h.take("out").size(), 4u);
}

// Under exactly-once a customer whose bucket is full again at the commit, at the rate of a
// stored state that was full too, costs no state write: its changelog gets the state once,
// then nothing while it stays under its rate. A customer not back to full (rate 1/s, a
// record every second, commits every 500 ms) is written at each commit after a record. Under at-least-once every
// changed state is written (its handled offset serves replays). Every record still goes out, none early.
TEST(overflow_buffer, under_exactly_once_a_full_bucket_needs_no_state_write_per_commit) {
  for (const std::string guarantee : {"exactly_once", "at_least_once"}) {
    sluice::config c;
    c.set("processing.guarantee", guarantee);
    harness h(rate_opts(1000), c, {.commit_every_records = 1000});
    const std::string changelog = h.driver->application_id() + "-overflow-customers-changelog";
    for (int i = 0; i < 4; ++i) {
      h.pipe("c-fast", msg(i));
      h.advance(100);  // commits: 100 ms refill 100 tokens of the 1 spent
    }
    auto logged = h.take(changelog);
    const std::size_t expected = guarantee == "exactly_once" ? 1 : 4;
    EXPECT_EQ(logged.size(), expected) << guarantee;
    EXPECT_EQ(h.take("out").size(), 4u) << guarantee;
  }
  sluice::config c;
  c.set("processing.guarantee", "exactly_once");
  harness h(rate_opts(1), c, {.commit_every_records = 1000});
  for (int i = 0; i < 4; ++i) {
    h.pipe("c-slow", msg(i));  // the bucket's one token
    h.advance(500);            // commits: half a token back, not full
    h.advance(500);            // commits: nothing changed since
  }
  EXPECT_EQ(h.take(h.driver->application_id() + "-overflow-customers-changelog").size(), 4u);
  EXPECT_EQ(h.take("out").size(), 4u);
}

TEST(overflow_buffer, replayed_input_at_or_below_the_handled_offset_is_skipped) {
  harness h(rate_opts(1000));
  h.pipe("c-other", msg(0));  // offset 0
  h.pipe("c-other", msg(1));  // offset 1
  ASSERT_EQ(h.take("out").size(), 2u);
  // Customer c's stored state says offsets up to 3 are handled: what a crash under
  // at-least-once leaves behind when the input is replayed from an older committed offset
  // (the store is restored before the processor reads it; the processor has not seen c).
  auto customers = h.driver->store<std::string, std::string>("overflow-customers");
  sluice::topologies::overflow_detail::customer_state st;
  st.handled_offset = 3;
  st.tokens = 1000;
  st.refilled_at = h.driver->wall_clock_ms();
  st.rate = 1000;
  std::string bytes;
  st.serialize(bytes);
  customers.put("c", bytes);
  h.pipe("c", msg(2));  // offset 2
  h.pipe("c", msg(3));  // offset 3
  h.pipe("c", msg(4));  // offset 4: new
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 4);
  EXPECT_EQ(h.metric("sluice_overflow_replays_skipped_total"), 2);
}

TEST(overflow_buffer, malformed_values_are_processing_errors_sent_to_the_dead_letter_topic) {
  harness h;
  h.pipe("c", "not json");
  h.pipe("c", "[1, 2]");
  h.pipe("c", R"({"ttl_ms":"soon"})");
  h.pipe("c", R"({"deliver_at_ms":true})");
  h.pipe("c", R"({"n":5,"ttl_ms":1000.5})");  // a number: fine
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 5);
  EXPECT_EQ(h.driver->records(h.driver->application_id() + "-dlq").size(), 4u);
}

// Issue 12: the one-pass scanner took an 80,000-level value and passed it on to the output
// topic (and to whoever reads it next). It is refused past sluice's JSON nesting limit, the
// one json_serde uses: a processing error, dead-lettered and counted; 1,000 levels still pass.
TEST(overflow_buffer, a_value_nested_deeper_than_the_json_limit_is_dead_lettered_and_the_limit_itself_passes) {
  harness h;
  const auto nested = [](std::size_t levels) {  // an object holding levels - 1 arrays
    return R"({"n":1,"deep":)" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  h.pipe("c", nested(80'000));
  h.pipe("c", nested(sluice::max_json_nesting + 1));
  h.pipe("c", nested(sluice::max_json_nesting));
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value->size(), nested(sluice::max_json_nesting).size());
  const auto& dlq = h.driver->records(h.driver->application_id() + "-dlq");
  ASSERT_EQ(dlq.size(), 2u);
  for (const auto& m : dlq) {
    EXPECT_EQ(header(m, "sluice.error.kind"), "processing");
    EXPECT_NE(header(m, "sluice.error.message").find("deeper than 1000 levels"), std::string::npos)
        << header(m, "sluice.error.message");
  }
  EXPECT_EQ(h.driver->metrics().total("sluice_records_dead_lettered_total"), 2);
}

TEST(overflow_buffer, output_keeps_key_value_and_headers) {
  harness h(rate_opts(1));
  const std::string v = R"({"n":0,"body":"héllo","nested":{"a":[1,2]}})";
  h.driver->pipe_raw("notifications", std::string("c"), v, start_ms - 10, sluice::headers{{"trace", "abc"}});
  h.driver->pipe_raw("notifications", std::string("c"), v, start_ms - 5, sluice::headers{{"trace", "def"}});
  h.run_for(1000);
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 2u);
  for (const auto& m : out) {
    EXPECT_EQ(m.key, "c");
    EXPECT_EQ(m.value, v);
  }
  EXPECT_EQ(header(out[0], "trace"), "abc");
  EXPECT_EQ(header(out[1], "trace"), "def");
  EXPECT_EQ(header(out[1], "sluice-overflow-input-timestamp"), std::to_string(start_ms - 5));
  EXPECT_EQ(header(out[1], "sluice-overflow-delay-ms"), "1000");
}

// A record without a key and a record with the empty key are the same customer "" (one line,
// one token bucket), but each leaves as it came: drained or expired, keyless stays keyless.
TEST(overflow_buffer, a_keyless_record_drained_or_expired_stays_keyless_and_an_empty_key_stays_empty) {
  harness h(rate_opts(1));
  h.driver->pipe_raw("notifications", std::nullopt, msg(0), start_ms);                         // direct
  h.driver->pipe_raw("notifications", std::nullopt, msg(1), start_ms);                         // buffered
  h.driver->pipe_raw("notifications", std::string(""), msg(2), start_ms);                      // buffered
  h.driver->pipe_raw("notifications", std::nullopt, R"({"n":3,"ttl_ms":2500})", start_ms);     // expires
  h.driver->pipe_raw("notifications", std::string(""), R"({"n":4,"ttl_ms":2500})", start_ms);  // expires
  h.run_for(4000);
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(n_of(out[0]), 0);
  EXPECT_EQ(out[0].key, std::nullopt);
  EXPECT_EQ(n_of(out[1]), 1);
  EXPECT_EQ(out[1].key, std::nullopt) << "drained from the buffer";
  EXPECT_EQ(header(out[1], "sluice-overflow-delay-ms"), "1000");
  EXPECT_EQ(n_of(out[2]), 2);
  EXPECT_EQ(out[2].key, std::optional<std::string>("")) << "the empty key is a key";
  expect_token_bucket_bound(out, 1);
  auto expired = h.take("expired");
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(n_of(expired[0]), 3);
  EXPECT_EQ(expired[0].key, std::nullopt);
  EXPECT_EQ(n_of(expired[1]), 4);
  EXPECT_EQ(expired[1].key, std::optional<std::string>(""));
}

// The buffer belongs to the input partition. Kafka's producers spread keyless records over
// the partitions, so the customer "" has a line and a token bucket per partition: at rate 1
// a keyless record on each of two partitions goes out at once, where two keyed "" (one
// partition, by key) would be one out and one buffered.
TEST(overflow_buffer, keyless_records_on_two_partitions_have_a_line_and_a_bucket_each) {
  sluice::testing::driver_options d;
  d.partitions = 2;
  harness h(rate_opts(1), {}, d);
  h.driver->pipe_raw("notifications", std::nullopt, msg(0), start_ms, {}, 0);
  h.driver->pipe_raw("notifications", std::nullopt, msg(1), start_ms, {}, 1);
  h.driver->pipe_raw("notifications", std::nullopt, msg(2), start_ms, {}, 1);
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(n_of(out[0]), 0);
  EXPECT_EQ(n_of(out[1]), 1);
  EXPECT_EQ(h.metric("sluice_overflow_buffered_total"), 1);
  h.run_for(1000);
  out = h.take("out");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(n_of(out[0]), 2);
  EXPECT_EQ(header(out[0], "sluice-overflow-delay-ms"), "1000") << "partition 1's bucket, refilled after 1 s";
}

// Buffer entries written before keyless records were told apart (format 0x01, no flags byte)
// still read, as keyed records; the current format round-trips the flag.
TEST(overflow_buffer, buffered_records_of_the_first_format_still_read) {
  using sluice::topologies::overflow_detail::buffered_record;
  buffered_record b;
  b.input_timestamp = 11;
  b.offset = 22;
  b.buffered_at = 33;
  b.deliver_at = 44;
  b.ttl_ms = 55;
  b.value = "v";
  b.headers.add("h", std::string("x"));
  b.key_absent = true;
  std::string now_format;
  b.serialize(now_format);
  const auto back = buffered_record::deserialize(now_format);
  EXPECT_TRUE(back.key_absent);
  EXPECT_EQ(back.offset, 22);
  EXPECT_EQ(back.ttl_ms, 55);
  EXPECT_EQ(back.value, "v");
  ASSERT_EQ(back.headers.size(), 1u);
  // The first format is the current one without the flags byte.
  std::string first_format = now_format.substr(0, 1) + now_format.substr(2);
  first_format[0] = 0x01;
  const auto old = buffered_record::deserialize(first_format);
  EXPECT_FALSE(old.key_absent);
  EXPECT_EQ(old.input_timestamp, 11);
  EXPECT_EQ(old.deliver_at, 44);
  EXPECT_EQ(old.value, "v");
  EXPECT_THROW(buffered_record::deserialize(std::string(1, '\x03')), sluice::serialization_error);
}

// Direct emissions are built in one reused record: a record without a key goes out without
// one (the customer ""), between keyed records whose keys and headers stay their own.
TEST(overflow_buffer, direct_path_keeps_an_absent_key_absent_between_keyed_records) {
  harness h(rate_opts(100));
  const std::string v = msg(0);
  h.driver->pipe_raw("notifications", std::string("c"), v, start_ms - 30, sluice::headers{{"trace", "a"}});
  h.driver->pipe_raw("notifications", std::nullopt, v, start_ms - 20);
  h.driver->pipe_raw("notifications", std::string("d"), v, start_ms - 10, sluice::headers{{"trace", "b"}, {"x", "y"}});
  auto out = h.take("out");
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].key, "c");
  EXPECT_EQ(out[1].key, std::nullopt);
  EXPECT_EQ(out[2].key, "d");
  const std::vector<std::pair<std::string, std::string>> want[] = {
      {{"trace", "a"},
       {"sluice-overflow-input-timestamp", std::to_string(start_ms - 30)},
       {"sluice-overflow-delay-ms", "0"}},
      {{"sluice-overflow-input-timestamp", std::to_string(start_ms - 20)}, {"sluice-overflow-delay-ms", "0"}},
      {{"trace", "b"},
       {"x", "y"},
       {"sluice-overflow-input-timestamp", std::to_string(start_ms - 10)},
       {"sluice-overflow-delay-ms", "0"}}};
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<std::pair<std::string, std::string>> got;
    for (const auto& hd : out[i].headers.items()) got.emplace_back(hd.key, hd.value.value_or("<null>"));
    EXPECT_EQ(got, want[i]) << "record " << i;
    EXPECT_EQ(out[i].value, v);
    EXPECT_EQ(out[i].timestamp, start_ms);
  }
  EXPECT_EQ(h.metric("sluice_overflow_direct_total"), 3);
}
// 100,000 customers, 1 % of them over their rate: the others never touch the buffer, every
// record is accounted for once, per-customer order and the bound hold.
TEST(overflow_buffer, one_hundred_thousand_customers_of_which_one_percent_buffer) {
  harness h(rate_opts(5));
  std::mt19937 rng(3);
  std::map<std::string, int> sent;
  for (int c = 0; c < 100'000; ++c) {
    const std::string customer = "c" + std::to_string(c);
    const int n = c % 100 == 0 ? 20 : 1 + static_cast<int>(rng() % 3);  // 1 %: 20 at once, over the burst of 5
    for (int i = 0; i < n; ++i) h.pipe(customer, msg(sent[customer]++));
  }
  EXPECT_EQ(h.metric("sluice_overflow_buffered_total"), 1000 * 15);
  auto out = h.take("out");
  h.run_for(4000);
  auto drained = h.take("out");
  out.insert(out.end(), drained.begin(), drained.end());
  std::map<std::string, int> next;
  for (const auto& m : out) {
    const auto& k = *m.key;
    ASSERT_EQ(n_of(m), next[k]++) << "customer " << k;
  }
  EXPECT_EQ(next, sent);
  EXPECT_TRUE(h.take("expired").empty());
  std::vector<raw_message> buffered_customers;
  for (auto& m : out)
    if (std::stoi(m.key->substr(1)) % 100 == 0) buffered_customers.push_back(m);
  expect_token_bucket_bound(buffered_customers, 5);
}

// The customer store on RocksDB updates a customer's state in place in the memtable
// (add_overflow_buffer_stores sets inplace_update_support for it): the same input gives the
// same emissions, in the same order, at the same times and with the same headers, and the
// same customer states, as with in-memory stores, across commits that rewrite every state.
TEST(overflow_buffer, customer_states_on_rocksdb_decide_as_on_in_memory_stores) {
  auto run = [](bool rocksdb) {
    harness h(rate_opts(2), {}, {.rocksdb_stores = rocksdb, .commit_every_records = 7});
    std::vector<raw_message> out;
    int n = 0;
    for (int round = 0; round < 12; ++round) {
      for (int c = 0; c < 40; ++c)
        for (int i = 0; i < 1 + (c + round) % 3; ++i) h.pipe("c" + std::to_string(c), msg(n++));
      h.run_for(300);
      for (auto& m : h.take("out")) out.push_back(std::move(m));
    }
    h.run_for(10'000);
    for (auto& m : h.take("out")) out.push_back(std::move(m));
    std::map<std::string, std::string> states;
    for (int c = 0; c < 40; ++c) {
      const std::string customer = "c" + std::to_string(c);
      if (auto s = h.driver->store<std::string, std::string>("overflow-customers").get(customer)) states[customer] = *s;
    }
    return std::tuple(out, states, n);
  };
  const auto [in_memory, memory_states, sent] = run(false);
  const auto [on_rocksdb, rocksdb_states, sent_again] = run(true);
  ASSERT_EQ(in_memory.size(), static_cast<std::size_t>(sent));  // every record out by the end
  ASSERT_EQ(on_rocksdb.size(), in_memory.size());
  for (std::size_t i = 0; i < in_memory.size(); ++i) {
    EXPECT_EQ(on_rocksdb[i].key, in_memory[i].key) << i;
    EXPECT_EQ(on_rocksdb[i].value, in_memory[i].value) << i;
    EXPECT_EQ(on_rocksdb[i].timestamp, in_memory[i].timestamp) << i;
    EXPECT_EQ(on_rocksdb[i].headers, in_memory[i].headers) << i;
  }
  EXPECT_EQ(memory_states.size(), 40u);
  EXPECT_EQ(rocksdb_states, memory_states);
}

/// The driver's stores as one instance sees them from its HTTP handler: partitions in `local`
/// run here, the others elsewhere. Time runs on `now`: a local read that times out and an ask
/// of another instance take the time they are given, as on a busy or unreachable cluster, so
/// the budget of GET /overflow/backlog is checked without waiting for it.
class slow_instance final : public sluice::http::store_access {
 public:
  slow_instance(sluice::interactive_queries& all, std::set<std::int32_t> local, bool reads_time_out)
      : all_(all), local_(std::move(local)), reads_time_out_(reads_time_out) {}

  std::optional<std::int32_t> partition_of(std::string_view store, std::string_view key) const override {
    return all_.partition_of(store, key);
  }
  std::int32_t partitions(std::string_view store) const override { return all_.partitions(store); }
  outcome run_binding(std::string_view store, std::int32_t partition, binding_reader fn,
                      std::chrono::milliseconds timeout, std::string* failure) override {
    read_timeouts.push_back(timeout);
    if (!local_.contains(partition)) return outcome::not_local;
    if (reads_time_out_) {
      now += timeout;  // the stream thread did not answer in time
      return outcome::timed_out;
    }
    return all_.run_binding(store, partition, std::move(fn), timeout, failure);
  }
  /// As the app's: every partition asked at once, one wait for all of them.
  std::vector<partition_outcome> run_bindings(std::string_view store, const std::vector<std::int32_t>& partitions,
                                              partition_reader fn, std::chrono::milliseconds timeout) override {
    read_timeouts.push_back(timeout);
    std::vector<partition_outcome> answers;
    for (const auto p : partitions) {
      auto& a = answers.emplace_back(partition_outcome{p, outcome::not_local, {}});
      if (!local_.contains(p)) continue;
      if (reads_time_out_) {
        a.result = outcome::timed_out;
        continue;
      }
      a.result = all_.run_binding(
          store, p, [&](const auto& binding, auto& context) { fn(p, binding, context); }, timeout, &a.failure);
    }
    if (reads_time_out_) now += timeout;  // the stream thread did not answer in time
    return answers;
  }
  sluice::http::response forward(const sluice::http::request&, std::string_view, std::int32_t partition) override {
    asked.push_back(partition);
    now += 3s;  // the owner did not answer within the forwarding's bound
    return sluice::http::response::error(sluice::http::status::gateway_timeout, "the owner did not answer in time");
  }

  std::chrono::steady_clock::time_point now{};
  std::vector<std::chrono::milliseconds> read_timeouts;
  std::vector<std::int32_t> asked;

 private:
  sluice::interactive_queries& all_;
  std::set<std::int32_t> local_;
  bool reads_time_out_;
};

sluice::http::response gather(slow_instance& stores, const overflow_buffer_options& o) {
  sluice::topologies::backlog_gather_limits limits;
  limits.clock = [&stores] { return stores.now; };
  const std::string target = "/overflow/backlog";
  return sluice::topologies::overflow_gathered_backlog(sluice::http::request(target, {}, {}, &stores, target), o, 10,
                                                       start_ms, limits);
}

// One slow owner used 3 s of the 4.5 s budget: the gather asks no other owner (an ask may take
// 3 s and would overrun), answers with this instance's partition and names the rest.
TEST(overflow_buffer, backlog_gather_starts_no_ask_that_could_overrun_its_budget) {
  const auto o = rate_opts(0);
  harness h(o, {}, {.partitions = 4});
  for (int c = 0; c < 20; ++c) h.pipe("c" + std::to_string(c), msg(c));
  slow_instance stores(h.driver->queries(), {0}, /*reads_time_out=*/false);
  const auto r = gather(stores, o);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(stores.asked, (std::vector<std::int32_t>{1}));
  for (auto t : stores.read_timeouts) EXPECT_LE(t, 4500ms);
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["partitions"], nlohmann::json::array({0}));
  EXPECT_EQ(j["partitions_unavailable"], nlohmann::json::array({1, 2, 3}));
  ASSERT_EQ(j["unreachable"].size(), 3u) << r.body;
  EXPECT_EQ(j["unreachable"][0]["status"], 504);
  for (int i : {1, 2}) {
    const auto error = j["unreachable"][i]["error"].get<std::string>();
    EXPECT_NE(error.find("not asked: the request's 4500 ms"), std::string::npos) << error;
  }
  EXPECT_FALSE(j["customers"].empty());  // partition 0's backlogs
}

// The stream thread does not answer: the read of every partition waits what the budget
// allows, no other read or ask waits at all, and the answer is a 503 with Retry-After, not an
// empty list.
TEST(overflow_buffer, backlog_answers_503_with_retry_after_when_no_partition_is_read_in_time) {
  const auto o = rate_opts(0);
  harness h(o, {}, {.partitions = 4});
  h.pipe("c1", msg(1));
  slow_instance stores(h.driver->queries(), {0, 1, 2, 3}, /*reads_time_out=*/true);
  const auto r = gather(stores, o);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_NE(r.body.find("within the request's 4500 ms"), std::string::npos) << r.body;
  EXPECT_EQ(stores.read_timeouts, (std::vector<std::chrono::milliseconds>{4500ms}));
  const auto j = nlohmann::json::parse(r.body);
  ASSERT_EQ(j["unreachable"].size(), 4u) << r.body;  // every partition, with its reason
  for (const auto& u : j["unreachable"])
    EXPECT_NE(u["error"].get<std::string>().find("did not answer within the request's 4500 ms"), std::string::npos)
        << r.body;
  EXPECT_TRUE(stores.asked.empty());
}

// The rate the endpoints show is the one that applies now (the rates table's, else the
// default), also for a customer the processor has not seen yet or not since its rate changed.
TEST(overflow_buffer, customer_and_backlog_endpoints_show_the_rate_that_applies_now) {
  const auto o = rate_opts(2);
  harness h(o);
  h.rate("unseen", R"({"rate_per_second": 7.5})");
  h.rate("bad", R"({"rate_per_second": "fast"})");
  auto& q = h.driver->queries();
  auto rate_of = [&](const std::string& c) {
    const auto r = sluice::topologies::overflow_customer_response(q, o, c, start_ms);
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body).at("rate_per_second").get<double>();
  };
  EXPECT_EQ(rate_of("unseen"), 7.5);
  EXPECT_EQ(rate_of("bad"), 2);     // invalid: the default, as the processor applies it
  EXPECT_EQ(rate_of("nobody"), 2);  // not in the table
  h.rate("slow", R"({"rate_per_second": 0.5})");
  for (int i = 0; i < 4; ++i) h.pipe("slow", msg(i));  // 1 direct, 3 buffered at 0.5/s
  EXPECT_EQ(rate_of("slow"), 0.5);
  h.rate("slow", R"({"rate_per_second": 0})");  // not applied by the processor yet
  const auto customer =
      nlohmann::json::parse(sluice::topologies::overflow_customer_response(q, o, "slow", start_ms).body);
  EXPECT_EQ(customer["rate_per_second"], 0);
  EXPECT_EQ(customer["buffered"], 3);
  EXPECT_TRUE(customer["drain_eta_ms"].is_null());  // rate 0: never, until it changes
  const auto backlog = nlohmann::json::parse(sluice::topologies::overflow_backlog_response(q, o, 10, start_ms).body);
  ASSERT_EQ(backlog["customers"].size(), 1u) << backlog.dump();
  EXPECT_EQ(backlog["customers"][0]["customer"], "slow");
  EXPECT_EQ(backlog["customers"][0]["rate_per_second"], 0);
}

TEST(overflow_buffer, invalid_options_are_rejected_with_the_allowed_range) {
  overflow_buffer_options o;
  o.drain_interval = 0ms;
  try {
    sluice::topologies::validate(o);
    FAIL() << "expected an error";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_config);
    EXPECT_NE(std::string(e.what()).find("1 .. 60000"), std::string::npos);
  }
  o = {};
  o.default_rate_per_second = -1;
  EXPECT_THROW(sluice::topologies::validate(o), sluice::error);
}

TEST(overflow_buffer, alarm_line_reads_as_the_issue_shows) {
  EXPECT_EQ(sluice::topologies::overflow_detail::alarm_line("c-42", 12000, 2, 6'000'000, 3'600'000),
            "customer c-42: 12,000 buffered at 2/s drain in 100 min; TTL 60 min: records will expire");
  // A key is data: one that is not printable ASCII (a line feed would forge a second log
  // line) or longer than 100 bytes shows quoted, escaped and cut.
  EXPECT_EQ(sluice::topologies::overflow_detail::alarm_line("c-1\ncustomer c-2", 1, 0, 0, 60'000),
            "customer 'c-1\\x0acustomer c-2': 1 buffered at 0/s not draining (rate 0); TTL 1 min: records will expire");
  EXPECT_EQ(sluice::topologies::overflow_detail::alarm_line(std::string(101, 'c') + "\n", 1, 0, 0, 60'000),
            "customer '" + std::string(100, 'c') +
                "...': 1 buffered at 0/s not draining (rate 0); TTL 1 min: records will expire");
}

TEST(overflow_buffer, backlog_alarm_is_raised_at_most_once_per_customer_per_alarm_interval) {
  // Rate 0 by default: a backlog never drains, so it cannot drain before its TTL and alarms.
  // The gauges and alarms are computed once a second of wall clock (at a drain tick).
  overflow_buffer_options o;
  o.default_rate_per_second = 0;
  o.alarm_interval = 10s;
  harness h(o);
  h.rate("fast", R"({"rate_per_second": 1000})");  // drains long before its TTL: never alarms
  for (int i = 0; i < 3; ++i) h.pipe("stuck-1", msg(i));
  h.run_for(1000);
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 1) << "the first report alarms at once";
  h.run_for(8000);  // 9 s after the first alarm: 8 more reports, none may repeat it
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 1);
  for (int i = 0; i < 3; ++i) h.pipe("stuck-2", msg(i));
  for (int i = 0; i < 2000; ++i) h.pipe("fast", msg(i));  // 2 s of backlog at 1000/s
  h.run_for(1000);
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 2) << "a second customer alarms on its own interval";
  h.run_for(1000);  // now 10 s or more after stuck-1's alarm, less after stuck-2's
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 3);
  h.run_for(8000);
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 3);
  h.run_for(1000);  // 10 s after stuck-2's
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 4);
  EXPECT_GT(h.metric("sluice_overflow_buffered_total"), 6) << "the fast customer buffered too, and never alarmed";
  EXPECT_EQ(h.metric("sluice_overflow_direct_total") + h.metric("sluice_overflow_drained_total"), 2000);
}

TEST(overflow_buffer, backlog_alarm_counts_a_records_own_ttl) {
  // At 1 record per 100 s, 3 buffered records drain in about 5 minutes: far within the
  // default TTL of 6 h, but past a TTL of 1 minute that the last record asks for.
  overflow_buffer_options o;
  o.default_rate_per_second = 0.01;
  harness h(o);
  for (int i = 0; i < 4; ++i) h.pipe("patient", msg(i));  // the first goes direct, 3 wait
  h.run_for(1000);
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 0) << "5 minutes of backlog, 6 h of TTL: no alarm";
  for (int i = 0; i < 4; ++i) h.pipe("hurried", i < 3 ? msg(i) : R"({"n":3,"ttl_ms":60000})");
  h.run_for(1000);
  EXPECT_EQ(h.metric("sluice_overflow_alarms_total"), 1) << "the last record of the line expires in 1 minute";
}

TEST(overflow_buffer, a_buffer_store_of_another_kind_is_refused_with_its_name) {
  overflow_buffer_options o;
  sluice::streams_builder b;
  using bytes = sluice::topologies::overflow_detail::bytes;
  b.add_state_store({.name = o.buffer_store});  // a key-value store, not a queue store
  b.add_state_store({.name = o.customer_store});
  b.global_table<std::string, std::string>(o.rates_topic, o.rates_store);
  auto s = b.stream<bytes, bytes>("notifications")
               .process(sluice::topologies::overflow_buffer(o), o.buffer_store, o.customer_store, o.rates_store);
  s.filter([](const bytes&, const bytes&) { return true; }).to("out");
  s.filter([](const bytes&, const bytes&) { return true; }).to("expired");
  try {
    topology_test_driver d(b.build());
    d.pipe_raw("notifications", std::string("c"), std::string("{}"), 1);
    FAIL() << "expected an error";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("store 'overflow-buffer' is not a queue store"), std::string::npos)
        << e.what();
  }
}

// The value check reads only the two top-level fields, validating the whole value without
// building a document: nested fields of the same name are not read, the last duplicate wins,
// null is absent, and anything that is not one JSON object is refused.
TEST(overflow_buffer_fields, reads_top_level_ttl_and_delivery_time_and_refuses_what_is_not_an_object) {
  using sluice::topologies::overflow_detail::parse_fields;
  auto f = parse_fields(std::string(R"({"a":{"ttl_ms":"x","deliver_at_ms":[1]},"ttl_ms":5,"deliver_at_ms":7.9})"));
  EXPECT_EQ(f.ttl_ms, 5);
  EXPECT_EQ(f.deliver_at_ms, 7);
  f = parse_fields(std::string(R"({"ttl_ms":5,"ttl_ms":9,"deliver_at_ms":null})"));
  EXPECT_EQ(f.ttl_ms, 9);
  EXPECT_FALSE(f.deliver_at_ms);
  f = parse_fields(std::string(R"({"body":[{"ttl_ms":1}],"x":"ttl_ms"})"));
  EXPECT_FALSE(f.ttl_ms);
  for (const char* bad : {R"([{"ttl_ms":1}])", "5", R"("ttl_ms")", R"({"ttl_ms":1} {})", R"({"ttl_ms":1)", ""}) {
    try {
      parse_fields(std::string(bad));
      ADD_FAILURE() << bad << " was taken";
    } catch (const sluice::error& e) {
      EXPECT_EQ(e.code(), sluice::errc::processing) << bad;
      EXPECT_NE(std::string(e.what()).find("not a JSON object"), std::string::npos) << bad << ": " << e.what();
    }
  }
  for (const char* bad : {R"({"ttl_ms":"5"})", R"({"ttl_ms":{}})", R"({"deliver_at_ms":[]})", R"({"ttl_ms":true})"}) {
    try {
      parse_fields(std::string(bad));
      ADD_FAILURE() << bad << " was taken";
    } catch (const sluice::error& e) {
      EXPECT_NE(std::string(e.what()).find("must be a number"), std::string::npos) << bad << ": " << e.what();
    }
  }
  for (const char* bad : {R"({"ttl_ms":-1})", R"({"deliver_at_ms":1e300})", R"({"ttl_ms":18446744073709551615})"}) {
    try {
      parse_fields(std::string(bad));
      ADD_FAILURE() << bad << " was taken";
    } catch (const sluice::error& e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << bad << ": " << e.what();
    }
  }
}

namespace {

// The reference model for parse_fields: nlohmann's SAX parser with a handler reading the two
// fields (what parse_fields was before its own scanner; independent of it).
class fields_reader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  enum class field { none, ttl_ms, deliver_at_ms };

  bool null() override { return value("null"); }
  bool boolean(bool) override { return value("boolean"); }
  bool number_integer(number_integer_t v) override { return integer(static_cast<double>(v), v, std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(static_cast<double>(v), v > 9'200'000'000'000'000'000ULL ? -1 : static_cast<std::int64_t>(v),
                   std::to_string(v));
  }
  bool number_float(number_float_t v, const string_t& text) override {
    if (pending_ == field::none || depth_ != 1) return true;
    check_range(v, text);
    store(static_cast<std::int64_t>(v));
    return true;
  }
  bool string(string_t&) override { return value("string"); }
  bool binary(binary_t&) override { return value("binary"); }
  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      object_root_ = true;
    } else if (depth_ == 1) {
      wrong_type("object");
    }
    ++depth_;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 1) wrong_type("array");
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1)
      pending_ = k == "ttl_ms" ? field::ttl_ms : k == "deliver_at_ms" ? field::deliver_at_ms : field::none;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    valid_ = false;
    return false;
  }

  bool object_root() const noexcept { return valid_ && object_root_; }
  sluice::topologies::overflow_detail::parsed_fields fields;

 private:
  bool value(const char* type) {
    if (depth_ == 1 && pending_ != field::none) {
      if (std::string_view(type) == "null") {
        store_null();
      } else {
        wrong_type(type);
      }
    }
    return true;
  }
  bool integer(double d, std::int64_t v, const std::string& text) {
    if (pending_ == field::none || depth_ != 1) return true;
    check_range(d, text);
    store(v);
    return true;
  }
  void check_range(double d, const std::string& text) const {
    if (!std::isfinite(d) || d < 0 || d > 9.2e15)
      throw sluice::error(sluice::errc::processing, std::string("overflow buffer: field '") + name() +
                                                        "' is out of range (" + text + "); use milliseconds >= 0");
  }
  void wrong_type(const char* type) const {
    if (pending_ == field::none) return;
    throw sluice::error(sluice::errc::processing,
                        std::string("overflow buffer: field '") + name() + "' must be a number (got " + type + ")");
  }
  const char* name() const noexcept { return pending_ == field::ttl_ms ? "ttl_ms" : "deliver_at_ms"; }
  void store(std::int64_t v) {
    (pending_ == field::ttl_ms ? fields.ttl_ms : fields.deliver_at_ms) = v;
    pending_ = field::none;
  }
  void store_null() {
    (pending_ == field::ttl_ms ? fields.ttl_ms : fields.deliver_at_ms).reset();
    pending_ = field::none;
  }

  std::size_t depth_ = 0;
  field pending_ = field::none;
  bool object_root_ = false;
  bool valid_ = true;
};

/// "ok ttl=.. deliver=.." or the error message: what a value comes to.
std::string reference_outcome(const std::string& value) {
  try {
    fields_reader reader;
    const bool ok = nlohmann::json::sax_parse(value.begin(), value.end(), &reader);
    if (!ok || !reader.object_root()) return "overflow buffer: the record value is not a JSON object";
    return "ok ttl=" + (reader.fields.ttl_ms ? std::to_string(*reader.fields.ttl_ms) : "-") +
           " deliver=" + (reader.fields.deliver_at_ms ? std::to_string(*reader.fields.deliver_at_ms) : "-");
  } catch (const sluice::error& e) {
    return e.what();
  }
}
std::string scanner_outcome(const std::string& value) {
  try {
    auto f = sluice::topologies::overflow_detail::parse_fields(value);
    return "ok ttl=" + (f.ttl_ms ? std::to_string(*f.ttl_ms) : "-") +
           " deliver=" + (f.deliver_at_ms ? std::to_string(*f.deliver_at_ms) : "-");
  } catch (const sluice::error& e) {
    return e.what();
  }
}

/// Random JSON-like values: mostly valid documents with the two fields at various depths,
/// under escaped names, with edge-case numbers, strings and bytes; then mutated.
class value_generator {
 public:
  explicit value_generator(unsigned seed) : rng_(seed) {}

  std::string next() {
    std::string v;
    if (pick(20) == 0) v = "\xEF\xBB\xBF";  // BOM
    if (pick(10) == 0) v += " \n\t";
    value(v, 0, pick(4) != 0);
    if (pick(8) == 0) v += pick(2) ? " " : "\r\n";
    if (pick(3) == 0) mutate(v);
    return v;
  }

 private:
  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  template <class T>
  const T& one_of(const std::vector<T>& xs) {
    return xs[pick(xs.size())];
  }

  void value(std::string& v, int depth, bool object) {
    if (object || (depth < 4 && pick(4) == 0)) {
      v += '{';
      const std::size_t n = pick(5);
      for (std::size_t i = 0; i < n; ++i) {
        if (i) v += pick(10) ? "," : " , ";
        v += one_of(keys_);
        v += pick(6) ? ":" : " : ";
        member_value(v, depth + 1);
      }
      v += '}';
    } else if (depth < 4 && pick(4) == 0) {
      v += '[';
      const std::size_t n = pick(4);
      for (std::size_t i = 0; i < n; ++i) {
        if (i) v += ',';
        member_value(v, depth + 1);
      }
      v += ']';
    } else {
      scalar(v);
    }
  }
  void member_value(std::string& v, int depth) {
    if (depth < 4 && pick(3) == 0) return value(v, depth, pick(2) == 0);
    scalar(v);
  }
  void scalar(std::string& v) {
    switch (pick(3)) {
      case 0: v += one_of(numbers_); break;
      case 1: v += one_of(strings_); break;
      default: v += one_of(literals_); break;
    }
  }
  void mutate(std::string& v) {
    const std::size_t n = 1 + pick(3);
    for (std::size_t i = 0; i < n && !v.empty(); ++i) {
      const std::size_t at = pick(v.size());
      switch (pick(5)) {
        case 0: v.erase(at, 1); break;
        case 1: v.insert(at, 1, one_of(bytes_)); break;
        case 2: v[at] = one_of(bytes_); break;
        case 3: v.resize(at); break;
        default: v.insert(at, one_of(strings_)); break;
      }
    }
  }

  std::mt19937 rng_;
  const std::vector<std::string> keys_ = {R"("ttl_ms")",
                                          R"("deliver_at_ms")",
                                          R"("ttl\u005fms")",
                                          R"("deliver_at\u005Fms")",
                                          R"("ttl_ms ")",
                                          R"("TTL_MS")",
                                          R"("a")",
                                          R"("")",
                                          R"("ttl_m\u0073")",
                                          R"("\u00e9")",
                                          R"("ttl_ms\u0000")",
                                          R"("x\ud83d\ude00")",
                                          R"("body")"};
  const std::vector<std::string> numbers_ = {"0",
                                             "-0",
                                             "5",
                                             "-1",
                                             "7.9",
                                             "1e3",
                                             "1E+2",
                                             "2.5e-3",
                                             "1e300",
                                             "1e400",
                                             "-1e400",
                                             "9200000000000000",
                                             "9200000000000001",
                                             "18446744073709551615",
                                             "18446744073709551616",
                                             "-9223372036854775808",
                                             "-9223372036854775809",
                                             "01",
                                             "1.",
                                             ".5",
                                             "-",
                                             "+1",
                                             "1e",
                                             "0.0",
                                             "-0.0",
                                             "123456789012",
                                             "1700000000000"};
  const std::vector<std::string> strings_ = {R"("x")",
                                             R"("")",
                                             R"("a\"b")",
                                             R"("\\")",
                                             R"("\/\b\f\n\r\t")",
                                             R"("\u0041")",
                                             R"("\u00")",
                                             R"("\ud83d\ude00")",
                                             R"("\ud83d")",
                                             R"("\ude00")",
                                             R"("\ud83d\u0041")",
                                             R"("\x")",
                                             "\"\xC3\xA9\"",
                                             "\"\xC0\xAF\"",
                                             "\"\xE0\x9F\xBF\"",
                                             "\"\xED\xA0\x80\"",
                                             "\"\xF4\x90\x80\x80\"",
                                             "\"\xF0\x9F\x98\x80\"",
                                             "\"\xEF\xBF\xBF\"",
                                             "\"\x7F\"",
                                             "\"\x01\"",
                                             "\"\xFF\"",
                                             "\"\xC3\""};
  const std::vector<std::string> literals_ = {"true", "false", "null", "nul", "True", "nulll"};
  const std::vector<char> bytes_ = {'{', '}', '[', ']',  ',',    ':',    '"',    '\\',   ' ',    '0', '9', '-',
                                    'e', '.', 'n', '\0', '\x1f', '\xef', '\xbb', '\xbf', '\x80', 'x', '\t'};
};

}  // namespace

TEST(overflow_live_states, finds_every_customer_it_holds_and_none_it_does_not_across_growth_and_clear) {
  sluice::topologies::overflow_detail::live_state_table table;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2; ++round) {
    std::unordered_map<std::string, std::uint32_t> model;
    for (int i = 0; i < 20000; ++i) {
      // Names of every length from empty up, many sharing prefixes.
      std::string c = "c" + std::to_string(rng() % 30000) + std::string(rng() % 3, 'x');
      if (rng() % 500 == 0) c.clear();
      const auto found = table.find(c);
      const auto it = model.find(c);
      ASSERT_EQ(found.has_value(), it != model.end()) << c;
      if (found) {
        ASSERT_EQ(*found, it->second);
        continue;
      }
      sluice::topologies::overflow_detail::live_state live;
      live.st.handled_offset = i;
      const auto n = table.insert(c, live);
      model.emplace(c, n);
    }
    ASSERT_EQ(table.size(), model.size());
    for (const auto& [c, n] : model) {
      const auto found = table.find(c);
      ASSERT_TRUE(found) << c;
      EXPECT_EQ(*found, n);
      EXPECT_EQ(table[n].customer, c);
    }
    EXPECT_FALSE(table.find("absent-customer"));
    table.clear();
    EXPECT_EQ(table.size(), 0u);
    EXPECT_FALSE(table.find(model.begin()->first));
  }
}

TEST(overflow_buffer_fields, scanner_agrees_with_nlohmanns_parser_on_random_values) {
  value_generator gen(20261123);
  std::size_t taken = 0;
  for (int i = 0; i < 60000; ++i) {
    const std::string v = gen.next();
    const auto expected = reference_outcome(v);
    ASSERT_EQ(scanner_outcome(v), expected) << "value (" << v.size() << " bytes): " << ::testing::PrintToString(v);
    taken += expected.starts_with("ok");
  }
  // Both kinds are exercised: many values taken, many refused.
  EXPECT_GT(taken, 10000u);
  EXPECT_LT(taken, 50000u);
  // The one difference, on purpose: nlohmann takes any depth, the scanner refuses values
  // nested deeper than sluice's JSON limit (issue 12), well formed or not, without recursion.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  EXPECT_EQ(reference_outcome("{\"a\":" + deep + ",\"ttl_ms\":3}"), "ok ttl=3 deliver=-");
  for (const auto& v : {"{\"a\":" + deep + ",\"ttl_ms\":3}", "{\"a\":" + deep.substr(0, 1'500'000) + "}"})
    EXPECT_NE(scanner_outcome(v).find("deeper than 1000 levels"), std::string::npos) << scanner_outcome(v);
}

namespace {
double sample(topology_test_driver& d, const std::string& name, const std::string& label_part = "") {
  for (const auto& s : d.metrics().snapshot())
    if (s.name == name && s.labels.find(label_part) != std::string::npos) return s.value;
  return -1;
}
}  // namespace

// The gauges of the issue's metrics list, refreshed once a second: records buffered now,
// customers buffering, the oldest buffered age, and the backlogs of the N largest, one series
// per customer (N = top_backlogs): a customer leaving the top N loses its series.
TEST(overflow_buffer, gauges_show_the_backlog_customers_oldest_age_and_top_backlogs) {
  auto o = rate_opts(0);  // everything stays buffered
  o.top_backlogs = 2;
  harness h(o);
  for (int i = 0; i < 10; ++i) h.pipe("c1", msg(i));
  for (int i = 0; i < 5; ++i) h.pipe("c2", msg(i));
  h.pipe("c3", msg(0));
  h.run_for(100);  // the first tick reports
  auto& d = *h.driver;
  EXPECT_EQ(sample(d, "sluice_overflow_buffered"), 16);
  EXPECT_EQ(sample(d, "sluice_overflow_customers_buffering"), 3);
  EXPECT_EQ(sample(d, "sluice_overflow_oldest_buffered_age_ms"), 100);
  EXPECT_EQ(sample(d, "sluice_overflow_top_backlog", "customer=\"c1\""), 10);
  EXPECT_EQ(sample(d, "sluice_overflow_top_backlog", "customer=\"c2\""), 5);
  EXPECT_EQ(sample(d, "sluice_overflow_top_backlog", "customer=\"c3\""), -1) << "c3 is not among the top 2";
  // c2's rate goes up: its backlog drains, and the next report shows c3 in its place.
  h.rate("c2", R"({"rate_per_second":1000})");
  h.run_for(1000);
  EXPECT_EQ(h.take("out").size(), 5u);
  EXPECT_EQ(sample(d, "sluice_overflow_buffered"), 11);
  EXPECT_EQ(sample(d, "sluice_overflow_customers_buffering"), 2);
  EXPECT_EQ(sample(d, "sluice_overflow_oldest_buffered_age_ms"), 1100);
  EXPECT_EQ(sample(d, "sluice_overflow_top_backlog", "customer=\"c1\""), 10);
  EXPECT_EQ(sample(d, "sluice_overflow_top_backlog", "customer=\"c2\""), -1) << "c2 left the top 2";
  EXPECT_EQ(sample(d, "sluice_overflow_top_backlog", "customer=\"c3\""), 1);
  std::size_t series = 0;
  for (const auto& s : d.metrics().snapshot()) series += s.name == "sluice_overflow_top_backlog";
  EXPECT_EQ(series, 2u);
}

// A task leaving the instance (a rebalance, a shutdown) takes its gauges along: the task
// goes on elsewhere, whose values these would contradict. Its counters stay.
TEST(overflow_buffer, a_closed_task_leaves_no_backlog_gauges_behind) {
  sluice::metrics_registry registry;  // outlives the driver
  auto gauges = [&registry] {
    std::vector<std::string> names;
    for (const auto& s : registry.snapshot())
      if (s.name == "sluice_overflow_buffered" || s.name == "sluice_overflow_customers_buffering" ||
          s.name == "sluice_overflow_oldest_buffered_age_ms" || s.name == "sluice_overflow_top_backlog")
        names.push_back(s.name);
    return names;
  };
  {
    sluice::testing::driver_options d;
    d.metrics = &registry;
    harness h(rate_opts(0), {}, d);
    h.pipe("c1", msg(0));
    h.run_for(100);
    EXPECT_EQ(gauges().size(), 4u);
  }
  EXPECT_TRUE(gauges().empty());
  EXPECT_EQ(registry.total("sluice_overflow_buffered_total"), 1);
}

// A customer id is data: in the top-backlog label it is escaped for the Prometheus text
// format (quote, backslash, line feed) and a byte that is not UTF-8 becomes U+FFFD, so
// /metrics stays parseable whatever the keys.
TEST(overflow_buffer, a_customer_id_in_a_metric_label_is_escaped) {
  auto o = rate_opts(0);
  harness h(o);
  h.pipe(std::string("a\"b\\c\nd\xff", 8), msg(0));
  h.run_for(100);
  EXPECT_EQ(sample(*h.driver, "sluice_overflow_top_backlog", "customer=\"a\\\"b\\\\c\\nd\xEF\xBF\xBD\""), 1);
  const std::string text = h.driver->metrics().prometheus_text();
  EXPECT_NE(text.find("customer=\"a\\\"b\\\\c\\nd\xEF\xBF\xBD\"} 1"), std::string::npos) << text;
}
