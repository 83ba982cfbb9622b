// At-least-once: a changelog record reaches the producer only after the outputs sent before
// it are delivered, whichever path sends it (the commit's send_changelogs, the early send of a
// buffer past statestore.changelog.buffer.bytes, a store logging every write). Kafka keeps
// order per partition only, so without this a changelog write counting an emission (a queue
// store's pop, the overflow buffer's customer state) could be durable while the emission is
// not, and a crash then would lose the record for good.
//
// A stream task with the thread's real record_collector on a two-broker mock cluster: the
// output partition's leader is down, the changelog partition's leader up. The output cannot be
// delivered (it times out after message.timeout.ms), so a changelog record handed to the
// producer before the output's outcome is known would be delivered; here the collector waits
// for the output, which fails, and the changelog record is never produced: no changelog offset
// is ever delivered (checked after a flush that leaves nothing outstanding).
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kafka/mock_cluster.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/stream_task.hpp"
#include "sluice/builder.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/error.hpp"
#include "sluice/processor.hpp"
#include "sluice/store.hpp"

namespace sluice::runtime {
namespace {

constexpr const char* app_id = "order";
constexpr std::int32_t output_leader = 1;
constexpr std::int32_t changelog_leader = 2;

/// Emits each record, then writes it to store "s": an emission and the write that counts it,
/// as the overflow buffer's drain emits a record and pops it.
class emit_then_write final : public sluice::processor<std::string, std::string, std::string, std::string> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    store_.emplace(ctx.store<std::string, std::string>("s"));
  }
  void process(const sluice::record<std::string, std::string>& r) override {
    context().forward(r);
    store_->put(r.key, r.value);
  }

 private:
  std::optional<sluice::key_value_store<std::string, std::string>> store_;
};

enum class store_logging { last_write_per_commit, every_write };
enum class output_leader_state { down, up };

struct order_fixture {
  order_fixture(store_logging logging, std::int64_t buffer_bytes,
                output_leader_state leader = output_leader_state::down) {
    cluster.create_topic("out", 1);
    cluster.create_topic(changelog, 1);
    rd_kafka_mock_partition_set_leader(cluster.native(), "out", 0, output_leader);
    rd_kafka_mock_partition_set_leader(cluster.native(), changelog.c_str(), 0, changelog_leader);
    if (leader == output_leader_state::down) rd_kafka_mock_broker_set_down(cluster.native(), output_leader);
    streams_builder b;
    b.stream<std::string, std::string>("in")
        .process([] { return std::make_unique<emit_then_write>(); },
                 materialized{.name = "s",
                              .backend = store_backend::memory,
                              .log_every_write = logging == store_logging::every_write})
        .to("out");
    topo = b.build();
    services.topo = &topo;
    services.application_id = app_id;
    services.guarantee = processing_guarantee::at_least_once;
    services.metrics = &metrics;
    services.memory_stores_only = true;
    services.wall_clock_ms = [] { return std::int64_t{0}; };
    services.subtopology_partitions[0] = 1;
    services.output_partitions["out"] = 1;
    services.changelog_buffer_bytes = buffer_bytes;
    collector.emplace(
        kafka::config_map{{"bootstrap.servers", cluster.bootstrap_servers()}, {"message.timeout.ms", "1000"}},
        processing_guarantee::at_least_once, "", error_policy::fail, metrics, "thread=\"0\"");
    task.emplace(task_id{0, 0}, services, *collector, "thread=\"0\"");
    task->start();
  }
  ~order_fixture() {
    task.reset();
    collector.reset();  // before the cluster
  }

  static kafka::message input(std::int64_t offset, std::string value, std::string key = "k") {
    return {.topic = "in",
            .partition = 0,
            .offset = offset,
            .timestamp = 1,
            .key = std::move(key),
            .value = std::move(value)};
  }

  /// The changelog offset delivered since the collector started, once nothing is outstanding.
  std::optional<state::changelog_offset> delivered_changelog() {
    collector->flush();
    return collector->next_changelog_offset(changelog, 0);
  }

  kafka::mock_cluster cluster{2};
  std::string changelog = detail::changelog_topic(app_id, "s");
  topology topo;
  metrics_registry metrics;
  task_services services;
  std::optional<record_collector> collector;
  std::optional<stream_task> task;
};

/// The error the output's failed delivery throws: its message timed out.
void expect_output_timed_out(const std::function<void()>& f) {
  try {
    f();
    ADD_FAILURE() << "a changelog record was handed to the producer while the output before it was undelivered";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.kafka().code, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT) << e.what();
    EXPECT_NE(std::string(e.what()).find("delivery to out[0] failed"), std::string::npos) << e.what();
  }
}

TEST(changelog_order, at_least_once_the_commit_sends_a_key_value_changelog_only_after_the_outputs_are_delivered) {
  order_fixture f(store_logging::last_write_per_commit, 4 << 20);
  f.task->process(order_fixture::input(0, "v"));                         // the output, then the write (buffered)
  expect_output_timed_out([&] { f.task->stores().send_changelogs(); });  // what commit_all calls first
  EXPECT_EQ(f.delivered_changelog(), std::nullopt);
}

TEST(changelog_order, at_least_once_an_early_send_past_the_buffer_bound_waits_for_the_outputs) {
  order_fixture f(store_logging::last_write_per_commit, 1);  // every write passes the bound
  // The write after the output passes the bound: its changelog record is sent from inside the
  // processor, and the failed output stops the task instead (not a processing error of the record).
  expect_output_timed_out([&] { f.task->process(order_fixture::input(0, "v")); });
  EXPECT_EQ(f.delivered_changelog(), std::nullopt);
}

TEST(changelog_order, at_least_once_a_store_logging_every_write_holds_it_until_the_outputs_are_delivered) {
  order_fixture f(store_logging::every_write, 4 << 20);
  // Each write is kept for the commit, in order, rather than sent as it is made.
  f.task->process(order_fixture::input(0, "v0"));
  f.task->process(order_fixture::input(1, "v1"));
  expect_output_timed_out([&] { f.task->stores().send_changelogs(); });
  EXPECT_EQ(f.delivered_changelog(), std::nullopt);
}

TEST(changelog_order, at_least_once_every_write_reaches_the_changelog_at_the_commit_when_the_outputs_are_delivered) {
  order_fixture f(store_logging::every_write, 4 << 20, output_leader_state::up);
  for (int i = 0; i < 3; ++i) f.task->process(order_fixture::input(i, "v" + std::to_string(i)));
  f.task->stores().send_changelogs();
  EXPECT_EQ(f.delivered_changelog(), state::changelog_offset(3));  // one record per write
}

TEST(changelog_order, at_least_once_a_store_applies_its_writes_early_only_after_the_outputs_before_them_are_delivered) {
  // The changelog buffer's bound is far away; the store's own write-through bound (8 MiB of
  // pending writes, store_options::write_through_threshold_bytes) is what the writes pass.
  order_fixture f(store_logging::last_write_per_commit, std::int64_t{1} << 30);
  const std::string value(900'000, 'v');  // under the producer's message.max.bytes
  constexpr int writes = 10;              // 9 MB pending after the last one
  expect_output_timed_out([&] {
    for (int i = 0; i < writes; ++i) f.task->process(order_fixture::input(i, value, "k" + std::to_string(i)));
  });
  EXPECT_EQ(f.delivered_changelog(), std::nullopt);
  // Nothing reached the storage: the task's dirty close drops every write, which a store
  // that had applied them early could not (a restart would find the writes whose outputs
  // were lost).
  auto* s = f.task->stores().find("s");
  ASSERT_NE(s, nullptr);
  auto& kv = dynamic_cast<state::kv_store&>(*s->store);
  kv.abort();
  for (int i = 0; i < writes; ++i) EXPECT_EQ(kv.get("k" + std::to_string(i)), std::nullopt) << "k" << i;
}

}  // namespace
}  // namespace sluice::runtime
