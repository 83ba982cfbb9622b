// The changelog reader against the real broker where librdkafka's mock cluster cannot stand
// in: read_committed stops at the last stable offset only on a real broker. A transaction of
// a partition's previous owner still open in the changelog when the restore starts (seen in
// the fault suite: an instance paused past its session timeout, resumed, and committed after
// its partition had moved) holds the stable offset below the end. The restore waits for that
// transaction's outcome instead of stopping at the stable offset: a commit also commits the
// input offsets of its records, so the new owner never reads that input again and a store
// restored without those records stays behind for good.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "kafka/producer.hpp"
#include "runtime/changelog_reader.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/stream_task.hpp"
#include "sluice/builder.hpp"
#include "sluice/client.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/state/kv_store.hpp"

namespace sluice::runtime {
namespace {

using namespace std::chrono_literals;

enum class outcome { commit, abort, never };

/// Sends nowhere; the restore processes no records.
struct null_sender final : record_sender {
  void send(std::string_view, std::int32_t, const std::optional<std::string_view>&,
            const std::optional<std::string_view>&, std::int64_t, const sluice::headers&) override {}
};

/// A count store "s" (logged, in memory) of one sub-topology over one partition; its
/// changelog holds 50 committed records (keys k0..k9, values v0..v49), then 10 in a
/// transaction left open (k0..k9 -> open0..open9). The restore runs until it has read every
/// stable record, then the transaction ends with `end`; returns each key's restored value.
std::vector<std::optional<std::string>> restore_across_an_open_transaction(
    outcome end, std::chrono::milliseconds open_transaction_wait = std::chrono::minutes(5)) {
  const auto bootstrap = test::broker_bootstrap();
  const auto app_id = test::unique_name("restore-open-txn");
  const auto changelog = detail::changelog_topic(app_id, "s");
  kafka::config_map client{{"bootstrap.servers", bootstrap}};
  {
    config c;
    c.set("bootstrap.servers", bootstrap);
    topic_admin(c).create_topic(changelog, 1, cleanup_policy::compact);
  }
  {
    kafka::producer committed(client);
    for (int i = 0; i < 50; ++i) {
      auto key = "k" + std::to_string(i % 10), value = "v" + std::to_string(i);
      committed.produce(changelog, 0, std::string_view(key), std::string_view(value), 0, {});
    }
    committed.flush(30s);
  }
  kafka::producer previous_owner(
      client, {.mode = kafka::producer_mode::transactional, .transactional_id = app_id + "-previous-owner"});
  previous_owner.init_transactions(60s);
  previous_owner.begin_transaction();
  for (int i = 0; i < 10; ++i) {
    auto key = "k" + std::to_string(i), value = "open" + std::to_string(i);
    previous_owner.produce(changelog, 0, std::string_view(key), std::string_view(value), 0, {});
  }
  previous_owner.flush(30s);

  streams_builder b;
  b.stream<std::string, std::string>("in").group_by_key().count("s").to_stream().to("out");
  topology topo = b.build();
  metrics_registry metrics;
  task_services services;
  services.topo = &topo;
  services.application_id = app_id;
  services.metrics = &metrics;
  services.memory_stores_only = true;
  services.wall_clock_ms = [] { return std::int64_t{0}; };
  services.subtopology_partitions[0] = 1;
  null_sender sender;
  stream_task task(task_id{0, 0}, services, sender, "thread=\"0\"");
  auto restore_consumer = client;
  restore_consumer["isolation.level"] = "read_committed";
  restore_consumer["enable.partition.eof"] = "true";
  changelog_reader reader(restore_consumer, 60s,
                          {&metrics.get_counter("restored"), &metrics.get_gauge("remaining"),
                           &metrics.get_gauge("done"), &metrics.get_gauge("total"), &metrics.get_gauge("rate")},
                          open_transaction_wait);

  EXPECT_TRUE(reader.add(task));
  EXPECT_EQ(reader.progress().total, 60) << "the end is the high watermark, the open records included";
  std::vector<stream_task*> restored;
  const auto until = [&](auto done) {
    for (auto deadline = std::chrono::steady_clock::now() + 60s;
         !done() && std::chrono::steady_clock::now() < deadline;)
      reader.restore(restored);
  };
  until([&] { return reader.progress().waiting_for_transactions > 0 || !restored.empty(); });
  EXPECT_TRUE(restored.empty()) << "the restore ended at the last stable offset, before the open transaction";
  EXPECT_EQ(reader.progress().waiting_for_transactions, 1);
  EXPECT_EQ(reader.progress().done, 50) << "every stable record read";
  if (end == outcome::commit) previous_owner.commit_transaction(60s);
  if (end == outcome::abort) previous_owner.abort_transaction(60s);
  until([&] { return !restored.empty(); });
  EXPECT_EQ(restored.size(), 1u) << "the restore ends once the transaction has, or the wait for it";
  if (end != outcome::never) {
    EXPECT_GE(task.stores().find("s")->store->committed_offset().value_or(state::changelog_offset(0)).value(), 60)
        << "past the transaction's records";
  }
  // A count's store keeps each value behind the 8-byte timestamp the restore puts in front
  // (state::value_format::timestamped): the values without it.
  std::vector<std::optional<std::string>> values;
  for (int k = 0; k < 10; ++k) {
    auto value = dynamic_cast<state::kv_store&>(*task.stores().find("s")->store).get("k" + std::to_string(k));
    if (value && value->size() >= 8) value->erase(0, 8);
    values.push_back(std::move(value));
  }
  return values;
}

TEST(changelog_restore, waits_for_a_transaction_open_in_the_changelog_and_restores_its_records_once_committed) {
  SLUICE_REQUIRE_BROKER();
  auto values = restore_across_an_open_transaction(outcome::commit);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(values[k], "open" + std::to_string(k)) << "key k" << k;
}

TEST(changelog_restore, waits_for_a_transaction_open_in_the_changelog_and_skips_its_records_once_aborted) {
  SLUICE_REQUIRE_BROKER();
  auto values = restore_across_an_open_transaction(outcome::abort);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(values[k], "v" + std::to_string(40 + k)) << "key k" << k;
}

// A transaction that never ends (a "hanging" one, which the broker does not abort) does not
// keep the task restoring for good: after the wait, the store ends at the stable offset.
TEST(changelog_restore, gives_up_waiting_for_a_transaction_that_does_not_end_and_ends_at_the_stable_offset) {
  SLUICE_REQUIRE_BROKER();
  auto values = restore_across_an_open_transaction(outcome::never, 2s);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(values[k], "v" + std::to_string(40 + k)) << "key k" << k;
}

}  // namespace
}  // namespace sluice::runtime
