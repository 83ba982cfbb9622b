// A job on the embedded cluster, as a new team first runs one: bootstrap.servers must be
// asked for, and every topic the topology reads is created there (sources, global tables).
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kafka/admin.hpp"
#include "kafka/mock_cluster.hpp"
#include "kafka/producer.hpp"
#include "error_of.hpp"
#include "eventually.hpp"
#include "http_client.hpp"
#include "own_key_processors.hpp"
#include "scratch_dir.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

struct names {
  std::string orders = unique("orders"), customers = unique("customers"), enriched = unique("enriched");
};

sluice::topology enrich_orders(const names& t) {
  sluice::streams_builder b;
  auto customers = b.global_table<std::string, std::string>(t.customers);
  b.stream<std::string, std::string>(t.orders)
      .left_join(
          customers, [](const std::string& order, const std::string&) { return order; },
          [](const std::string& customer, const std::optional<std::string>& name) {
            return customer + ":" + name.value_or("unknown");
          })
      .to(t.enriched);
  return b.build();
}

sluice::config job_config(const std::string& app_id) {
  sluice::config c;
  c.set("application.id", app_id);
  c.set("state.dir", sluice::test::scratch_path("embedded-app-state").string());
  c.set("commit.interval.ms", "100");
  return c;
}

/// A job of `app_id` on the embedded cluster with a fresh state.dir each call: a second call
/// is the same job restarted on an empty disk, its state only in its changelogs.
sluice::config restartable_embedded_config(const std::string& app_id) {
  auto c = job_config(app_id);
  c.set("bootstrap.servers", "embedded");
  // The mock cluster waits out the first member's session before the second one's join
  // completes; keep that short.
  c.set("consumer.session.timeout.ms", "6000");
  c.set("consumer.heartbeat.interval.ms", "500");
  return c;
}

/// A job of a new application id on `cluster`, whose only broker this takes down, waiting up
/// to `task_timeout_ms` for it.
sluice::config config_of_brokers_down(sluice::kafka::mock_cluster& cluster, const std::string& app_id,
                                      const std::string& task_timeout_ms) {
  rd_kafka_mock_broker_set_down(cluster.native(), 1);
  auto c = job_config(unique(app_id));
  c.set("bootstrap.servers", cluster.bootstrap_servers());
  c.set("task.timeout.ms", task_timeout_ms);
  return c;
}

/// Clicks counted per key in `windows` ("clicks-per-minute"): every update to `updates`, the
/// final count of each window (suppressed until it closes) to `finals`.
sluice::topology windowed_clicks(const std::string& in, const std::string& updates, const std::string& finals,
                                 sluice::time_windows windows) {
  sluice::streams_builder b;
  auto counts = b.stream<std::string, std::string>(in).group_by_key().windowed_by(windows).count("clicks-per-minute");
  counts.to_stream().to(updates);
  counts.suppress(sluice::until_window_closes()).to_stream().to(finals);
  return b.build();
}

/// Forwards its input; asks for a commit from a wall-clock punctuation whenever `ask` is set
/// (once per setting), so a test chooses the moment of a commit under a long commit interval.
class commit_on_request : public sluice::processor<std::string, std::string, std::string, std::string> {
 public:
  explicit commit_on_request(std::atomic<bool>& ask) : ask_(ask) {}
  void init(context_type& ctx) override {
    processor::init(ctx);
    schedule_ = ctx.schedule(20ms, sluice::punctuation_type::wall_clock, [this](std::int64_t) {
      if (ask_.exchange(false)) context().commit();
    });
  }
  void process(const sluice::record<std::string, std::string>& r) override { context().forward(r); }

 private:
  std::atomic<bool>& ask_;
  sluice::cancellable schedule_;
};

}  // namespace

TEST(embedded_app, a_job_without_bootstrap_servers_stops_naming_the_key) {
  names t;
  auto cfg = job_config(unique("no-bootstrap"));
  try {
    sluice::app app(enrich_orders(t), cfg);
    app.start();
    FAIL() << "the app started without bootstrap.servers";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_config);
    EXPECT_NE(std::string(e.what()).find("'bootstrap.servers' is not set"), std::string::npos) << e.what();
  }
}

// A job started before its brokers (a compose file, both restarted at once) waits for them
// for task.timeout.ms, as its threads ride out an outage, then stops naming the address and
// the setting. (It waited 30 s, then stopped with the metadata request's error.)
TEST(embedded_app, a_job_whose_brokers_do_not_answer_waits_task_timeout_ms_then_stops_naming_them) {
  names t;
  sluice::kafka::mock_cluster cluster;
  auto cfg = config_of_brokers_down(cluster, "no-broker", "1500");
  sluice::app app(enrich_orders(t), cfg);
  const std::string message = sluice::test::error_of([&] { app.start(); }, sluice::errc::timeout);
  EXPECT_NE(message.find("no broker at bootstrap.servers=" + cluster.bootstrap_servers() + " answered"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(task.timeout.ms=1500): check the address and that the brokers are up"), std::string::npos)
      << message;
}

// An embedding program's close() stops a start() that waits for its brokers, as run()'s
// SIGTERM does. (start() waited out task.timeout.ms, and close() returned at once while it did.)
TEST(embedded_app, close_stops_a_start_that_waits_for_the_brokers) {
  names t;
  sluice::kafka::mock_cluster cluster;
  auto cfg = config_of_brokers_down(cluster, "closed-while-waiting", "120000");
  const auto port = sluice::test::free_port();
  cfg.set("application.server", "127.0.0.1:" + std::to_string(port));
  sluice::app app(enrich_orders(t), cfg);
  std::string message;
  std::thread starting([&] { message = sluice::test::error_of([&] { app.start(); }, sluice::errc::state); });
  // The server answers from just before the wait begins.
  EXPECT_TRUE(sluice::test::eventually([&] { return sluice::test::http_status_or_zero(port, "/health") == 200; }, 30s));
  app.close();
  starting.join();
  EXPECT_NE(message.find("the app was closed while it was starting"), std::string::npos) << message;
  EXPECT_EQ(app.state(), sluice::app_state::not_running);
  const auto again = sluice::test::error_of([&] { app.start(); }, sluice::errc::state);
  EXPECT_NE(again.find("the app was closed"), std::string::npos) << again;
}

// A dead-lettered record written to a topic the job reads would come back, fail again and
// be dead-lettered again, without end: refused before anything connects.
TEST(embedded_app, a_dead_letter_topic_the_job_reads_is_refused_naming_the_setting) {
  names t;
  auto cfg = job_config(unique("dlq-loop"));
  cfg.set("bootstrap.servers", "embedded");
  cfg.set("processing.error.handler", "dead_letter");
  cfg.set("dead.letter.topic", t.orders);
  const std::string message =
      sluice::test::error_of([&] { sluice::app app(enrich_orders(t), cfg); }, sluice::errc::invalid_config);
  EXPECT_NE(message.find("dead.letter.topic '" + t.orders + "' is also read by node"), std::string::npos) << message;
  // A global table's topic: the table would take the failed records as entries.
  cfg.set("dead.letter.topic", t.customers);
  const std::string global =
      sluice::test::error_of([&] { sluice::app app(enrich_orders(t), cfg); }, sluice::errc::invalid_config);
  EXPECT_NE(global.find("is also the topic of global table"), std::string::npos) << global;
  // The same topic without a dead_letter handler is only a setting nobody uses.
  cfg.set("processing.error.handler", "log_and_continue");
  EXPECT_NO_THROW(sluice::app(enrich_orders(t), cfg));
}

TEST(embedded_app, creates_the_topics_of_sources_and_global_tables) {
  names t;
  auto cfg = job_config(unique("embedded-join"));
  cfg.set("bootstrap.servers", "embedded");
  sluice::topic_admin admin(cfg);
  ASSERT_FALSE(admin.partition_count(t.customers));
  ASSERT_FALSE(admin.partition_count(t.orders));

  sluice::app app(enrich_orders(t), cfg);
  app.start();
  EXPECT_EQ(admin.partition_count(t.customers), 4);
  EXPECT_EQ(admin.partition_count(t.orders), 4);

  sluice::topic_writer writer(cfg);
  writer.send<std::string, std::string>(t.orders, "o1", "c1");
  writer.flush();
  sluice::topic_reader reader(cfg, {t.enriched});
  auto out = reader.read_at_least(1, 30s);
  app.close();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].value, "c1:unknown");
  EXPECT_EQ(app.state(), sluice::app_state::not_running);
}

// A checker that counts millions of records reads them lent, not copied: the same records as
// poll() gives, headers aside.
TEST(embedded_app, a_topic_reader_lends_the_records_poll_would_copy) {
  auto cfg = job_config(unique("embedded-views"));
  cfg.set("bootstrap.servers", "embedded");
  const auto topic = unique("views");
  sluice::topic_admin(cfg).create_topic(topic, 2);
  sluice::topic_writer writer(cfg);
  sluice::headers h;
  h.add("h", "v");
  writer.send_raw(topic, "k1", "v1", 1000, h, 0);
  writer.send_raw(topic, std::nullopt, "v2", 2000, {}, 1);
  writer.send_raw(topic, "k3", std::string_view(), 3000, h, 1);
  writer.send_raw(topic, "k4", std::nullopt, 4000, {}, 0);
  writer.flush();

  auto copied = sluice::topic_reader(cfg, {topic}).read_at_least(4, 30s);
  ASSERT_EQ(copied.size(), 4u);
  sluice::topic_reader reader(cfg, {topic});
  std::vector<sluice::raw_message> lent;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::size_t counted = 0;
  while (lent.size() < 4 && std::chrono::steady_clock::now() < deadline) {
    counted += reader.poll_views(100ms, [&](const sluice::raw_view& v) {
      lent.push_back({std::string(v.topic),
                      v.partition,
                      v.offset,
                      v.timestamp,
                      v.key ? std::optional<std::string>(*v.key) : std::nullopt,
                      v.value ? std::optional<std::string>(*v.value) : std::nullopt,
                      {}});
    });
  }
  EXPECT_EQ(counted, lent.size());
  auto order = [](const sluice::raw_message& a, const sluice::raw_message& b) {
    return std::tie(a.partition, a.offset) < std::tie(b.partition, b.offset);
  };
  std::sort(copied.begin(), copied.end(), order);
  std::sort(lent.begin(), lent.end(), order);
  ASSERT_EQ(lent.size(), copied.size());
  for (std::size_t i = 0; i < lent.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(lent[i].topic, copied[i].topic);
    EXPECT_EQ(lent[i].partition, copied[i].partition);
    EXPECT_EQ(lent[i].offset, copied[i].offset);
    EXPECT_EQ(lent[i].timestamp, copied[i].timestamp);
    EXPECT_EQ(lent[i].key, copied[i].key);
    EXPECT_EQ(lent[i].value, copied[i].value);
  }
  EXPECT_EQ(copied[0].key, "k1");            // partition 0, offset 0
  EXPECT_EQ(copied[1].value, std::nullopt);  // a null value stays null
  EXPECT_EQ(copied[2].key, std::nullopt);    // partition 1: a null key stays null
  EXPECT_EQ(copied[3].value, "");            // an empty value stays empty
}

// An operator reads a job's memory from its metrics: the stores' RocksDB (budget, block
// cache, memtables) and the allocator's memory in use and kept free.
// librdkafka's mock cluster cannot describe consumer groups, which is how an instance learns
// who owns which partition (GET /metadata, forwarded queries). Its consumers report their
// assignments to it instead: on the embedded cluster the one instance names itself the owner
// of every partition of its store, as it would on Kafka.
TEST(embedded_app, metadata_names_this_instance_the_owner_of_every_partition) {
  const std::string words = unique("words");
  const std::string app_id = unique("embedded-metadata");
  auto cfg = restartable_embedded_config(app_id);
  const auto port = sluice::test::free_port();
  const std::string self = "127.0.0.1:" + std::to_string(port);
  cfg.set("application.server", self);
  sluice::topic_admin(cfg).create_topic(words, 3);
  sluice::streams_builder b;
  b.stream<std::string, std::string>(words).group_by_key().count("word-counts");
  sluice::app app(b.build(), cfg);
  app.start();
  ASSERT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::running; }, 30s))
      << sluice::to_string(app.state());

  const auto all = sluice::test::http_get(port, "/metadata");
  ASSERT_EQ(all.status, 200) << all.body;
  const auto j = nlohmann::json::parse(all.body);
  EXPECT_EQ(j["group_state"], "Stable");
  ASSERT_EQ(j["instances"].size(), 1u) << all.body;
  const auto& me = j["instances"][0];
  EXPECT_EQ(me["application_server"], self);
  EXPECT_EQ(me["partitions"].size(), 3u) << all.body;
  EXPECT_EQ(me["stores"]["word-counts"], nlohmann::json::array({0, 1, 2})) << all.body;

  const auto key = sluice::test::http_get(port, "/metadata/stores/word-counts/keys/kafka");
  ASSERT_EQ(key.status, 200) << key.body;
  EXPECT_EQ(nlohmann::json::parse(key.body)["instance"], self) << key.body;
  app.close();
}

TEST(embedded_app, a_key_of_a_processor_store_is_found_in_whichever_partition_holds_it) {
  // A Processor API store carries no types: its keys need not be the partitioning key, so
  // /stores/{store}/keys/{key} looks in every partition, not only the one murmur2 of the
  // key's bytes picks (which answered 404 for keys that exist).
  const std::string in = unique("visits"), app_id = unique("own-keys");
  auto cfg = restartable_embedded_config(app_id);
  const auto port = sluice::test::free_port();
  cfg.set("application.server", "127.0.0.1:" + std::to_string(port));
  constexpr int partitions = 4;
  sluice::topic_admin(cfg).create_topic(in, partitions);
  sluice::app app(sluice::test::keeping_under_own_keys(in), cfg);
  app.start();
  sluice::topic_writer writer(cfg);
  constexpr int keys = 40;
  for (int i = 0; i < keys; ++i)
    writer.send<std::string, std::string>(in, "u" + std::to_string(i), "v" + std::to_string(i));
  writer.flush();
  int elsewhere = 0;  // keys whose partition is not the one their store key's bytes pick
  for (int i = 0; i < keys; ++i) {
    const std::string user = "u" + std::to_string(i), key = "seen:" + user;
    const auto partition = sluice::kafka::murmur2_partition(user, partitions);
    elsewhere += partition != sluice::kafka::murmur2_partition(key, partitions) ? 1 : 0;
    sluice::test::http_reply r;
    ASSERT_TRUE(sluice::test::eventually(
        [&] { return (r = sluice::test::http_get(port, "/stores/seen/keys/" + key)).status == 200; }, 30s))
        << key << ": " << r.status << " " << r.body;
    const auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["value"], "v" + std::to_string(i)) << key;
    EXPECT_EQ(j["partition"], partition) << key << ": the partition holding it";
  }
  EXPECT_GT(elsewhere, 0) << "every key happened to be in the partition of its bytes: the test proves nothing";
  const auto missing = sluice::test::http_get(port, "/stores/seen/keys/seen:nobody");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_NE(missing.body.find("any partition"), std::string::npos) << missing.body;
  app.close();
}

namespace {

// A topology with a store of each window kind over `in` (string keys and values): a windowed
// count ("clicks-per-minute", an hour's grace, so the windows of the first minute are still
// kept at 65 s), a session count ("sessions"), a processor's window store ("seen-windows",
// keyed "seen:<key>"), and a key-value count ("click-totals").
sluice::topology window_store_kinds(const std::string& in) {
  sluice::streams_builder b;
  auto clicks = b.stream<std::string, std::string>(in);
  clicks.group_by_key().windowed_by(sluice::time_windows::of_size_and_grace(1min, 1h)).count("clicks-per-minute");
  clicks.group_by_key().windowed_by(sluice::session_windows::of_inactivity_gap_and_grace(10s, 1h)).count("sessions");
  clicks.group_by_key().count("click-totals");
  clicks.process([] { return std::make_unique<sluice::test::windows_under_its_own_key>(); },
                 sluice::window_store_materialized("seen-windows", {.retention = 24h}));
  return b.build();
}

// GET `path` answers `status` with a body naming `naming`.
void expect_http_refusal(std::uint16_t port, const std::string& path, int status, const std::string& naming) {
  const auto refusal = sluice::test::http_get(port, path);
  EXPECT_EQ(refusal.status, status) << path << ": " << refusal.body;
  EXPECT_NE(refusal.body.find(naming), std::string::npos) << path << ": " << refusal.body;
}

}  // namespace

TEST(embedded_app, the_windows_of_a_key_are_read_over_http_from_each_kind_of_window_store) {
  const std::string in = unique("clicks"), app_id = unique("window-queries");
  auto cfg = restartable_embedded_config(app_id);
  const auto port = sluice::test::free_port();
  cfg.set("application.server", "127.0.0.1:" + std::to_string(port));
  sluice::topic_admin(cfg).create_topic(in, 2);
  sluice::app app(window_store_kinds(in), cfg);
  app.start();
  sluice::topic_writer writer(cfg);
  // "a": two clicks in [0, 60 s) and one in [60 s, 120 s); sessions [1 s, 5 s] and [65 s, 65 s].
  for (auto [key, ts] : std::vector<std::pair<std::string, std::int64_t>>{{"a", 1'000}, {"a", 5'000}, {"a", 65'000}})
    writer.send<std::string, std::string>(in, key, "v" + std::to_string(ts), ts);
  writer.flush();
  const auto get = [&](const std::string& path) { return sluice::test::http_get(port, path); };
  const auto windows_of = [](const sluice::test::http_reply& r) { return nlohmann::json::parse(r.body)["windows"]; };
  sluice::test::http_reply r;
  ASSERT_TRUE(sluice::test::eventually(
      [&] {
        r = get("/stores/clicks-per-minute/keys/a/windows");
        return r.status == 200 && windows_of(r).size() == 2;
      },
      30s))
      << r.status << " " << r.body;
  const auto a_partition = sluice::kafka::murmur2_partition("a", 2);
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["key"], "a");
  EXPECT_EQ(j["partition"], a_partition);
  EXPECT_EQ(j["windows"], nlohmann::json::parse(R"([{"start": 0, "end": 60000, "value": 2},
                                                      {"start": 60000, "end": 120000, "value": 1}])"))
      << r.body;
  // from and to bound the windows' starts, both inclusive, as Kafka Streams' fetch(key, from, to).
  r = get("/stores/clicks-per-minute/keys/a/windows?from=60000");
  EXPECT_EQ(windows_of(r), nlohmann::json::parse(R"([{"start": 60000, "end": 120000, "value": 1}])")) << r.body;
  r = get("/stores/clicks-per-minute/keys/a/windows?from=0&to=59999");
  EXPECT_EQ(windows_of(r), nlohmann::json::parse(R"([{"start": 0, "end": 60000, "value": 2}])")) << r.body;
  r = get("/stores/clicks-per-minute/keys/nobody/windows");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(windows_of(r).empty()) << r.body;

  // Sessions: those ending at or after from and starting at or before to (findSessions).
  r = get("/stores/sessions/keys/a/windows");
  EXPECT_EQ(windows_of(r), nlohmann::json::parse(R"([{"start": 1000, "end": 5000, "value": 2},
                                                      {"start": 65000, "end": 65000, "value": 1}])"))
      << r.body;
  r = get("/stores/sessions/keys/a/windows?from=5000&to=64999");
  EXPECT_EQ(windows_of(r), nlohmann::json::parse(R"([{"start": 1000, "end": 5000, "value": 2}])")) << r.body;
  r = get("/stores/sessions/keys/a/windows?from=5001&to=64999");
  EXPECT_TRUE(windows_of(r).empty()) << r.body;

  // A Processor API window store: untyped (values as strings, ends unknown), and keyed as its
  // processor likes, so every partition is looked in.
  r = get("/stores/seen-windows/keys/seen:a/windows");
  ASSERT_EQ(r.status, 200) << r.body;
  j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["partition"], a_partition) << r.body;
  EXPECT_EQ(j["windows"], nlohmann::json::parse(R"([{"start": 0, "end": null, "value": "v5000"},
                                                      {"start": 60000, "end": null, "value": "v65000"}])"))
      << r.body;
  r = get("/stores/seen-windows/keys/seen:nobody/windows");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["partition"], nullptr) << r.body;
  EXPECT_TRUE(windows_of(r).empty()) << r.body;

  // Which instance holds a key's windows: /metadata answers for window stores as for the others.
  for (const std::string store : {"clicks-per-minute", "sessions", "seen-windows"}) {
    r = get("/metadata/stores/" + store + "/keys/a");
    ASSERT_EQ(r.status, 200) << store << ": " << r.body;
    j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["partition"], a_partition) << r.body;
    EXPECT_EQ(j["instance"], "127.0.0.1:" + std::to_string(port)) << r.body;
  }

  // Refusals name the way.
  const auto expect_refused = [&](const std::string& path, int status, const std::string& naming) {
    expect_http_refusal(port, path, status, naming);
  };
  expect_refused("/stores/clicks-per-minute/keys/a", 400, "/stores/clicks-per-minute/keys/{key}/windows");
  expect_refused("/stores/click-totals/keys/a/windows", 400, "/stores/click-totals/keys/{key}");
  expect_refused("/stores/no-such-store/keys/a/windows", 404, "no window store 'no-such-store'");
  expect_refused("/stores/clicks-per-minute/keys/a/windows?from=yesterday", 400, "from 'yesterday' is not a time");
  expect_refused("/stores/clicks-per-minute/keys/a/windows?from=2&to=1", 400, "from 2 is after to 1");
  app.close();
}

TEST(embedded_app, the_windows_of_every_key_are_read_over_http_in_key_order_page_by_page) {
  const std::string in = unique("clicks"), app_id = unique("all-windows");
  auto cfg = restartable_embedded_config(app_id);
  const auto port = sluice::test::free_port();
  cfg.set("application.server", "127.0.0.1:" + std::to_string(port));
  sluice::topic_admin(cfg).create_topic(in, 2);
  sluice::app app(window_store_kinds(in), cfg);
  app.start();
  sluice::topic_writer writer(cfg);
  const std::vector<std::pair<std::string, std::int64_t>> sent{{"a", 1'000},  {"a", 5'000},  {"a", 65'000},
                                                               {"b", 2'000},  {"c", 70'000}, {"d", 3'000},
                                                               {"d", 61'000}, {"d", 125'000}};
  for (const auto& [key, ts] : sent) writer.send<std::string, std::string>(in, key, "v" + std::to_string(ts), ts);
  writer.flush();
  const auto get = [&](const std::string& path) { return sluice::test::http_get(port, path); };
  const auto in_partition = [](const std::string& key) { return sluice::kafka::murmur2_partition(key, 2); };
  // A window as the answer shows it.
  const auto window = [&](const std::string& key, std::int64_t start, nlohmann::json end, nlohmann::json value,
                          const std::string& partitioned_by) {
    return nlohmann::json{
        {"key", key}, {"start", start}, {"end", end}, {"value", value}, {"partition", in_partition(partitioned_by)}};
  };
  // Every key's windows, in key order then start, across both partitions (Kafka Streams' fetchAll).
  const nlohmann::json every_window = {window("a", 0, 60000, 2, "a"),      window("a", 60000, 120000, 1, "a"),
                                       window("b", 0, 60000, 1, "b"),      window("c", 60000, 120000, 1, "c"),
                                       window("d", 0, 60000, 1, "d"),      window("d", 60000, 120000, 1, "d"),
                                       window("d", 120000, 180000, 1, "d")};
  sluice::test::http_reply r;
  ASSERT_TRUE(sluice::test::eventually(
      [&] {
        r = get("/stores/clicks-per-minute/windows");
        return r.status == 200 && nlohmann::json::parse(r.body)["windows"] == every_window;
      },
      30s))
      << r.status << " " << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["store"], "clicks-per-minute");
  EXPECT_EQ(j["more"], false);
  EXPECT_EQ(j["partitions_not_local"], nlohmann::json::array());
  // from and to bound the starts; key_from and key_to the keys (all inclusive: fetch(keyFrom, keyTo, from, to)).
  r = get("/stores/clicks-per-minute/windows?from=60000&to=60000");
  EXPECT_EQ(nlohmann::json::parse(r.body)["windows"],
            nlohmann::json({every_window[1], every_window[3], every_window[5]}))
      << r.body;
  r = get("/stores/clicks-per-minute/windows?key_from=b&key_to=c");
  EXPECT_EQ(nlohmann::json::parse(r.body)["windows"], nlohmann::json({every_window[2], every_window[3]})) << r.body;
  r = get("/stores/clicks-per-minute/windows?key_from=c");
  EXPECT_EQ(nlohmann::json::parse(r.body)["windows"].size(), 4u) << r.body;

  // Pages of 2: each says whether more follow, and the next starts after the last window of
  // the one before (key_from= its key, after_start= its start), also inside one key's windows.
  nlohmann::json paged = nlohmann::json::array();
  std::string next = "/stores/clicks-per-minute/windows?limit=2";
  for (int page = 0; page < 10; ++page) {
    r = get(next);
    ASSERT_EQ(r.status, 200) << next << ": " << r.body;
    j = nlohmann::json::parse(r.body);
    for (const auto& w : j["windows"]) paged.push_back(w);
    if (!j["more"].get<bool>()) break;
    ASSERT_EQ(j["windows"].size(), 2u) << r.body;
    const auto& last = j["windows"].back();
    next = "/stores/clicks-per-minute/windows?limit=2&key_from=" + last["key"].get<std::string>() +
           "&after_start=" + std::to_string(last["start"].get<std::int64_t>());
  }
  EXPECT_EQ(paged, every_window) << "pages of 2 give every window once, in order";

  // Sessions: those ending at or after from and starting at or before to (findSessions).
  r = get("/stores/sessions/windows?from=5000&to=64999");
  EXPECT_EQ(nlohmann::json::parse(r.body)["windows"],
            nlohmann::json({window("a", 1000, 5000, 2, "a"), window("d", 61000, 61000, 1, "d")}))
      << r.body;
  // A Processor API window store: keys and values as strings, ends unknown; the partition is
  // the one that holds the window (the processor's key is the record's, not "seen:...").
  r = get("/stores/seen-windows/windows?key_from=seen:c");
  EXPECT_EQ(nlohmann::json::parse(r.body)["windows"],
            nlohmann::json({window("seen:c", 60000, nullptr, "v70000", "c"), window("seen:d", 0, nullptr, "v3000", "d"),
                            window("seen:d", 60000, nullptr, "v61000", "d"),
                            window("seen:d", 120000, nullptr, "v125000", "d")}))
      << r.body;

  const auto expect_refused = [&](const std::string& path, int status, const std::string& naming) {
    expect_http_refusal(port, path, status, naming);
  };
  expect_refused("/stores/clicks-per-minute/windows?after_start=0", 400, "give both");
  expect_refused("/stores/clicks-per-minute/windows?limit=5000", 400, "after_start=");
  expect_refused("/stores/clicks-per-minute/windows?from=2&to=1", 400, "from 2 is after to 1");
  expect_refused("/stores/click-totals/windows", 400, "/stores/click-totals/keys/{key}");
  expect_refused("/stores/no-such-store/windows", 404, "no window store 'no-such-store'");
  app.close();
}

TEST(embedded_app, its_metrics_show_the_entries_and_bytes_of_each_store_of_each_task_and_the_lag_without_a_commit) {
  // 60 distinct keys, each written once, over 2 partitions: the estimates are exact then.
  const std::string in = unique("visits"), app_id = unique("store-sizes");
  auto cfg = restartable_embedded_config(app_id);
  // No commit during the test: the gauges are set every second, not at commits (at-least-once
  // commits every 30 s by default; a fresh instance showed no size or lag until then).
  cfg.set("commit.interval.ms", "3600000");
  sluice::topic_admin(cfg).create_topic(in, 2);
  sluice::app app(sluice::test::keeping_under_own_keys(in), cfg);
  app.start();
  sluice::topic_writer writer(cfg);
  for (int i = 0; i < 60; ++i) writer.send<std::string, std::string>(in, "u" + std::to_string(i), "v");
  writer.flush();
  auto gauge = [&](const std::string& text, const std::string& name, int partition) {
    const std::string series = name + "{task=\"0_" + std::to_string(partition) + "\",store=\"seen\"} ";
    const auto at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  std::string text;
  EXPECT_TRUE(sluice::test::eventually([&] {
    text = app.metrics().prometheus_text();
    return gauge(text, "sluice_state_store_entries", 0) + gauge(text, "sluice_state_store_entries", 1) == 60.0;
  })) << text;
  for (int p : {0, 1}) {
    EXPECT_GT(gauge(text, "sluice_state_store_entries", p), 0.0) << "partition " << p << "\n" << text;
    EXPECT_GT(gauge(text, "sluice_state_store_bytes", p), 0.0) << "partition " << p << "\n" << text;
    const std::string lag =
        "sluice_consumer_lag_records{topic=\"" + in + "\",partition=\"" + std::to_string(p) + "\"} ";
    EXPECT_TRUE(sluice::test::eventually([&] {
      text = app.metrics().prometheus_text();
      const auto at = text.find(lag);
      return at != std::string::npos && std::stod(text.substr(at + lag.size())) == 0.0;
    })) << lag
        << "\n"
        << text;
  }
  app.close();
}

// An at-least-once job whose input is idle has nothing to commit while its brokers are
// away, so no call of it fails: it stayed `running` (/ready 200) through an outage. Now the
// consumer's report that every broker is down makes it `degraded` until a broker answers
// again, and it goes on from where it stood.
TEST(embedded_app, an_idle_at_least_once_job_is_degraded_while_its_brokers_are_down_and_goes_on_after) {
  sluice::kafka::mock_cluster cluster;
  const std::string in = unique("idle-visits");
  auto cfg = job_config(unique("idle-outage"));
  cfg.set("bootstrap.servers", cluster.bootstrap_servers());
  cfg.set("processing.guarantee", "at_least_once");
  cfg.set("commit.interval.ms", "3600000");  // no commit: nothing but the outage's report can mark it
  const auto port = sluice::test::free_port();
  cfg.set("application.server", "127.0.0.1:" + std::to_string(port));
  cluster.create_topic(in, 1);
  sluice::app app(sluice::test::keeping_under_own_keys(in), cfg);
  app.start();
  sluice::topic_writer writer(cfg);
  auto entries = [&] {
    const auto text = app.metrics().prometheus_text();
    const std::string series = "sluice_state_store_entries{task=\"0_0\",store=\"seen\"} ";
    const auto at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  auto send = [&](int from, int to) {
    for (int i = from; i < to; ++i) writer.send<std::string, std::string>(in, "u" + std::to_string(i), "v");
    writer.flush();
  };
  send(0, 10);
  ASSERT_TRUE(sluice::test::eventually([&] { return entries() == 10.0; }, 30s)) << app.metrics().prometheus_text();
  ASSERT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::running; }))
      << sluice::to_string(app.state());

  rd_kafka_mock_broker_set_down(cluster.native(), 1);
  EXPECT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::degraded; }, 30s))
      << sluice::to_string(app.state());
  // Why, for the operator: in the app and in /ready's and /health's answers.
  const std::string why = "stream thread 0: no broker at bootstrap.servers answers";
  EXPECT_EQ(app.degraded_reason(), why);
  const auto ready = sluice::test::http_get(port, "/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_NE(ready.body.find("\"state\": \"degraded\""), std::string::npos) << ready.body;
  EXPECT_NE(ready.body.find("\"reason\": \"" + why + "\""), std::string::npos) << ready.body;
  const auto health = sluice::test::http_get(port, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_NE(health.body.find("\"reason\": \"" + why + "\""), std::string::npos) << health.body;
  rd_kafka_mock_broker_set_up(cluster.native(), 1);
  EXPECT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::running; }, 30s))
      << sluice::to_string(app.state());
  EXPECT_EQ(app.degraded_reason(), "");
  EXPECT_EQ(sluice::test::http_get(port, "/ready").body.find("reason"), std::string::npos);

  send(10, 20);
  EXPECT_TRUE(sluice::test::eventually([&] { return entries() == 20.0; }, 30s)) << app.metrics().prometheus_text();
  EXPECT_EQ(app.state(), sluice::app_state::running) << app.error_message();
  app.close();
}

// A failed commit makes the thread `degraded` until its next successful commit. At least once,
// that came a commit interval (30 s by default) after the recovery, so /ready answered 503 that
// long after the cluster was back. The first commit now comes right after the recovery.
TEST(embedded_app, an_at_least_once_job_is_running_again_right_after_a_recovery_not_a_commit_interval_later) {
  sluice::kafka::mock_cluster cluster;
  const std::string in = unique("recovered-in"), out = unique("recovered-out");
  auto cfg = job_config(unique("alos-recovery"));
  cfg.set("bootstrap.servers", cluster.bootstrap_servers());
  cfg.set("processing.guarantee", "at_least_once");
  cfg.set("commit.interval.ms", "3600000");  // the commits are the ones the test asks for
  cluster.create_topic(in, 1);
  cluster.create_topic(out, 1);
  std::atomic<bool> ask_commit{false};
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in)
      .process([&ask_commit] { return std::make_unique<commit_on_request>(ask_commit); })
      .to(out);
  sluice::app app(b.build(), cfg);
  app.start();
  {
    sluice::topic_writer writer(cfg);
    writer.send<std::string, std::string>(in, "k", "v");
    writer.flush();
  }
  ASSERT_TRUE(sluice::test::eventually([&] { return app.metrics().total("sluice_records_processed_total") > 0; }, 30s));
  ASSERT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::running; }, 30s))
      << sluice::to_string(app.state());
  const auto recoveries = app.metrics().total("sluice_task_recoveries_total");

  // The group coordinator refuses the commit the test asks for (librdkafka does not retry
  // REBALANCE_IN_PROGRESS): the thread closes its task, rewinds and reprocesses the record.
  rd_kafka_mock_push_request_errors(cluster.native(), 8 /* OffsetCommit */, 1, RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS);
  ask_commit = true;
  ASSERT_TRUE(
      sluice::test::eventually([&] { return app.metrics().total("sluice_task_recoveries_total") > recoveries; }, 30s))
      << "the refused commit did not lead to a recovery: " << sluice::to_string(app.state());
  EXPECT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::running; }, 30s))
      << sluice::to_string(app.state()) << " 30 s after the recovery";
  app.close();
}

TEST(embedded_app, its_metrics_show_the_memory_of_its_stores_and_its_allocator) {
  names t;
  auto cfg = job_config(unique("embedded-memory"));
  cfg.set("bootstrap.servers", "embedded");
  cfg.set("state.memory.budget.bytes", "33554432");
  sluice::app app(enrich_orders(t), cfg);
  app.start();
  const auto text = app.metrics().prometheus_text();
  auto value = [&](const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  EXPECT_EQ(value("sluice_state_memory_budget_bytes"), 33554432.0) << text;
  EXPECT_GE(value("sluice_state_block_cache_bytes"), 0.0) << text;
  EXPECT_GE(value("sluice_state_memtable_bytes"), 0.0) << text;
  EXPECT_GT(value("sluice_allocator_in_use_bytes"), 0.0) << text;
  EXPECT_GE(value("sluice_allocator_free_bytes"), 0.0) << text;
  app.close();
}

TEST(embedded_app, after_a_restart_an_idle_partition_shows_its_lag_as_zero) {
  // The lag series of a partition is set from the consumer's position, which stays unknown
  // until a record is consumed. A partition with nothing new after a restart had no series
  // at all; its fetcher's partition end is where the consumer stands, so its lag is 0.
  const std::string in = unique("pings"), app_id = unique("idle-lag");
  auto cfg = restartable_embedded_config(app_id);
  sluice::topic_admin(cfg).create_topic(in, 2);
  auto topology = [&] {
    sluice::streams_builder b;
    b.stream<std::string, std::string>(in).group_by_key().count("pings-per-key");
    return b.build();
  };
  auto lag_of = [&](sluice::app& app, int partition) -> std::optional<double> {
    const auto text = app.metrics().prometheus_text();
    const std::string series =
        "sluice_consumer_lag_records{topic=\"" + in + "\",partition=\"" + std::to_string(partition) + "\"} ";
    const auto at = text.find(series);
    if (at == std::string::npos) return std::nullopt;
    return std::stod(text.substr(at + series.size()));
  };
  sluice::topic_writer writer(cfg);
  for (int i = 0; i < 20; ++i) writer.send_raw(in, "k" + std::to_string(i), "x", 0, {}, i % 2);
  writer.flush();
  {
    sluice::app app(topology(), cfg);
    app.start();
    ASSERT_TRUE(sluice::test::eventually([&] { return lag_of(app, 0) == 0.0 && lag_of(app, 1) == 0.0; }, 30s))
        << app.metrics().prometheus_text();
    app.close();
  }
  writer.send_raw(in, "k0", "x", 0, {}, 0);  // partition 0 moves on; partition 1 stays idle
  writer.flush();
  auto restarted = restartable_embedded_config(app_id);
  sluice::app app(topology(), restarted);
  app.start();
  ASSERT_TRUE(sluice::test::eventually([&] { return lag_of(app, 0) == 0.0; }, 30s)) << app.metrics().prometheus_text();
  EXPECT_TRUE(sluice::test::eventually([&] { return lag_of(app, 1) == 0.0; }, 30s))
      << "no lag series for the idle partition 1:\n"
      << app.metrics().prometheus_text();
  app.close();
}

TEST(embedded_app, a_windowed_store_changelog_is_compacted_and_deleted_after_retention_plus_a_day) {
  // Kafka Streams' windowed changelogs: compact,delete, retention.ms = the store's retention
  // (window size + grace) + windowstore.changelog.additional.retention.ms (1 day), so the
  // records of windows that left the store leave the topic too.
  const std::string in = unique("clicks");
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in)
      .group_by_key()
      .windowed_by(sluice::time_windows::of_size_and_grace(1min, 10s))
      .count("clicks-per-minute")
      .to_stream()
      .to(unique("clicks-out"));
  b.stream<std::string, std::string>(unique("words")).group_by_key().count("plain-counts");
  const std::string app_id = unique("windowed-changelog");
  auto cfg = job_config(app_id);
  cfg.set("bootstrap.servers", "embedded");
  sluice::app app(b.build(), cfg);
  app.start();
  sluice::kafka::config_map admin_config{{"bootstrap.servers", "embedded"}};
  sluice::kafka::apply_embedded(admin_config);
  sluice::kafka::admin admin(admin_config);
  auto windowed = admin.describe_topic_configs(app_id + "-clicks-per-minute-changelog", 10s);
  auto plain = admin.describe_topic_configs(app_id + "-plain-counts-changelog", 10s);
  app.close();
  EXPECT_EQ(windowed.at("cleanup.policy"), "compact,delete");
  EXPECT_EQ(windowed.at("retention.ms"), std::to_string(70'000 + 86'400'000));
  EXPECT_EQ(plain.at("cleanup.policy"), "compact");
}

TEST(embedded_app, a_suppression_buffer_comes_back_from_its_changelog_after_a_restart) {
  // Kafka Streams keeps the suppression buffer in a changelogged store; so does sluice. The
  // second instance starts on an empty state.dir, so the window buffered before the restart
  // can only come from the changelog, and its final count from no record read twice.
  const std::string in = unique("clicks"), updates = unique("click-updates"), finals = unique("final-clicks");
  auto topology = [&] {
    return windowed_clicks(in, updates, finals, sluice::time_windows::of_size_with_no_grace(1min));
  };
  const std::string app_id = unique("suppress-restart");
  auto cfg = restartable_embedded_config(app_id);
  sluice::topic_writer writer(cfg);
  {
    sluice::app app(topology(), cfg);
    app.start();
    writer.send<std::string, std::string>(in, "a", "", 1'000);
    writer.send<std::string, std::string>(in, "a", "", 2'000);
    writer.flush();
    sluice::topic_reader reader(cfg, {updates});
    ASSERT_EQ(reader.read_at_least(2, 30s).size(), 2u);  // both counted, the window still open
    app.close();                                         // commits
  }
  auto restarted = restartable_embedded_config(app_id);
  sluice::app app(topology(), restarted);
  app.start();
  writer.send<std::string, std::string>(in, "a", "", 61'000);  // stream time 61 s closes [0, 60 s)
  writer.flush();
  sluice::topic_reader reader(restarted, {finals});
  auto out = reader.read_at_least(1, 60s);
  app.close();
  ASSERT_EQ(out.size(), 1u);
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>>;
  const auto key = key_serde::deserialize(*out[0].key);
  EXPECT_EQ(key.key, "a");
  EXPECT_EQ(key.window.start, 0);
  EXPECT_EQ(sluice::default_serde<std::int64_t>::deserialize(*out[0].value), 2);
  EXPECT_EQ(out[0].timestamp, 2'000);
}

// The states an app was in when its processors closed: a processor closes when its task
// goes, in a revocation (rebalancing) or at the app's close (pending_shutdown).
struct close_witness {
  std::mutex mutex;
  std::vector<sluice::app_state> seen;
  std::atomic<const sluice::app*> app{nullptr};
};

class state_at_close final : public sluice::processor<std::string, std::string, std::string, std::string> {
 public:
  explicit state_at_close(close_witness* w) : witness_(w) {}
  void process(const sluice::record<std::string, std::string>&) override {}
  void close() override {
    if (const auto* a = witness_->app.load()) {
      std::lock_guard lock(witness_->mutex);
      witness_->seen.push_back(a->state());
    }
  }

 private:
  close_witness* witness_;
};

TEST(embedded_app, an_instance_whose_tasks_a_rebalance_revoked_is_not_running_until_it_is_assigned_again) {
  // Under the eager protocol a revocation takes every task away until the next assignment.
  // An instance in that gap must not report running (/ready would send it traffic it cannot
  // serve). Evidence, not timing: the first instance's processors, closed by the revocation
  // that the second instance's join causes, see their app's state at that moment.
  const std::string in = unique("events");
  const std::string app_id = unique("revoked-not-running");
  auto first_cfg = restartable_embedded_config(app_id);
  sluice::topic_admin(first_cfg).create_topic(in, 2);
  close_witness witness;
  auto topology = [&](close_witness* w) {
    sluice::streams_builder b;
    b.stream<std::string, std::string>(in).process([w] { return std::make_unique<state_at_close>(w); });
    return b.build();
  };
  close_witness ignored;  // the second instance's processors
  sluice::app first(topology(&witness), first_cfg);
  witness.app = &first;
  first.start();
  ASSERT_TRUE(sluice::test::eventually([&] { return first.state() == sluice::app_state::running; }, 30s))
      << sluice::to_string(first.state());
  sluice::app second(topology(&ignored), restartable_embedded_config(app_id));
  second.start();
  ASSERT_TRUE(sluice::test::eventually(
      [&] {
        std::lock_guard lock(witness.mutex);
        return !witness.seen.empty() && first.state() == sluice::app_state::running &&
               second.state() == sluice::app_state::running;
      },
      60s))
      << "no revocation of the first instance's tasks, or the instances did not settle";
  second.close();
  first.close();
  std::lock_guard lock(witness.mutex);
  ASSERT_GE(witness.seen.size(), 2u);  // the revocation's closes, then the final close's
  for (std::size_t i = 0; i + 1 < witness.seen.size(); ++i)
    EXPECT_STRNE(sluice::to_string(witness.seen[i]), "running") << "close " << i << " of " << witness.seen.size();
  EXPECT_STREQ(sluice::to_string(witness.seen.back()), "pending_shutdown");
}

TEST(embedded_app, a_window_that_closed_before_a_restart_stays_closed_and_its_final_result_comes_once) {
  // Windows of a minute with 30 s grace: the record at 95 s closes [0, 60 s) (95 >= 60 + 30)
  // while the highest window start is 60 s. After the restart the aggregation must go on
  // from 95 s, not 60 s: the late record at 2 s is dropped, not counted into a reopened
  // window whose final result the suppression would emit a second time.
  const std::string in = unique("clicks"), updates = unique("click-updates"), finals = unique("final-clicks");
  auto topology = [&] {
    return windowed_clicks(in, updates, finals, sluice::time_windows::of_size_and_grace(1min, 30s));
  };
  using key_serde = sluice::time_windowed_serde<sluice::default_serde<std::string>>;
  const std::string app_id = unique("closed-window-restart");
  auto cfg = restartable_embedded_config(app_id);
  sluice::topic_writer writer(cfg);
  {
    sluice::app app(topology(), cfg);
    app.start();
    writer.send<std::string, std::string>(in, "a", "", 1'000);
    writer.send<std::string, std::string>(in, "a", "", 95'000);
    writer.flush();
    sluice::topic_reader reader(cfg, {finals});
    auto out = reader.read_at_least(1, 30s);  // [0, 60 s) closed: its final count
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(key_serde::deserialize(*out[0].key).window.start, 0);
    app.close();  // commits
  }
  auto restarted = restartable_embedded_config(app_id);
  sluice::app app(topology(), restarted);
  app.start();
  writer.send<std::string, std::string>(in, "a", "", 2'000);    // late for the closed window
  writer.send<std::string, std::string>(in, "a", "", 200'000);  // closes [60 s, 120 s): the end marker
  writer.flush();
  sluice::topic_reader reader(restarted, {finals});
  std::vector<std::pair<std::int64_t, std::int64_t>> seen;  // (window start, final count)
  while (seen.empty() || seen.back().first != 60'000) {
    auto batch = reader.read_at_least(1, 60s);
    ASSERT_FALSE(batch.empty()) << "no final result for [60 s, 120 s)";
    for (const auto& r : batch)
      seen.emplace_back(key_serde::deserialize(*r.key).window.start,
                        sluice::default_serde<std::int64_t>::deserialize(*r.value));
  }
  app.close();
  // The window before the restart once, with its one record; then the next window.
  EXPECT_EQ(seen, (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 1}, {60'000, 1}}));
}

TEST(embedded_app, a_suppression_buffers_prior_values_come_back_from_its_changelog_for_joins) {
  // A join of a suppressed table answers a buffered key with the value the suppression last
  // emitted for it, which the buffer keeps in its changelog with the buffered update. The
  // second instance starts on an empty state.dir: k's lookup answers L1 only if the buffer's
  // entry (L2 held back, L1 emitted before) came back from the changelog with its prior
  // value (without the buffer it would read the limits table's L2).
  const std::string limits = unique("limits"), rates = unique("rates"), out = unique("rates-and-limits");
  auto topology = [&] {
    sluice::streams_builder b;
    auto held = b.table<std::string, std::string>(limits, "limits-store")
                    .suppress(sluice::until_time_limit(1min, {}).with_name("held"));
    b.table<std::string, std::string>(rates, "rates-store")
        .left_join(
            held,
            [](const std::string& r, const std::optional<std::string>& l) { return r + "/" + l.value_or("null"); },
            "rates-and-limits")
        .to_stream()
        .to(out);
    return b.build();
  };
  const std::string app_id = unique("suppressed-join-restart");
  auto cfg = restartable_embedded_config(app_id);
  sluice::topic_admin admin(cfg);
  for (const auto& t : {limits, rates, out}) admin.create_topic(t, 1);
  sluice::topic_writer writer(cfg);
  auto value_of = [](const sluice::raw_message& m) {
    return sluice::default_serde<std::string>::deserialize(*m.value);
  };
  {
    sluice::app app(topology(), cfg);
    app.start();
    writer.send<std::string, std::string>(rates, "k", "r0", 0);
    writer.flush();
    sluice::topic_reader reader(cfg, {out});
    auto first = reader.read_at_least(1, 60s);  // r0/null: rates is read before the limits arrive
    ASSERT_EQ(first.size(), 1u);
    writer.send<std::string, std::string>(limits, "k", "L1", 1'000);
    writer.send<std::string, std::string>(limits, "x", "X", 61'000);  // releases k = L1: r0/L1
    writer.flush();
    auto second = reader.read_at_least(1, 60s);
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(value_of(second[0]), "r0/L1");
    writer.send<std::string, std::string>(limits, "k", "L2", 62'000);  // held back; L1 was emitted
    writer.flush();
    // Evidence that the buffer logged k with its prior value: 'k' "k" -> <u64 62000> 0x01 "L1".
    std::string expected(8, '\0');
    for (int i = 7, v = 62'000; i >= 0; --i, v >>= 8)
      expected[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xFF);
    expected += "\1L1";
    sluice::topic_reader changelog(cfg, {app_id + "-held-store-changelog"});
    bool logged = false;
    for (int polls = 0; polls < 60 && !logged; ++polls)
      for (const auto& m : changelog.poll(1s))
        if (m.key && *m.key == "kk" && m.value && *m.value == expected) logged = true;
    ASSERT_TRUE(logged);
    app.close();
  }
  auto restarted = restartable_embedded_config(app_id);
  sluice::app app(topology(), restarted);
  app.start();
  writer.send<std::string, std::string>(rates, "k", "r1", 62'001);
  writer.flush();
  sluice::topic_reader reader(restarted, {out});
  auto all = reader.read_at_least(3, 60s);
  app.close();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(value_of(all[2]), "r1/L1");
}

TEST(embedded_app, stream_join_stores_come_back_from_their_changelogs_after_a_restart) {
  // An outer stream-stream join keeps each side's records and the not yet matched ones in
  // changelogged window stores. The second instance starts on an empty state.dir: a right
  // record after the restart matches a left one only through the restored side store, and
  // the unmatched left record comes out, once its window closes, only through the restored
  // shared store; the matched one must not come out unmatched.
  const std::string left = unique("left"), right = unique("right"), out = unique("joined");
  auto topology = [&] {
    sluice::streams_builder b;
    auto l = b.stream<std::string, std::string>(left);
    auto r = b.stream<std::string, std::string>(right);
    l.outer_join(
         r,
         [](const std::optional<std::string>& lv, const std::optional<std::string>& rv) {
           return lv.value_or("null") + "+" + rv.value_or("null");
         },
         sluice::join_windows::of_time_difference_and_grace(1s, 0ms), "j")
        .to(out);
    return b.build();
  };
  const std::string app_id = unique("join-restart");
  auto cfg = restartable_embedded_config(app_id);
  sluice::topic_admin admin(cfg);
  for (const auto& t : {left, right, out}) admin.create_topic(t, 1);  // one task: one stream time
  sluice::topic_writer writer(cfg);
  {
    sluice::app app(topology(), cfg);
    app.start();
    writer.send<std::string, std::string>(left, "k", "l1", 1'000);
    writer.send<std::string, std::string>(left, "k2", "x", 1'000);
    writer.flush();
    // Both left records reached the shared store's changelog: they were processed here.
    sluice::topic_reader shared(cfg, {app_id + "-j-outer-shared-join-store-changelog"});
    ASSERT_EQ(shared.read_at_least(2, 30s).size(), 2u);
    app.close();
  }
  auto restarted = restartable_embedded_config(app_id);
  sluice::app app(topology(), restarted);
  app.start();
  writer.send<std::string, std::string>(right, "k", "r1", 1'500);    // joins l1 from the restored store
  writer.send<std::string, std::string>(right, "k3", "z", 100'000);  // closes the windows of time 1000
  writer.flush();
  sluice::topic_reader reader(restarted, {out});
  auto got = reader.read_at_least(2, 60s);
  app.close();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(*got[0].key, "k");
  EXPECT_EQ(*got[0].value, "l1+r1");
  EXPECT_EQ(got[0].timestamp, 1'500);
  // Released in time then key order: a spurious "l1+null" (k < k2) would come first.
  EXPECT_EQ(*got[1].key, "k2");
  EXPECT_EQ(*got[1].value, "x+null");
  EXPECT_EQ(got[1].timestamp, 1'000);
}
