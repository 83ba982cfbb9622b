// sluice::topologies::pace against a real broker: the sluice-throttle topology with
// pace.records.per.second is started on a backlog of 50,000 records and must deliver every
// one of them, in order per key, while never exceeding the rate by more than 10 % in any
// 5-second window.
//
// What is measured: the output topic is created with message.timestamp.type=LogAppendTime,
// so each output record carries the time the broker appended it, i.e. when downstream
// could first see it. Pace itself forwards records with their timestamps unchanged. The
// first second of output is warm-up (the consumer's first fetches, every bucket full).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "scratch_dir.hpp"
#include "sluice/sluice.hpp"
#include "sluice/topologies/throttle.hpp"

using namespace std::chrono_literals;

TEST(pace, released_backlog_leaves_at_the_configured_rate_and_every_record_arrives) {
  SLUICE_REQUIRE_BROKER();
  constexpr int records = 50'000, keys = 1000;
  constexpr double rate = 2000;  // 25 s for the backlog
  auto in = sluice::test::unique_name("pace-in"), out = sluice::test::unique_name("pace-out");
  sluice::config cfg;
  cfg.set("bootstrap.servers", sluice::test::broker_bootstrap());
  cfg.set("application.id", sluice::test::unique_name("pace"));
  cfg.set("state.dir", sluice::test::scratch_path("sluice-state").string());
  cfg.set("commit.interval.ms", "200");
  sluice::topic_admin admin(cfg);
  // The input's timestamps are from 2023: without retention.ms=-1 the broker's retention
  // check (every 5 minutes) deletes the backlog while the test reads it.
  admin.create_topic(in, 4, {{"retention.ms", "-1"}});
  admin.create_topic(out, 4, {{"message.timestamp.type", "LogAppendTime"}});

  {
    sluice::topic_writer w(cfg);
    for (int i = 0; i < records; ++i)
      w.send(in, "k" + std::to_string(i % keys), std::to_string(i), 1'700'000'000'000 + i);
    w.flush();
  }
  sluice::topologies::throttle_options o{.window = 1s, .limit = 1'000'000};
  sluice::app app(sluice::topologies::throttle_job_topology(in, out, "", o, rate), cfg);
  app.start();
  sluice::topic_reader reader(cfg, {out});
  auto got = reader.read_at_least(records, 100s);
  auto extra = reader.poll(500ms);
  app.close();

  ASSERT_EQ(got.size(), static_cast<std::size_t>(records));
  EXPECT_TRUE(extra.empty()) << extra.size() << " records more than the input";
  std::set<std::string> values;
  std::vector<std::int64_t> appended;
  std::map<std::string, int> last_of_key;  // records of a key keep their order (value i grows)
  std::size_t out_of_order = 0;
  std::map<std::int32_t, std::int64_t> partition_done;  // last append per output partition
  for (const auto& m : got) {
    values.insert(*m.value);
    appended.push_back(m.timestamp);
    partition_done[m.partition] = std::max(partition_done[m.partition], m.timestamp);
    auto last = last_of_key.try_emplace(*m.key, -1).first;
    auto i = std::stoi(*m.value);
    if (i < last->second) ++out_of_order;
    last->second = i;
  }
  EXPECT_EQ(values.size(), static_cast<std::size_t>(records)) << "a record is missing or duplicated";
  EXPECT_EQ(out_of_order, 0u) << "records of a key left in another order than they came";

  std::sort(appended.begin(), appended.end());
  auto warm = appended.front() + 1000;
  // The most records appended within `window_ms` after warm-up, and when that window began.
  auto busiest = [&](std::int64_t window_ms) {
    std::size_t worst = 0, lo = 0;
    std::int64_t worst_at = 0;
    for (std::size_t hi = 0; hi < appended.size(); ++hi) {
      if (appended[hi] < warm) continue;
      while (appended[lo] < warm || appended[hi] - appended[lo] >= window_ms) ++lo;
      if (hi - lo + 1 > worst) {
        worst = hi - lo + 1;
        worst_at = appended[lo] - appended.front();
      }
    }
    return std::make_pair(worst, worst_at);
  };
  const auto [worst, worst_at] = busiest(1000);
  const auto [worst_5s, worst_5s_at] = busiest(5000);
  auto seconds = static_cast<double>(appended.back() - appended.front()) / 1000.0;
  // Partitions hold unequal shares of the keys, and an idle partition's share is not lent:
  // the job runs at `rate` only until the first partition's backlog is done.
  auto all_busy_until = appended.back();
  for (const auto& [partition, done] : partition_done) all_busy_until = std::min(all_busy_until, done);
  auto busy = std::count_if(appended.begin(), appended.end(), [&](auto t) { return t >= warm && t < all_busy_until; });
  std::printf(
      "pace: %d records in %.1f s (%.0f/s); %.0f/s while every partition had a backlog; busiest window after "
      "warm-up: %zu records in 1 s at +%lld ms, %zu in 5 s at +%lld ms\n",
      records, seconds, records / seconds,
      static_cast<double>(busy) * 1000.0 / static_cast<double>(std::max<std::int64_t>(1, all_busy_until - warm)), worst,
      static_cast<long long>(worst_at), worst_5s, static_cast<long long>(worst_5s_at));
  // The times are the broker's append times, not pace's: a producer or broker that stalls on
  // a loaded machine appends what pace sent meanwhile all at once, and a 1 s window then holds
  // the rate plus the stall's records (seen: 2303 of 2000 in CI, a stall of about 150 ms). Over
  // 5 s a stall weighs a fifth as much, so the bound (10 %) holds through stalls up to 500 ms
  // and still fails a pace that releases its backlog in bursts. The exact token-bucket bound,
  // on pace's own clock and in every window, is held by pace_driver_test; the rate on average
  // by the total time below.
  EXPECT_LE(static_cast<double>(worst_5s), rate * 5 * 1.10);
  // Delays, but not needlessly: the backlog takes at least records / rate seconds.
  EXPECT_GE(seconds, records / rate * 0.95);
}
