// sluice::topologies::pace through the TopologyTestDriver: nothing is dropped, emission
// times respect the rate (per task share = rate / partitions), and input is held back in
// Kafka (the driver's queue) while a task is over its share instead of being buffered.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/pace.hpp"
#include "sluice/topologies/throttle.hpp"

using namespace std::chrono_literals;
using sluice::topologies::pace;
using sluice::topologies::pace_options;

namespace {

constexpr std::int64_t start_ms = 1'700'000'000'000;

/// Replaces the timestamp with the wall clock at which the record reached it, so a test can
/// read when pace emitted each record.
struct stamp_emission_time final : sluice::processor<std::string, std::string> {
  void process(const sluice::record<std::string, std::string>& r) override {
    auto out = r;
    out.timestamp = context().wall_clock_ms();
    context().forward(out);
  }
};

/// in -> peek (counts what the task consumed) -> pace -> [stamp] -> out
sluice::topology paced(pace_options o, int* consumed, bool stamp = true) {
  sluice::streams_builder b;
  auto s = b.stream<std::string, std::string>("in")
               .peek([consumed](const std::string&, const std::string&) { ++*consumed; })
               .process(pace<std::string, std::string>(o));
  if (stamp) s = s.process([] { return std::make_unique<stamp_emission_time>(); });
  s.to("out");
  return b.build();
}

sluice::testing::driver_options at_start(int partitions = 1) {
  return {.partitions = partitions, .start_wall_clock_ms = start_ms};
}

/// The most records whose times fall in any window [t, t + width).
std::size_t max_in_window(std::vector<std::int64_t> times, std::int64_t width) {
  std::sort(times.begin(), times.end());
  std::size_t best = 0, lo = 0;
  for (std::size_t hi = 0; hi < times.size(); ++hi) {
    while (times[hi] - times[lo] >= width) ++lo;
    best = std::max(best, hi - lo + 1);
  }
  return best;
}

}  // namespace

TEST(pace, delays_never_drops_and_emits_a_backlog_at_the_rate) {
  int consumed = 0;
  // 100/s, burst 20 ms -> bucket of 2 records.
  sluice::testing::topology_test_driver d(paced({.records_per_second = 100, .burst = 20ms}, &consumed), {}, at_start());
  auto in = d.input_topic<std::string, std::string>("in");
  auto out = d.output_topic<std::string, std::string>("out");
  for (int i = 0; i < 1000; ++i) in.pipe("k", std::to_string(i), i);
  d.advance_wall_clock(10s);

  auto got = out.read_all();
  ASSERT_EQ(got.size(), 1000u);
  std::vector<std::int64_t> emitted;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(got[i].value, std::to_string(i)) << "order or content changed";
    emitted.push_back(got[i].timestamp);
  }
  EXPECT_LE(max_in_window(emitted, 1000), 100u + 2u);  // rate * 1 s + bucket
  EXPECT_LE(max_in_window(emitted, 100), 10u + 2u);
  // Not slower than the rate either: records 0 and 1 (a full bucket) leave at once, then one
  // every 10 ms as the bucket is half full again: record i >= 1 at start + (i - 1) * 10 ms.
  EXPECT_EQ(emitted.front(), start_ms);
  EXPECT_EQ(emitted[1], start_ms);
  EXPECT_EQ(emitted[2], start_ms + 10);
  EXPECT_EQ(emitted.back(), start_ms + 998 * 10);
}

TEST(pace, input_is_held_in_kafka_while_the_task_is_over_its_share) {
  int consumed = 0;
  // 10/s with no burst: one record per 100 ms.
  sluice::testing::topology_test_driver d(paced({.records_per_second = 10, .burst = 0ms}, &consumed, false), {},
                                          at_start());
  auto in = d.input_topic<std::string, std::string>("in");
  auto out = d.output_topic<std::string, std::string>("out");
  for (int i = 0; i < 5; ++i) in.pipe("k", "v" + std::to_string(i), 1000 + i);
  // One went through; the other four were never handed to the task (not even to the peek
  // upstream of pace): they wait as unread input, not in the processor.
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(consumed, 1);
  d.advance_wall_clock(99ms);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(consumed, 1);
  d.advance_wall_clock(1ms);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(consumed, 2);
  d.advance_wall_clock(1s);
  auto got = out.read_all();
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(consumed, 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].value, "v" + std::to_string(i));
    EXPECT_EQ(got[i].timestamp, 1000 + i) << "pace forwards records unchanged";
  }
  // An idle task earns no more than its bucket: after a long pause one record passes at
  // once and the next waits 100 ms again.
  d.advance_wall_clock(1h);
  in.pipe("k", "a");
  in.pipe("k", "b");
  EXPECT_EQ(out.size(), 1u);
  d.advance_wall_clock(100ms);
  EXPECT_EQ(out.size(), 2u);
}

TEST(pace, the_rate_is_split_over_partitions_and_an_idle_share_is_not_lent) {
  int consumed = 0;
  // 400/s over 4 partitions: 100/s per task, one record per 10 ms.
  sluice::testing::topology_test_driver d(paced({.records_per_second = 400, .burst = 0ms}, &consumed), {}, at_start(4));
  auto in = d.input_topic<std::string, std::string>("in");
  auto out = d.output_topic<std::string, std::string>("out");
  for (int i = 0; i < 200; ++i)
    for (int p = 0; p < 4; ++p) in.pipe("k", std::to_string(p), i, {}, p);
  d.advance_wall_clock(999ms);
  // Each task sent 100 in its first second (at 0, 10, ..., 990 ms).
  EXPECT_EQ(out.size(), 400u);
  d.advance_wall_clock(2s);
  auto got = out.read_all();
  ASSERT_EQ(got.size(), 800u);
  std::vector<std::int64_t> all;
  for (const auto& r : got) all.push_back(r.timestamp);
  EXPECT_LE(max_in_window(all, 1000), 400u + 4u);

  // Only partition 0 has input now: it still gets 100/s, not 400/s.
  for (int i = 0; i < 200; ++i) in.pipe("k", "solo", 5000 + i, {}, 0);
  d.advance_wall_clock(1s);
  EXPECT_LE(out.size(), 101u);
  EXPECT_GE(out.size(), 100u);
}

TEST(pace, paces_the_passed_output_of_the_throttle_job) {
  sluice::topologies::throttle_options o{.window = 1min, .limit = 1000};
  sluice::testing::topology_test_driver d(sluice::topologies::throttle_job_topology("in", "out", "", o, 50.0), {},
                                          at_start());
  auto in = d.input_topic<std::string, std::string>("in");
  auto out = d.output_topic<std::string, std::string>("out");
  for (int i = 0; i < 100; ++i) in.pipe("k", std::to_string(i), 7000 + i);
  EXPECT_EQ(out.size(), 1u);  // 50/s, default burst of 10 ms -> a bucket of one record
  d.advance_wall_clock(1s);
  EXPECT_EQ(out.size(), 51u);
  d.advance_wall_clock(1s);
  auto got = out.read_all();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i].timestamp, 7000 + i);
  EXPECT_EQ(d.metrics().total("sluice_throttle_passed_total"), 100);
}

TEST(pace, bucket_sends_what_it_holds_from_half_full_and_a_late_wake_up_loses_nothing) {
  sluice::topologies::pace_detail::bucket b(500, 20ms);  // 2 ms per record, 10 records
  EXPECT_EQ(b.capacity(), 10);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(b.take(1000), 0) << i;
  EXPECT_EQ(b.take(1000), 1010);  // half full (5 records) 10 ms later
  // Resumed on time: the 5 it holds, then wait until half full again.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.take(1010), 0) << i;
  EXPECT_EQ(b.take(1010), 1020);
  // Resumed 10 ms late: the bucket kept filling meanwhile, so nothing is lost: 10 records
  // (25 since 1000 in all: B + 30 ms at 500/s, the bound).
  for (int i = 0; i < 9; ++i) EXPECT_EQ(b.take(1030), 0) << i;
  EXPECT_EQ(b.take(1030), 1040);
  // A record it had no token for (fan-out) is owed: the pause grows by its interval.
  EXPECT_EQ(b.take(1030), 1042);
}

TEST(pace, options_out_of_range_are_rejected) {
  auto rejects = [](pace_options o, const std::string& needle) {
    auto msg = sluice::test::error_of([&] { sluice::topologies::validate(o); }, sluice::errc::invalid_config);
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  rejects({.records_per_second = 0}, "records_per_second must be a positive number");
  rejects({.records_per_second = -5}, "records_per_second");
  rejects({.records_per_second = std::numeric_limits<double>::infinity()}, "records_per_second");
  rejects({.records_per_second = 1, .burst = 10001ms}, "burst must be within 0 .. 10000 ms, got 10001 ms");
  EXPECT_NO_THROW(sluice::topologies::validate({.records_per_second = 0.5, .burst = 0ms}));
}
