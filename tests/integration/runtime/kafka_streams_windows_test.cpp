// The windowed topologies of issue 16 run in sluice and in Kafka Streams 3.9 (the peer in
// bench/peers/kafka-streams, WindowedTopologies.java) on the same input topics, and their
// output topics are compared record for record: partition, key bytes, value bytes and
// timestamp, in order per partition.
//
// The events of the windowed aggregations (one source topic) are produced whole before
// either job starts. The join inputs (two co-partitioned topics per join) are fed one record
// at a time, each once both jobs have committed the one before: Kafka Streams processes a
// task's partitions in timestamp order when all of them hold buffered data (max.task.idle.ms
// 0 still waits for data it knows is on the broker), sluice processes what it has fetched
// (docs/time-and-windows.md, "Compared with Kafka Streams"), so a backlog would interleave
// the two sides differently. Completeness is evidence, not a wait: each job's consumer
// group has committed the end offset of every input partition (under at_least_once both
// commit only after their outputs are acknowledged), and only then are the output topics
// read to their end.
//
// The peer is built here with Maven when its jar is missing or older than its sources
// (mvn and java come with scripts/setup; the dependencies with the first build, from Maven
// Central into ~/.m2).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "broker_env.hpp"
#include "group_offsets.hpp"
#include "job_process.hpp"
#include "kafka/consumer.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr int partitions = 2;
constexpr std::int64_t base_time = 1'700'000'000'000;  // a multiple of every window size below

/// The outputs both jobs write, OUT_PREFIX-<name> (WindowedTopologies.java).
const std::vector<std::string> outputs = {"tumbling-count",
                                          "hopping-aggregate",
                                          "sliding-count",
                                          "session-count",
                                          "suppressed-count",
                                          "stream-inner-join",
                                          "stream-outer-join",
                                          "stream-asymmetric-outer-join",
                                          "table-outer-join",
                                          "table-inner-join",
                                          "table-left-join",
                                          "windowed-table-join",
                                          "session-table-join",
                                          "suppressed-table-join",
                                          "suppressed-count-join",
                                          "suppressed-sliding-count-join",
                                          "double-suppressed-count-join",
                                          "plain-count",
                                          "plain-aggregate"};

std::string show(const std::optional<std::string>& v) { return v ? *v : "null"; }

/// The sluice side of WindowedTopologies.java, node for node.
sluice::topology windowed_topologies(const std::string& in, const std::string& out) {
  sluice::streams_builder b;
  auto by_key = b.stream<std::string, std::string>(in + "-events").group_by_key();
  auto tumbling_count =
      by_key.windowed_by(sluice::time_windows::of_size_and_grace(100ms, 50ms)).count("tumbling-count");
  tumbling_count.to_stream().to(out + "-tumbling-count");
  by_key.windowed_by(sluice::time_windows::of_size_and_grace(100ms, 50ms).advance_by(50ms))
      .aggregate([] { return std::string(); },
                 [](const std::string&, const std::string& v, const std::string& agg) { return agg + v + ","; },
                 "hopping-aggregate")
      .to_stream()
      .to(out + "-hopping-aggregate");
  auto sliding_count =
      by_key.windowed_by(sluice::sliding_windows::of_time_difference_and_grace(100ms, 50ms)).count("sliding-count");
  sliding_count.to_stream().to(out + "-sliding-count");
  auto session_count =
      by_key.windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(50ms, 50ms)).count("session-count");
  session_count.to_stream().to(out + "-session-count");
  auto suppressed_count = by_key.windowed_by(sluice::time_windows::of_size_and_grace(100ms, 50ms))
                              .count("suppressed-count")
                              .suppress(sluice::until_window_closes());
  suppressed_count.to_stream().to(out + "-suppressed-count");

  // Aggregations without windows: an update is stamped with the later of its record's
  // timestamp and the aggregate's, so an out-of-order record keeps the aggregate's.
  by_key.count("plain-count").to_stream().to(out + "-plain-count");
  by_key
      .aggregate([] { return std::string(); },
                 [](const std::string&, const std::string& v, const std::string& agg) { return agg + v + ","; },
                 "plain-aggregate")
      .to_stream()
      .to(out + "-plain-aggregate");

  // Windowed tables joined on the windowed key: a time window by key and start, a session by
  // key, start and end; sessions merged away leave the outer join.
  auto concat = [](const std::string& agg, const std::string& v) { return agg + "," + v; };
  auto tumbling_reduce =
      by_key.windowed_by(sluice::time_windows::of_size_and_grace(100ms, 50ms)).reduce(concat, "tumbling-reduce");
  tumbling_count
      .join(
          tumbling_reduce, [](std::int64_t n, const std::string& vs) { return std::to_string(n) + ":" + vs; },
          "windowed-table-join")
      .to_stream()
      .to(out + "-windowed-table-join");
  // A suppressed table on a join's side: a window its buffer holds answers with what the
  // suppression has emitted for it: nothing for a reduce's window before it closes.
  tumbling_count
      .left_join(
          tumbling_reduce.suppress(sluice::until_window_closes()),
          [](std::int64_t n, const std::optional<std::string>& vs) { return std::to_string(n) + "=" + show(vs); },
          "suppressed-table-join")
      .to_stream()
      .to(out + "-suppressed-table-join");
  // A count's window held and never emitted answers the old value the count passed when it
  // created the window: 0, or for a sliding left window seeded from an earlier window, that
  // window's count (docs/time-and-windows.md, "Prior values"). The counts were added before
  // the reduces, so they take each record first in both.
  auto show_count = [](const std::optional<std::int64_t>& n) { return n ? std::to_string(*n) : std::string("null"); };
  tumbling_reduce
      .left_join(
          suppressed_count,
          [show_count](const std::string& vs, const std::optional<std::int64_t>& n) {
            return vs + "=" + show_count(n);
          },
          "suppressed-count-join")
      .to_stream()
      .to(out + "-suppressed-count-join");
  by_key.windowed_by(sluice::sliding_windows::of_time_difference_and_grace(100ms, 50ms))
      .reduce(concat, "sliding-reduce")
      .left_join(
          sliding_count.suppress(sluice::until_window_closes()),
          [show_count](const std::string& vs, const std::optional<std::int64_t>& n) {
            return vs + "=" + show_count(n);
          },
          "suppressed-sliding-count-join")
      .to_stream()
      .to(out + "-suppressed-sliding-count-join");
  // A table suppressed twice: the outer buffer's prior value of a window is the old value
  // the inner one emits it with, that of the latest update the inner one held for it.
  tumbling_reduce
      .left_join(
          tumbling_count.suppress(sluice::until_time_limit(100ms, {})).suppress(sluice::until_time_limit(200ms, {})),
          [show_count](const std::string& vs, const std::optional<std::int64_t>& n) {
            return vs + "=" + show_count(n);
          },
          "double-suppressed-count-join")
      .to_stream()
      .to(out + "-double-suppressed-count-join");
  auto session_reduce = by_key.windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(50ms, 50ms))
                            .reduce(concat, "session-reduce");
  session_count
      .outer_join(
          session_reduce,
          [](const std::optional<std::int64_t>& n, const std::optional<std::string>& vs) {
            return (n ? std::to_string(*n) : "null") + "+" + show(vs);
          },
          "session-table-join")
      .to_stream()
      .to(out + "-session-table-join");

  auto left = b.stream<std::string, std::string>(in + "-left");
  auto right = b.stream<std::string, std::string>(in + "-right");
  const auto within = sluice::join_windows::of_time_difference_and_grace(50ms, 20ms);
  left.join(
          right, [](const std::string& l, const std::string& r) { return l + "+" + r; }, within, "inner-join")
      .to(out + "-stream-inner-join");
  left.outer_join(
          right,
          [](const std::optional<std::string>& l, const std::optional<std::string>& r) {
            return show(l) + "+" + show(r);
          },
          within, "outer-join")
      .to(out + "-stream-outer-join");
  // A window reaching further after a left record than before it: left records join right
  // ones in [t - 10, t + 40], right records left ones in [t - 40, t + 10]; an unmatched left
  // record comes out once stream time passes t + 40 + grace, a right one t + 10 + grace.
  left.outer_join(
          right,
          [](const std::optional<std::string>& l, const std::optional<std::string>& r) {
            return show(l) + "+" + show(r);
          },
          within.before(10ms).after(40ms), "asymmetric-outer-join")
      .to(out + "-stream-asymmetric-outer-join");

  auto tleft = b.table<std::string, std::string>(in + "-tleft", "tleft-store");
  auto tright = b.table<std::string, std::string>(in + "-tright", "tright-store");
  tleft
      .outer_join(
          tright,
          [](const std::optional<std::string>& l, const std::optional<std::string>& r) {
            return show(l) + "+" + show(r);
          },
          "table-outer-join")
      .to_stream()
      .to(out + "-table-outer-join");
  // The table updates arrive out of timestamp order (make_join_input): a result carries the
  // later of its update's timestamp and the other side's stored value's, as in Kafka Streams.
  tleft
      .join(
          tright, [](const std::string& l, const std::string& r) { return l + "+" + r; }, "table-inner-join")
      .to_stream()
      .to(out + "-table-inner-join");
  tleft
      .left_join(
          tright, [](const std::string& l, const std::optional<std::string>& r) { return l + "+" + show(r); },
          "table-left-join")
      .to_stream()
      .to(out + "-table-left-join");
  return b.build();
}

/// One input record; the partition is murmur2 of the key, as both jobs expect.
struct input_record {
  std::string topic;
  std::string key;
  std::optional<std::string> value;
  std::int64_t timestamp;
};

/// Keys, values and timestamps that exercise every rule of the windowed aggregations:
/// windows opening and closing, out-of-order records within grace and late ones past it,
/// sessions that merge.
std::vector<input_record> make_events(const std::string& in) {
  std::mt19937 rng(16);
  std::vector<input_record> records;
  std::int64_t t = base_time;
  for (int i = 0; i < 600; ++i) {
    t += rng() % 20;
    std::int64_t ts = t;
    if (rng() % 5 == 0) ts -= rng() % 200;  // out of order: some within grace, some late
    records.push_back({in + "-events", "k" + std::to_string(rng() % 6), "e" + std::to_string(i), ts});
  }
  return records;
}

/// Join partners within and outside the time difference, out of order within and past the
/// grace, unmatched records of both sides; table updates and deletions on both sides, a
/// third of them older than the update before them (a result of an older update joined
/// with a newer value of the other side takes the other side's timestamp).
std::vector<input_record> make_join_input(const std::string& in) {
  std::mt19937 rng(17);
  std::vector<input_record> records;
  std::int64_t t = base_time;
  for (int i = 0; i < 90; ++i) {
    t += 1 + rng() % 15;
    std::int64_t ts = t;
    if (rng() % 6 == 0) ts -= rng() % 100;
    const bool left = rng() % 2 == 0;
    records.push_back({in + (left ? "-left" : "-right"), "j" + std::to_string(rng() % 4),
                       (left ? "l" : "r") + std::to_string(i), ts});
  }
  t = base_time;
  for (int i = 0; i < 60; ++i) {
    t += 1 + rng() % 10;
    std::int64_t ts = t;
    if (rng() % 3 == 0) ts -= 10 + rng() % 30;  // out of order
    const bool left = rng() % 2 == 0;
    std::optional<std::string> value = (left ? "L" : "R") + std::to_string(i);
    if (rng() % 5 == 0) value.reset();  // a deletion
    records.push_back({in + (left ? "-tleft" : "-tright"), "t" + std::to_string(rng() % 5), value, ts});
  }
  return records;
}

/// An output record as compared: partition, key and value bytes, timestamp.
using output_record = std::tuple<std::int32_t, std::optional<std::string>, std::optional<std::string>, std::int64_t>;

std::string hex(const std::optional<std::string>& s) {
  if (!s) return "null";
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : *s)
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  return out;
}

std::string describe(const std::vector<output_record>& records) {
  std::ostringstream s;
  for (const auto& [p, k, v, ts] : records) s << "  p" << p << " " << hex(k) << " -> " << hex(v) << " @" << ts << "\n";
  return s.str();
}

/// The records of `topic` per partition, in offset order, read to the end offsets.
std::map<std::int32_t, std::vector<output_record>> read_output(const sluice::config& cfg, const std::string& topic) {
  sluice::topic_reader reader(cfg, {topic});
  std::map<std::int32_t, std::vector<output_record>> by_partition;
  for (auto& m : reader.read_to_end(60s))
    by_partition[m.partition].emplace_back(m.partition, m.key, m.value, m.timestamp);
  return by_partition;
}

/// Feeds records one at a time: each is sent once `groups` have committed every record sent
/// before it (offsets read with one consumer per group, no group joined).
class step_feeder {
 public:
  step_feeder(const sluice::config& cfg, const std::vector<std::string>& groups) : writer_(cfg) {
    for (const auto& g : groups)
      readers_.push_back(std::make_unique<sluice::kafka::consumer>(
          sluice::kafka::config_map{{"bootstrap.servers", sluice::test::broker_bootstrap()}, {"group.id", g}}));
  }
  /// Sends `r` after the previous record is committed by every group; false on timeout.
  bool send(const input_record& r) {
    if (!previous_.topic.empty() && !committed_by_all(previous_, sent_[previous_], 60s)) return false;
    const auto partition = sluice::detail::murmur2_partition(r.key, partitions);
    writer_.send_raw(r.topic, r.key, r.value, r.timestamp, {}, partition);
    writer_.flush();
    previous_ = {r.topic, partition};
    ++sent_[previous_];
    return true;
  }

 private:
  bool committed_by_all(const sluice::kafka::topic_partition& tp, std::int64_t offset, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (auto& c : readers_)
      while (c->committed({tp}, 30s).at(0).offset < offset) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(20ms);
      }
    return true;
  }

  sluice::topic_writer writer_;
  std::vector<std::unique_ptr<sluice::kafka::consumer>> readers_;
  sluice::kafka::topic_partition previous_;
  std::map<sluice::kafka::topic_partition, std::int64_t> sent_;
};

/// Waits until `group` has committed the end offset of every partition of `topics`.
bool consumed_everything(const std::string& group, const std::vector<std::string>& topics,
                         std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& t : topics)
      all = all && sluice::test::group_at_end(
                       sluice::test::group_progress(sluice::test::broker_bootstrap(), group, t, partitions));
    if (all) return true;
    std::this_thread::sleep_for(500ms);
  }
  return false;
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

/// The peer's jar, built with Maven when missing or older than a source file. Empty and a
/// reason when it cannot be built.
std::pair<fs::path, std::string> kafka_streams_peer() {
  const fs::path project = fs::path(SLUICE_SOURCE_DIR) / "bench" / "peers" / "kafka-streams";
  const fs::path out = fs::path(SLUICE_PEER_BUILD_DIR);
  const fs::path jar = out / "bench-kafka-streams-1.jar";
  if (!on_path("mvn") || !on_path("java")) return {{}, "mvn or java is not installed (scripts/setup installs them)"};
  bool fresh = fs::exists(jar);
  if (fresh)
    for (const auto& f : fs::recursive_directory_iterator(project))
      if (f.is_regular_file() && f.last_write_time() > fs::last_write_time(jar)) fresh = false;
  if (fresh) return {jar, {}};
  fs::create_directories(out);
  const auto log = out / "mvn.log";
  const std::string cmd = "mvn -q -B -f '" + (project / "pom.xml").string() +
                          "' package -DskipTests '-Dbench.out=" + out.string() + "' >'" + log.string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0 || !fs::exists(jar))
    return {{}, "mvn package of " + project.string() + " failed:\n" + sluice::test::last_lines(log, 40)};
  return {jar, {}};
}

}  // namespace

TEST(kafka_streams_parity, windowed_topologies_write_the_same_records_as_kafka_streams_3_9) {
  SLUICE_REQUIRE_BROKER();
  auto [jar, why_not] = kafka_streams_peer();
  if (jar.empty()) {
    if (std::getenv("CI")) FAIL() << why_not;
    GTEST_SKIP() << why_not;
  }

  const auto in = sluice::test::unique_name("ksp");
  const auto sluice_out = in + "-sluice", kafka_streams_out = in + "-ks";
  const auto sluice_app = in + "-sluice-app", kafka_streams_app = in + "-ks-app";
  const fs::path work = fs::temp_directory_path() / (in + "-work");
  fs::create_directories(work);

  sluice::config cfg;
  cfg.set("bootstrap.servers", sluice::test::broker_bootstrap());
  sluice::topic_admin admin(cfg);
  const std::vector<std::string> inputs = {in + "-events", in + "-left", in + "-right", in + "-tleft", in + "-tright"};
  for (const auto& t : inputs) admin.create_topic(t, partitions);
  for (const auto& o : outputs)
    for (const auto& prefix : {sluice_out, kafka_streams_out}) admin.create_topic(prefix + "-" + o, partitions);
  {
    sluice::topic_writer w(cfg);
    for (const auto& r : make_events(in)) w.send_raw(r.topic, r.key, r.value, r.timestamp);
    w.flush();
  }

  sluice::test::job_process kafka_streams(
      {"/usr/bin/env", "java", "-jar", jar.string(), "windows", sluice::test::broker_bootstrap(), kafka_streams_app, in,
       kafka_streams_out, (work / "ks-state").string()},
      work / "kafka-streams.log");
  sluice::config app_cfg = cfg;
  app_cfg.set("application.id", sluice_app);
  app_cfg.set("commit.interval.ms", "100");
  app_cfg.set("state.dir", (work / "sluice-state").string());
  sluice::app app(windowed_topologies(in, sluice_out), app_cfg);
  app.start();
  {
    step_feeder feed(cfg, {sluice_app, kafka_streams_app});
    for (const auto& r : make_join_input(in))
      ASSERT_TRUE(feed.send(r)) << "a job did not commit the join input before " << r.topic << " " << r.key << " @"
                                << r.timestamp << "; Kafka Streams' log:\n"
                                << sluice::test::last_lines(kafka_streams.log(), 60);
  }

  const bool sluice_done = consumed_everything(sluice_app, inputs, 180s);
  const bool kafka_streams_done = consumed_everything(kafka_streams_app, inputs, 180s);
  app.close();
  kafka_streams.signal(SIGTERM);
  kafka_streams.wait_exit(60s);
  ASSERT_TRUE(sluice_done) << "sluice did not commit the end of its inputs";
  ASSERT_TRUE(kafka_streams_done) << "Kafka Streams did not commit the end of its inputs; its log:\n"
                                  << sluice::test::last_lines(kafka_streams.log(), 60);

  for (const auto& o : outputs) {
    auto ours = read_output(cfg, sluice_out + "-" + o);
    auto theirs = read_output(cfg, kafka_streams_out + "-" + o);
    std::size_t count = 0;
    for (const auto& [p, records] : theirs) count += records.size();
    EXPECT_GT(count, 0u) << o << ": Kafka Streams wrote nothing";
    for (int p = 0; p < partitions; ++p)
      EXPECT_TRUE(ours[p] == theirs[p]) << o << " partition " << p << " differs.\nsluice:\n"
                                        << describe(ours[p]) << "Kafka Streams:\n"
                                        << describe(theirs[p]);
  }
  fs::remove_all(work);
}
