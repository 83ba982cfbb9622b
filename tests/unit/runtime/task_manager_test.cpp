// changelog_reader and task_manager on their own, against librdkafka's in-process mock
// cluster: restoring a store to its changelog's end, a task waiting (input paused) until
// its stores are current while a task with nothing to restore starts at once, and a
// revocation while a task restores; on RocksDB, a store holding values of another layout than
// its topology's (state::value_format) restored from the start, and the timestamps of a
// restore through SST files.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "runtime/changelog_reader.hpp"
#include "runtime/record_collector.hpp"
#include "runtime/stream_task.hpp"
#include "runtime/task_manager.hpp"
#include "sluice/builder.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/error.hpp"
#include "sluice/processor.hpp"
#include "sluice/state/big_endian.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "sluice/state/task_directory.hpp"

namespace sluice::runtime {
namespace {

using namespace std::chrono_literals;

constexpr const char* app_id = "tm";

/// One sub-topology reading "in" into a count store "s" (logged), memory stores only
/// (rocksdb_fixture: RocksDB).
struct fixture {
  kafka::mock_cluster cluster;
  topology topo;
  metrics_registry metrics;
  task_services services;
  std::string changelog = detail::changelog_topic(app_id, "s");

  fixture() {
    streams_builder b;
    b.stream<std::string, std::string>("in").group_by_key().count("s").to_stream().to("out");
    topo = b.build();
    services.topo = &topo;
    services.application_id = app_id;
    services.metrics = &metrics;
    services.memory_stores_only = true;
    services.wall_clock_ms = [] { return std::int64_t{0}; };
    services.subtopology_partitions[0] = 2;
    cluster.create_topic("in", 2);
    cluster.create_topic("out", 2);
    cluster.create_topic(changelog, 2);
  }

  kafka::config_map client() const { return {{"bootstrap.servers", cluster.bootstrap_servers()}}; }
  kafka::config_map restore_consumer() const {
    auto c = client();
    c["isolation.level"] = "read_committed";
    c["enable.partition.eof"] = "true";
    return c;
  }

  /// Writes `n` changelog records to `partition`: keys k0..k9, values v<i>, timestamps 1000 + i.
  void fill_changelog(std::int32_t partition, int n) {
    kafka::producer p(client());
    for (int i = 0; i < n; ++i) {
      auto key = "k" + std::to_string(i % 10), value = "v" + std::to_string(i);
      p.produce(changelog, partition, std::string_view(key), std::string_view(value), 1000 + i, {});
    }
    p.flush(30s);
  }

  changelog_reader reader() {
    return changelog_reader(restore_consumer(), 60s,
                            {&metrics.get_counter("restored"), &metrics.get_gauge("remaining"),
                             &metrics.get_gauge("done"), &metrics.get_gauge("total"), &metrics.get_gauge("rate")});
  }
};

/// The value of `key` in `task`'s key-value store "s": a count's store keeps each value
/// behind the 8-byte timestamp the restore puts in front of the changelog record's value
/// (detail::value_format::timestamped); this is the value without it.
std::optional<std::string> value_in(stream_task& task, const std::string& key) {
  auto* s = task.stores().find("s");
  if (!s) return std::nullopt;
  EXPECT_EQ(s->spec->format, detail::value_format::timestamped);
  auto value = dynamic_cast<state::kv_store&>(*s->store).get(key);
  if (value && value->size() >= 8) value->erase(0, 8);
  return value;
}

/// Sends nowhere; the restore tests process no records.
struct null_sender final : record_sender {
  void send(std::string_view, std::int32_t, const std::optional<std::string_view>&,
            const std::optional<std::string_view>&, std::int64_t, const sluice::headers&) override {}
};

/// Calls `step` until `done()` or `max_steps` calls (each polls for up to 10 ms); the
/// caller asserts done() afterwards.
template <class Step, class Done>
void step_until(Step step, Done done, int max_steps = 3000) {
  for (int i = 0; i < max_steps && !done(); ++i) step();
}

TEST(changelog_reader, restores_a_store_to_the_changelog_end_with_the_last_value_per_key) {
  fixture f;
  f.fill_changelog(0, 100);
  null_sender sender;
  stream_task task(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  auto reader = f.reader();
  ASSERT_TRUE(reader.add(task));
  EXPECT_TRUE(reader.restoring());
  EXPECT_EQ(reader.progress().total, 100);

  std::vector<stream_task*> restored;
  step_until([&] { reader.restore(restored); }, [&] { return !restored.empty(); });
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(restored[0], &task);
  EXPECT_FALSE(reader.restoring());
  auto* store = task.stores().find("s");
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->store->committed_offset(), sluice::state::changelog_offset(100));
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(value_in(task, "k" + std::to_string(k)), "v" + std::to_string(90 + k)) << "key k" << k;
  // The count's store keeps the timestamp of each value's changelog record in front of it.
  auto stored = dynamic_cast<state::kv_store&>(*store->store).get("k3");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(state::read_u64(*stored), 1093u);
  EXPECT_EQ(f.metrics.get_counter("restored").value(), 100u);
}

// Tasks added together: the ends of all their changelog partitions are asked at once, and
// each task is told whether it restores (partition 0 has a changelog, partition 1 none).
TEST(changelog_reader, tasks_added_together_are_told_each_whether_it_restores) {
  fixture f;
  f.fill_changelog(0, 30);
  null_sender sender;
  stream_task behind(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  stream_task current(task_id{0, 1}, f.services, sender, "thread=\"0\"");
  auto reader = f.reader();
  EXPECT_EQ(reader.add(std::vector<stream_task*>{&current, &behind}), (std::vector<bool>{false, true}));
  EXPECT_EQ(reader.progress().total, 30);
  std::vector<stream_task*> restored;
  step_until([&] { reader.restore(restored); }, [&] { return !restored.empty(); });
  ASSERT_EQ(restored, (std::vector<stream_task*>{&behind}));
  EXPECT_EQ(value_in(behind, "k3"), "v23");
  EXPECT_TRUE(reader.add(std::vector<stream_task*>{}).empty());
}

/// The fixture with task 0_0's stores on RocksDB, in a state directory of its own.
struct rocksdb_fixture : fixture {
  std::filesystem::path state_dir =
      std::filesystem::temp_directory_path() / ("sluice-task-manager-" + std::to_string(std::random_device{}()));
  state::rocksdb_environment env{{.memory_budget_bytes = std::size_t{32} << 20}};

  rocksdb_fixture() {
    services.memory_stores_only = false;
    services.state_dir = state_dir;
    services.rocksdb = &env;
  }
  ~rocksdb_fixture() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
  }

  /// Leaves task 0_0's store "s" as an earlier job left it, its values laid out as `format`:
  /// k<k> holds `value(k)` for k < 10, current to changelog offset `offset`.
  void write_store(state::value_format format, const std::function<std::string(int)>& value, std::int64_t offset) {
    state::task_directory dir(state_dir, app_id, "0_0");
    auto s = state::open_rocksdb_store({.name = "s", .directory = dir.path(), .format = format}, env);
    for (int k = 0; k < 10; ++k) s->put("k" + std::to_string(k), value(k));
    s->commit(state::changelog_offset(offset));
  }

  /// Restores `task` to its changelog's end, which must hold `records` records past its store.
  void restore(stream_task& task, std::int64_t records) {
    auto reader = this->reader();
    ASSERT_TRUE(reader.add(task)) << "the store restores from its changelog";
    EXPECT_EQ(reader.progress().total, records);
    std::vector<stream_task*> restored;
    step_until([&] { reader.restore(restored); }, [&] { return !restored.empty(); });
    ASSERT_EQ(restored.size(), 1u);
    EXPECT_EQ(task.stores().find("s")->store->committed_offset(), state::changelog_offset(records));
  }
};

/// Store "s" of f's topology (which keeps timestamps) holds plain values and an offset saying
/// it is current: the task's restore wipes it and restores it from the start of its changelog,
/// each value correct and stamped with its changelog record's timestamp.
void expect_a_plain_store_restored_from_the_start_with_timestamps(rocksdb_fixture& f) {
  f.fill_changelog(0, 100);
  f.write_store(
      state::value_format::plain, [](int k) { return "v" + std::to_string(90 + k); }, 100);
  null_sender sender;
  stream_task task(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  f.restore(task, 100);
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(value_in(task, "k" + std::to_string(k)), "v" + std::to_string(90 + k)) << "key k" << k;
  auto stored = dynamic_cast<state::kv_store&>(*task.stores().find("s")->store).get("k3");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(state::read_u64(*stored), 1093u);
}

// A count's store written before aggregations kept timestamps holds each count alone. Read
// as timestamped, its first 8 bytes would be taken for a timestamp: the store is wiped at
// open and restored from the start of its changelog, its values correct and stamped with
// their changelog records' timestamps. Its offset said it was current.
TEST(changelog_reader, a_store_written_plain_is_restored_from_the_start_when_its_aggregation_keeps_timestamps) {
  rocksdb_fixture f;
  expect_a_plain_store_restored_from_the_start_with_timestamps(f);
}

// A table's store written before tables kept timestamps is wiped and restored the same way,
// each value stamped with its changelog record's timestamp.
TEST(changelog_reader, a_store_written_plain_is_restored_from_the_start_when_its_table_keeps_timestamps) {
  rocksdb_fixture f;
  streams_builder b;
  b.table<std::string, std::string>("in", "s");
  f.topo = b.build();
  expect_a_plain_store_restored_from_the_start_with_timestamps(f);
}

/// A Processor API processor naming the store "s" and writing nothing: its store is plain.
struct store_user final : processor<std::string, std::string> {
  void process(const record<std::string, std::string>&) override {}
};

// The reverse: a store holding timestamped values, now a Processor API store's (plain), is
// wiped and restored too, so its values carry no 8 bytes in front.
TEST(changelog_reader, a_store_written_timestamped_is_restored_from_the_start_when_its_processor_keeps_none) {
  rocksdb_fixture f;
  streams_builder b;
  b.stream<std::string, std::string>("in").process([] { return std::make_unique<store_user>(); },
                                                   materialized{.name = "s"});
  f.topo = b.build();
  f.fill_changelog(0, 100);
  f.write_store(
      state::value_format::timestamped,
      [](int k) {
        std::string v;
        state::append_u64(v, 1090u + static_cast<std::uint64_t>(k));
        return v + "v" + std::to_string(90 + k);
      },
      100);
  null_sender sender;
  stream_task task(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  ASSERT_EQ(task.stores().find("s")->spec->format, state::value_format::plain);
  f.restore(task, 100);
  auto& store = dynamic_cast<state::kv_store&>(*task.stores().find("s")->store);
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(store.get("k" + std::to_string(k)), "v" + std::to_string(90 + k)) << "key k" << k;
}

// A store restored from empty through SST files (runs of 1,000 records or more) gets each
// value with its changelog record's timestamp in front, as a restore through write batches.
TEST(changelog_reader, a_timestamped_store_restored_from_empty_through_sst_files_keeps_the_timestamps) {
  rocksdb_fixture f;
  f.fill_changelog(0, 3000);
  null_sender sender;
  stream_task task(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  f.restore(task, 3000);
  for (int k = 0; k < 10; ++k)
    EXPECT_EQ(value_in(task, "k" + std::to_string(k)), "v" + std::to_string(2990 + k)) << "key k" << k;
  auto& store = dynamic_cast<state::kv_store&>(*task.stores().find("s")->store);
  auto stored = store.get("k3");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(state::read_u64(*stored), 3993u);
  EXPECT_EQ(store.unflushed_entries(), 0u) << "restored through SST files, not the memtable";
}

TEST(changelog_reader, a_task_whose_changelog_is_empty_has_nothing_to_restore) {
  fixture f;
  null_sender sender;
  stream_task task(task_id{0, 1}, f.services, sender, "thread=\"0\"");
  auto reader = f.reader();
  EXPECT_FALSE(reader.add(task));
  EXPECT_FALSE(reader.restoring());
}

TEST(changelog_reader, progress_counts_done_and_total_over_the_store_partitions) {
  fixture f;
  f.fill_changelog(0, 40);
  f.fill_changelog(1, 60);
  null_sender sender;
  stream_task t0(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  stream_task t1(task_id{0, 1}, f.services, sender, "thread=\"0\"");
  auto reader = f.reader();
  ASSERT_TRUE(reader.add(t0));
  ASSERT_TRUE(reader.add(t1));
  auto before = reader.progress();
  EXPECT_EQ(before.total, 100);
  EXPECT_EQ(before.done, 0);
  std::vector<stream_task*> restored;
  step_until([&] { reader.restore(restored); }, [&] { return restored.size() == 2; });
  EXPECT_EQ(restored.size(), 2u);
  auto after = reader.progress();
  EXPECT_EQ(after.total, 100) << "the last restore's figures stay until the next one";
  EXPECT_EQ(after.done, 100);
  EXPECT_EQ(after.records_per_second, 0) << "no restore in progress";
  EXPECT_EQ(f.metrics.get_gauge("done").value(), 100);
  EXPECT_EQ(f.metrics.get_gauge("total").value(), 100);
  EXPECT_EQ(f.metrics.get_gauge("remaining").value(), 0);
}

TEST(changelog_reader, done_and_total_describe_the_current_restore_not_every_restore_since_start) {
  fixture f;
  f.fill_changelog(0, 40);
  null_sender sender;
  auto reader = f.reader();
  std::vector<stream_task*> restored;
  {
    stream_task first(task_id{0, 0}, f.services, sender, "thread=\"0\"");
    ASSERT_TRUE(reader.add(first));
    step_until([&] { reader.restore(restored); }, [&] { return restored.size() == 1; });
    ASSERT_EQ(restored.size(), 1u);
    first.close(close_mode::dirty);
  }
  restored.clear();
  // A second restore, of another partition: its figures start from zero.
  f.fill_changelog(1, 25);
  stream_task second(task_id{0, 1}, f.services, sender, "thread=\"0\"");
  ASSERT_TRUE(reader.add(second));
  EXPECT_EQ(f.metrics.get_gauge("total").value(), 25);
  EXPECT_EQ(f.metrics.get_gauge("done").value(), 0);
  EXPECT_EQ(f.metrics.get_gauge("remaining").value(), 25);
  step_until([&] { reader.restore(restored); }, [&] { return restored.size() == 1; });
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(f.metrics.get_gauge("done").value(), 25);
  EXPECT_EQ(f.metrics.get_gauge("total").value(), 25);
  EXPECT_EQ(f.metrics.get_counter("restored").value(), 65u) << "the counter keeps every record since start";
}

TEST(changelog_reader, a_task_removed_while_restoring_leaves_the_total_of_the_current_restore) {
  fixture f;
  f.fill_changelog(0, 30);
  null_sender sender;
  stream_task task(task_id{0, 0}, f.services, sender, "thread=\"0\"");
  auto reader = f.reader();
  ASSERT_TRUE(reader.add(task));
  EXPECT_EQ(f.metrics.get_gauge("total").value(), 30);
  reader.remove(task);
  EXPECT_FALSE(reader.restoring());
  EXPECT_EQ(reader.progress().total, reader.progress().done) << "nothing of it is left to restore";
  EXPECT_EQ(f.metrics.get_gauge("remaining").value(), 0);
  EXPECT_EQ(f.metrics.get_gauge("rate").value(), 0);
}

struct manager_fixture : fixture {
  kafka::consumer consumer{[this] {
    auto c = client();
    c["group.id"] = app_id;
    c["auto.offset.reset"] = "earliest";
    return c;
  }()};
  record_collector collector{client(),      processing_guarantee::at_least_once, "", error_policy::fail, metrics,
                             "thread=\"0\""};
  changelog_reader changelogs = reader();
  std::map<std::string, int> topic_to_sub{{"in", 0}};
  task_manager tasks{services, topic_to_sub, collector, changelogs, consumer, "thread=\"0\""};

  void assign_both() {
    std::vector<kafka::topic_partition> parts{{"in", 0}, {"in", 1}};
    consumer.assign({{"in", 0, kafka::offset_beginning}, {"in", 1, kafka::offset_beginning}});
    tasks.assign(parts);
    tasks.pause_restoring_inputs();
  }
};

TEST(task_manager, a_task_with_a_changelog_to_restore_waits_while_the_other_starts_at_once) {
  manager_fixture f;
  f.fill_changelog(0, 50);
  f.assign_both();
  ASSERT_EQ(f.tasks.tasks().size(), 2u);
  auto* p0 = f.tasks.find({"in", 0});
  auto* p1 = f.tasks.find({"in", 1});
  ASSERT_TRUE(p0 && p1);
  EXPECT_FALSE(p0->task->running()) << "its store is 50 records behind";
  EXPECT_TRUE(p1->task->running()) << "nothing to restore";
  EXPECT_TRUE(f.tasks.restoring());

  step_until([&] { f.tasks.restore(); }, [&] { return !f.tasks.restoring(); });
  EXPECT_FALSE(f.tasks.restoring());
  EXPECT_TRUE(p0->task->running());
  EXPECT_EQ(value_in(*p0->task, "k7"), "v47");
}

TEST(task_manager, partitions_map_to_their_task_and_input) {
  manager_fixture f;
  f.assign_both();
  auto* p1 = f.tasks.find({"in", 1});
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->task->id(), (task_id{0, 1}));
  EXPECT_EQ(p1->task->name(), "0_1");
  EXPECT_EQ(p1->index, 0u);
  EXPECT_EQ(f.tasks.find({"other", 0}), nullptr);
}

TEST(task_manager, closing_while_a_task_restores_forgets_every_task_and_the_restoration) {
  manager_fixture f;
  f.fill_changelog(0, 50);
  f.assign_both();
  ASSERT_TRUE(f.tasks.restoring());
  f.tasks.close_all(close_mode::clean);
  EXPECT_TRUE(f.tasks.tasks().empty());
  EXPECT_EQ(f.tasks.find({"in", 0}), nullptr);
  EXPECT_FALSE(f.tasks.restoring());
  EXPECT_EQ(f.changelogs.progress().total, 0);

  // Assigned again (as after a rebalance): the task restores from scratch and completes.
  f.assign_both();
  ASSERT_TRUE(f.tasks.restoring());
  step_until([&] { f.tasks.restore(); }, [&] { return !f.tasks.restoring(); });
  ASSERT_FALSE(f.tasks.restoring());
  EXPECT_EQ(f.tasks.find({"in", 0})->task->stores().find("s")->store->committed_offset(),
            sluice::state::changelog_offset(50));
}

/// The same with RocksDB stores under a state directory of its own: assign() opens the new
/// tasks' stores together, on threads of their own.
struct rocksdb_manager_fixture : manager_fixture {
  std::filesystem::path state_dir =
      std::filesystem::temp_directory_path() / ("sluice-tm-" + std::to_string(std::random_device{}()));
  state::rocksdb_environment env{{.memory_budget_bytes = std::size_t{64} << 20}};

  rocksdb_manager_fixture() {
    services.memory_stores_only = false;
    services.rocksdb = &env;
    services.state_dir = state_dir;
  }
  ~rocksdb_manager_fixture() {
    tasks.close_all(close_mode::dirty);
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
  }
};

TEST(task_manager, new_tasks_open_their_rocksdb_stores_together_and_restore_them) {
  rocksdb_manager_fixture f;
  f.fill_changelog(0, 50);
  f.assign_both();
  ASSERT_EQ(f.tasks.tasks().size(), 2u);
  auto* p0 = f.tasks.find({"in", 0});
  auto* p1 = f.tasks.find({"in", 1});
  ASSERT_TRUE(p0 && p1);
  EXPECT_TRUE(std::filesystem::is_directory(f.state_dir / app_id / "0_0" / "s"));
  EXPECT_TRUE(std::filesystem::is_directory(f.state_dir / app_id / "0_1" / "s"));
  EXPECT_TRUE(p1->task->running()) << "nothing to restore";
  step_until([&] { f.tasks.restore(); }, [&] { return !f.tasks.restoring(); });
  ASSERT_FALSE(f.tasks.restoring());
  EXPECT_TRUE(p0->task->running());
  EXPECT_EQ(value_in(*p0->task, "k7"), "v47");
  EXPECT_EQ(p0->task->stores().find("s")->store->committed_offset(), sluice::state::changelog_offset(50));
}

// A store that cannot open fails the assignment with its own error, and the tasks before it
// in the assignment exist, as when each task opened its stores in turn.
TEST(task_manager, a_store_that_cannot_open_fails_the_assignment_as_when_tasks_opened_one_by_one) {
  rocksdb_manager_fixture f;
  state::task_directory held(f.state_dir, app_id, "0_1");  // as another instance would hold it
  try {
    f.assign_both();
    FAIL() << "the assignment of a locked task directory succeeded";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), errc::state);
    EXPECT_NE(std::string(e.what()).find("'" + held.path().string() + "' is locked by another sluice instance"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(f.tasks.tasks().size(), 1u);
  EXPECT_NE(f.tasks.find({"in", 0}), nullptr);
  EXPECT_EQ(f.tasks.find({"in", 1}), nullptr);
}

}  // namespace
}  // namespace sluice::runtime
