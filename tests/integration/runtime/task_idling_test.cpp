// Task idling (max.task.idle.ms, Kafka Streams' KIP-695) against the real broker: a
// stream-stream join whose two inputs hold a backlog before the job starts. The left
// topic's records are small and its backlog arrives in a few fetches; the right topic's
// are large, one per batch, and the consumer's max.partition.fetch.bytes lets a fetch bring
// only a couple of them: left's backlog is fetched long before right's, whose records have
// the older timestamps. Without idling the task takes left's records while right's queue
// is empty, so they find no partner and right's records come after the left ones they
// should have met left the join window: results go missing (checked by hand with
// max.task.idle.ms=-1, which is sluice's former behaviour: the output came out short).
// With idling the output equals what Kafka Streams 3.9 computes in timestamp order.
//
// The transactional case writes both inputs in transactions, so the end of each partition
// (and the end of each transaction within it) is a commit marker: librdkafka's position
// stays one short of the end there, and a rule built on it would hold the last left record
// forever. The evidence that it does not: the group commits both inputs to their end and
// the output, read to its end, is complete.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "broker_env.hpp"
#include "group_offsets.hpp"
#include "scratch_dir.hpp"
#include "kafka/producer.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

constexpr int records = 400;                     // per side
constexpr std::int64_t base_ts = 1700000000000;  // right i at base + 10 i, left i at base + 10 i + 3
constexpr auto join_difference = 3ms;            // left i meets right i only

enum class input_writes { plain, transactional };

/// Writes one side's backlog: `records` records of key "k" and values prefix + i, at
/// base_ts + 10 i + offset_ms, padded with `padding` bytes (cut off by the joiner). Batches
/// hold at most about 2000 bytes; transactional writes commit every 25 records.
void write_side(const std::string& bootstrap, const std::string& topic, const std::string& prefix,
                std::int64_t offset_ms, std::size_t padding, input_writes writes) {
  sluice::kafka::config_map conf{{"bootstrap.servers", bootstrap}, {"batch.size", "2000"}, {"linger.ms", "5"}};
  const bool transactional = writes == input_writes::transactional;
  sluice::kafka::producer p(conf, {.mode = transactional ? sluice::kafka::producer_mode::transactional
                                                         : sluice::kafka::producer_mode::idempotent,
                                   .transactional_id = transactional ? topic + "-writer" : std::string()});
  if (transactional) p.init_transactions(60s);
  for (int i = 0; i < records; ++i) {
    if (transactional && i % 25 == 0) p.begin_transaction();
    const std::string value = prefix + std::to_string(i) + "|" + std::string(padding, 'x');
    p.produce(topic, 0, std::string_view("k"), std::string_view(value), base_ts + 10 * i + offset_ms, {});
    if (transactional && i % 25 == 24) p.commit_transaction(60s);
  }
  p.flush(60s);
}

struct joined {
  std::string value;
  std::int64_t timestamp;
  bool operator==(const joined&) const = default;
};

std::ostream& operator<<(std::ostream& os, const joined& j) { return os << j.value << "@" << j.timestamp; }

/// Runs the join over a backlog of both sides and returns its output, read once the group
/// has committed both inputs to their end.
std::vector<joined> join_backlog(input_writes writes, sluice::processing_guarantee guarantee) {
  const auto bootstrap = sluice::test::broker_bootstrap();
  const auto app_id = sluice::test::unique_name("idling");
  const auto left = app_id + "-left", right = app_id + "-right", out = app_id + "-out";
  sluice::config cfg;
  cfg.set("bootstrap.servers", bootstrap);
  cfg.set("application.id", app_id);
  cfg.set("state.dir", sluice::test::scratch_path("sluice-state").string());
  cfg.set("processing.guarantee",
          guarantee == sluice::processing_guarantee::exactly_once ? "exactly_once" : "at_least_once");
  cfg.set("commit.interval.ms", "200");
  // A fetch brings about 4 KiB per partition: most of left's small records, two of right's.
  cfg.set("consumer.max.partition.fetch.bytes", "4096");
  if (const char* idle = std::getenv("SLUICE_TEST_MAX_TASK_IDLE_MS")) cfg.set("max.task.idle.ms", idle);  // by hand
  {
    sluice::topic_admin admin(cfg);
    admin.create_topic(left, 1);
    admin.create_topic(right, 1);
    admin.create_topic(out, 1);
  }
  write_side(bootstrap, right, "R", 0, 1500, writes);
  write_side(bootstrap, left, "L", 3, 0, writes);

  sluice::streams_builder b;
  auto cut = [](const std::string& v) { return v.substr(0, v.find('|')); };
  b.stream<std::string, std::string>(left)
      .join(
          b.stream<std::string, std::string>(right),
          [cut](const std::string& l, const std::string& r) { return cut(l) + "+" + cut(r); },
          sluice::join_windows::of_time_difference_without_grace(join_difference), "idling-join")
      .to(out);
  sluice::app app(b.build(), cfg);
  app.start();
  // Evidence that nothing more is coming: the group committed both inputs to their end (a
  // commit follows the outputs it covers); the output topic read to its end is then all of it.
  auto consumed = [&] {
    return sluice::test::group_at_end(sluice::test::group_progress(bootstrap, app_id, left, 1)) &&
           sluice::test::group_at_end(sluice::test::group_progress(bootstrap, app_id, right, 1));
  };
  for (auto deadline = std::chrono::steady_clock::now() + 120s;
       !consumed() && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(consumed()) << "the job did not reach the end of its inputs (state " << static_cast<int>(app.state())
                          << ")";
  std::vector<joined> got;
  for (const auto& m : sluice::topic_reader(cfg, {out}).read_to_end(60s))
    got.push_back({m.value.value_or("<null>"), m.timestamp});
  EXPECT_EQ(app.metrics().total("sluice_records_processed_total"), 2 * records);
  app.close();
  EXPECT_NE(app.state(), sluice::app_state::error) << app.error_message();
  return got;
}

/// Kafka Streams 3.9's result for the backlog, processed in timestamp order: left i meets
/// right i (3 ms before it) and nothing else; each result carries left's (the later) time.
std::vector<joined> expected_join() {
  std::vector<joined> out;
  for (int i = 0; i < records; ++i)
    out.push_back({"L" + std::to_string(i) + "+R" + std::to_string(i), base_ts + 10 * i + 3});
  return out;
}

}  // namespace

TEST(task_idling, a_join_over_a_backlog_on_both_sides_pairs_records_in_timestamp_order) {
  SLUICE_REQUIRE_BROKER();
  EXPECT_EQ(join_backlog(input_writes::plain, sluice::processing_guarantee::at_least_once), expected_join());
}

TEST(task_idling, transactional_inputs_ending_in_commit_markers_never_hold_a_task) {
  SLUICE_REQUIRE_BROKER();
  EXPECT_EQ(join_backlog(input_writes::transactional, sluice::processing_guarantee::exactly_once), expected_join());
}
