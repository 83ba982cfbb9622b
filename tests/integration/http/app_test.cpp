// The HTTP server of a running app against the real broker: probes through a restore and a
// failure, /metrics checked by promtool, /topology, the auth token, and a flood of hostile
// clients while the job's output stays exact.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "broker_env.hpp"
#include "eventually.hpp"
#include "http_client.hpp"
#include "scratch_dir.hpp"
#include "sluice/sluice.hpp"
#include "word_count/topology.hpp"

using namespace std::chrono_literals;

namespace {

sluice::config base_config(const std::string& app_id, std::uint16_t port) {
  sluice::config c;
  c.set("bootstrap.servers", sluice::test::broker_bootstrap());
  c.set("application.id", app_id);
  c.set("state.dir", sluice::test::scratch_path("sluice-state").string());
  c.set("commit.interval.ms", "200");
  c.set("application.server", "127.0.0.1:" + std::to_string(port));
  return c;
}

/// Feeds `lines` lines of 5 words each from `vocabulary`, counting them into `expected`.
void feed(const sluice::config& cfg, const std::string& topic, int lines, const std::vector<std::string>& vocabulary,
          std::map<std::string, std::int64_t>& expected, std::mt19937& rng) {
  sluice::topic_writer w(cfg);
  for (int i = 0; i < lines; ++i) {
    std::string line;
    for (int k = 0; k < 5; ++k) {
      const auto& word = vocabulary[rng() % vocabulary.size()];
      line += word + " ";
      ++expected[word];
    }
    w.send_raw(topic, std::nullopt, line);
  }
  w.flush();
}

/// The latest count per word in `topic`, read until it equals `expected` or 90 s pass.
std::map<std::string, std::int64_t> read_counts(const sluice::config& cfg, const std::string& topic,
                                                const std::map<std::string, std::int64_t>& expected) {
  sluice::topic_reader r(cfg, {topic});
  std::map<std::string, std::int64_t> counts;
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < deadline && counts != expected)
    for (auto& m : r.poll(300ms)) counts[*m.key] = std::max(counts[*m.key], sluice::int64_serde::deserialize(*m.value));
  return counts;
}

/// Runs `promtool check metrics` on `text`; returns its exit status and output.
std::pair<int, std::string> promtool_check(const std::string& text) {
  auto file = sluice::test::scratch_path("metrics");
  std::ofstream(file) << text;
  std::string out;
  FILE* p = popen(("promtool check metrics < " + file.string() + " 2>&1").c_str(), "r");
  char buf[4096];
  while (auto n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  std::filesystem::remove(file);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool have_promtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

double metric_value(const std::string& text, const std::string& family) {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(family + " ") || line.starts_with(family + "{"))
      sum += std::stod(line.substr(line.rfind(' ') + 1));
  return sum;
}

/// The sum of `family`'s samples whose labels contain `label` (e.g. reason="deserialization").
double metric_value_where(const std::string& text, const std::string& family, const std::string& label) {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(family + "{") && line.find(label) != std::string::npos)
      sum += std::stod(line.substr(line.rfind(' ') + 1));
  return sum;
}

/// GET /metrics until `done(body)` or 60 s pass; returns the last body.
template <class Done>
std::string metrics_until(std::uint16_t port, Done done) {
  std::string body;
  for (auto deadline = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < deadline;) {
    body = sluice::test::http_get(port, "/metrics").body;
    if (done(body)) break;
    std::this_thread::sleep_for(100ms);
  }
  return body;
}

/// Passes records on; while the gate is closed it holds its task's input back after each
/// record (50 ms), so a backlog builds up in front of it.
class gated final : public sluice::processor<std::string, std::int64_t> {
 public:
  explicit gated(std::atomic<bool>& open) : open_(open) {}
  void process(const sluice::record<std::string, std::int64_t>& r) override {
    if (!open_.load()) context().pause_input_until(context().wall_clock_ms() + 50);
    context().forward(r);
  }

 private:
  std::atomic<bool>& open_;
};

void wait_running(sluice::app& app) {
  for (int i = 0; i < 600 && app.state() != sluice::app_state::running; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(app.state(), sluice::app_state::running);
}

}  // namespace

TEST(http_app, metrics_pass_promtool_and_probes_topology_and_token_answer_for_a_running_word_count) {
  SLUICE_REQUIRE_BROKER();
  if (!have_promtool()) {
    if (std::getenv("CI")) FAIL() << "promtool is missing; scripts/setup installs it (Debian's prometheus)";
    GTEST_SKIP() << "promtool missing: run scripts/setup";
  }
  auto in = sluice::test::unique_name("http-in"), out = sluice::test::unique_name("http-out");
  const auto port = sluice::test::free_port();
  auto cfg = base_config(sluice::test::unique_name("http"), port);
  cfg.set("http.auth.token", "t0ken");
  cfg.set("statistics.interval.ms", "200");  // librdkafka's figures soon after the start
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 4);
  admin.create_topic(out, 4);
  std::map<std::string, std::int64_t> expected;
  std::mt19937 rng(11);
  std::vector<std::string> vocabulary = {"alpha", "beta", "gamma", "delta", "epsilon"};
  feed(cfg, in, 2000, vocabulary, expected, rng);

  auto topo = examples::word_count_topology(in, out);
  sluice::app app(topo, cfg);
  app.start();
  const std::vector<std::pair<std::string, std::string>> auth = {{"Authorization", "Bearer t0ken"}};
  EXPECT_EQ(sluice::test::http_get(port, "/health").status, 200);
  wait_running(app);
  ASSERT_EQ(read_counts(cfg, out, expected), expected);

  auto ready = sluice::test::http_get(port, "/ready");
  EXPECT_EQ(ready.status, 200);
  EXPECT_NE(ready.body.find("\"state\": \"running\""), std::string::npos) << ready.body;
  EXPECT_EQ(sluice::test::http_get(port, "/metrics").status, 401);
  EXPECT_EQ(sluice::test::http_get(port, "/topology").status, 401);
  // librdkafka's statistics: round-trip times and request queues per broker, queues per client.
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
    auto m = sluice::test::http_get(port, "/metrics", auth).body;
    if (m.find("sluice_kafka_broker_rtt_avg_seconds{thread=\"0\",client=\"producer\",broker=") != std::string::npos &&
        m.find("sluice_kafka_broker_rtt_avg_seconds{thread=\"0\",client=\"consumer\",broker=") != std::string::npos)
      break;
    std::this_thread::sleep_for(100ms);
  }
  auto metrics = sluice::test::http_get(port, "/metrics", auth);
  ASSERT_EQ(metrics.status, 200);
  // The RTT of a statistics window without requests is 0 (an idle producer): present, not positive.
  EXPECT_NE(metrics.body.find("sluice_kafka_broker_rtt_p99_seconds{thread=\"0\",client=\"consumer\",broker="),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("sluice_kafka_broker_waitresp_requests{thread=\"0\",client=\"consumer\",broker="),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("sluice_kafka_client_queue_messages{thread=\"0\",client=\"producer\"}"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("sluice_kafka_consumer_fetch_queue_messages{thread=\"0\",client=\"consumer\"}"),
            std::string::npos)
      << metrics.body;
  EXPECT_EQ(metrics.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  auto [code, report] = promtool_check(metrics.body);
  EXPECT_EQ(code, 0) << report << "\n" << metrics.body;
  EXPECT_GE(metric_value(metrics.body, "sluice_records_processed_total"), 2000 + 10000)  // lines, then words
      << metrics.body;
  EXPECT_GT(metric_value(metrics.body, "process_resident_memory_bytes"), 0);
  EXPECT_GT(metric_value(metrics.body, "process_cpu_seconds_total"), 0);
  EXPECT_GT(metric_value(metrics.body, "sluice_commit_latency_seconds_count"), 0);

  auto text = sluice::test::http_get(port, "/topology", auth);
  EXPECT_EQ(text.status, 200);
  EXPECT_EQ(text.body, topo.describe());
  auto dot = sluice::test::http_get(port, "/topology?format=dot", auth);
  EXPECT_EQ(dot.body, topo.to_dot());
  EXPECT_EQ(sluice::test::http_get(port, "/topology?format=svg", auth).status, 400);
  app.close();
}

TEST(http_app, metrics_show_the_lag_per_partition_and_dead_letters_by_reason_moving_on_the_broker) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("http-in"), out = sluice::test::unique_name("http-out");
  const auto port = sluice::test::free_port();
  const auto app_id = sluice::test::unique_name("http");
  auto cfg = base_config(app_id, port);
  cfg.set("deserialization.error.handler", "dead_letter");
  cfg.set("max.poll.records", "100");  // a paused task holds few records: the rest is lag
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 2);
  admin.create_topic(out, 2);
  admin.create_topic(app_id + "-dlq", 1);
  constexpr int records = 4000;
  {
    sluice::topic_writer w(cfg);
    for (int i = 0; i < records; ++i) w.send(in, "k" + std::to_string(i % 50), std::int64_t{i});
    w.flush();
  }
  std::atomic<bool> open{false};
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>(in).process([&open] { return std::make_unique<gated>(open); }).to(out);
  sluice::app app(b.build(), cfg);
  app.start();
  wait_running(app);

  // Read: with the gate closed the job crawls, so both partitions show a backlog.
  const auto lag_of = [](const std::string& text, int partition) {
    return metric_value_where(text, "sluice_consumer_lag_records", "partition=\"" + std::to_string(partition) + "\"");
  };
  auto before = metrics_until(port, [&](const std::string& t) { return lag_of(t, 0) > 0 && lag_of(t, 1) > 0; });
  EXPECT_GT(lag_of(before, 0), 0) << before;
  EXPECT_GT(lag_of(before, 1), 0) << before;
  EXPECT_LE(metric_value(before, "sluice_consumer_lag_records"), records) << before;
  EXPECT_EQ(before.find("sluice_consumer_lag_records{thread="), std::string::npos) << "per partition, not per thread";
  EXPECT_EQ(metric_value(before, "sluice_records_dead_lettered_total"), 0) << before;

  // Act: three records that cannot be read as int64, then open the gate.
  {
    sluice::topic_writer w(cfg);
    for (const char* bad : {"x", "not eight", "abc"}) w.send_raw(in, std::string_view("bad"), std::string_view(bad));
    w.flush();
  }
  open = true;
  sluice::topic_reader dlq(cfg, {app_id + "-dlq"});
  EXPECT_EQ(dlq.read_at_least(3, 90s).size(), 3u);
  sluice::topic_reader good(cfg, {out});
  EXPECT_EQ(good.read_at_least(records, 90s).size(), static_cast<std::size_t>(records));

  // Read again: the backlog is gone (a commit after the last record sets it) and the dead
  // letters are counted by their reason.
  auto after = metrics_until(port, [&](const std::string& t) {
    return t.find("sluice_consumer_lag_records{") != std::string::npos &&
           metric_value(t, "sluice_consumer_lag_records") == 0 &&
           metric_value(t, "sluice_records_dead_lettered_total") == 3;
  });
  EXPECT_EQ(lag_of(after, 0), 0) << after;
  EXPECT_EQ(lag_of(after, 1), 0) << after;
  EXPECT_EQ(metric_value_where(after, "sluice_records_dead_lettered_total", "reason=\"deserialization\""), 3) << after;
  EXPECT_EQ(metric_value_where(after, "sluice_records_skipped_total", "reason=\"deserialization\""), 3) << after;
  EXPECT_EQ(metric_value_where(after, "sluice_records_dead_lettered_total", "reason=\"processing\""), 0) << after;
  if (have_promtool()) {
    auto [code, report] = promtool_check(after);
    EXPECT_EQ(code, 0) << report << "\n" << after;
  }
  app.close();
}

TEST(http_app, ready_is_503_with_restore_progress_while_the_store_restores_and_200_after) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("http-in"), out = sluice::test::unique_name("http-out");
  const auto port = sluice::test::free_port();
  auto cfg = base_config(sluice::test::unique_name("http"), port);
  cfg.set("instance.id", "restoring");  // the same static member: the restart rejoins at once
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 2);
  admin.create_topic(out, 2);
  std::map<std::string, std::int64_t> expected;
  std::mt19937 rng(5);
  std::vector<std::string> vocabulary;
  for (int i = 0; i < 20000; ++i) vocabulary.push_back("w" + std::to_string(i));
  feed(cfg, in, 20000, vocabulary, expected, rng);
  {
    sluice::app first(examples::word_count_topology(in, out), cfg);
    first.start();
    ASSERT_EQ(read_counts(cfg, out, expected), expected);
    first.close();
  }
  // A new instance with an empty state.dir restores every count from the changelog.
  cfg.set("state.dir", sluice::test::scratch_path("sluice-state").string());
  sluice::app second(examples::word_count_topology(in, out), cfg);
  std::mutex mutex;
  std::vector<sluice::test::http_reply> while_restoring;
  // The listener runs on the stream thread that entered restoring: it waits here, so the
  // answer is taken while the restore is certainly in progress.
  std::string metrics_while_restoring;
  second.on_state_change([&](sluice::app_state, sluice::app_state next) {
    if (next != sluice::app_state::restoring) return;
    auto r = sluice::test::http_get(port, "/ready");
    auto m = sluice::test::http_get(port, "/metrics");
    std::lock_guard lock(mutex);
    while_restoring.push_back(r);
    if (metrics_while_restoring.empty()) metrics_while_restoring = m.body;
  });
  second.start();
  wait_running(second);
  std::lock_guard lock(mutex);
  ASSERT_FALSE(while_restoring.empty());
  const auto& r = while_restoring.front();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("{\"state\": \"restoring\", \"restore\": {\"done\": 0, \"total\": "), std::string::npos)
      << r.body;
  auto total = std::stoll(r.body.substr(r.body.find("\"total\": ") + 9));
  // The changelog holds one record per count update (100,000 words), fewer once compacted,
  // never fewer than one per distinct word.
  EXPECT_GE(total, static_cast<long long>(expected.size())) << r.body;
  EXPECT_LE(total, 100000) << r.body;
  auto after = sluice::test::http_get(port, "/ready");
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_NE(after.body.find("\"done\": "), std::string::npos);
  auto metrics = sluice::test::http_get(port, "/metrics");
  EXPECT_EQ(metric_value(metrics.body, "sluice_restored_records_total"), static_cast<double>(total)) << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "sluice_restore_remaining_records"), 0);
  // The restore's figures moved: done from 0 to the total, the total unchanged.
  EXPECT_EQ(metric_value(metrics_while_restoring, "sluice_restore_done_records"), 0) << metrics_while_restoring;
  EXPECT_EQ(metric_value(metrics_while_restoring, "sluice_restore_total_records"), static_cast<double>(total))
      << metrics_while_restoring;
  EXPECT_EQ(metric_value(metrics_while_restoring, "sluice_restore_remaining_records"), static_cast<double>(total));
  EXPECT_EQ(metric_value(metrics.body, "sluice_restore_done_records"), static_cast<double>(total)) << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "sluice_restore_total_records"), static_cast<double>(total)) << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "sluice_restore_rate_records_per_second"), 0) << "no restore in progress";
  EXPECT_NE(after.body.find("\"done\": " + std::to_string(total) + ", \"total\": " + std::to_string(total)),
            std::string::npos)
      << after.body;
  second.close();
}

TEST(http_app, health_is_503_with_the_reason_once_a_stream_thread_has_died) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("http-in"), out = sluice::test::unique_name("http-out");
  const auto port = sluice::test::free_port();
  auto cfg = base_config(sluice::test::unique_name("http"), port);
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 1);
  admin.create_topic(out, 1);
  {
    sluice::topic_writer w(cfg);
    w.send_raw(in, std::string("k"), std::string("abc"));  // not an 8-byte integer
    w.flush();
  }
  sluice::streams_builder b;
  b.stream<std::string, std::int64_t>(in).to(out);
  sluice::app app(b.build(), cfg);
  app.start();
  app.wait();
  ASSERT_EQ(app.state(), sluice::app_state::error);
  auto health = sluice::test::http_get(port, "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("\"status\": \"error\""), std::string::npos) << health.body;
  EXPECT_NE(health.body.find(in), std::string::npos) << "the reason names the failing record: " << health.body;
  EXPECT_EQ(sluice::test::http_get(port, "/ready").status, 503);
  app.close();
}

TEST(http_app, a_flood_of_idle_slow_and_oversized_clients_leaves_the_job_output_exact) {
  SLUICE_REQUIRE_BROKER();
  namespace asio = boost::asio;
  auto in = sluice::test::unique_name("http-in"), out = sluice::test::unique_name("http-out");
  const auto port = sluice::test::free_port();
  auto cfg = base_config(sluice::test::unique_name("http"), port);
  cfg.set("http.max.connections", "600");
  cfg.set("http.request.timeout.ms", "2000");
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 4);
  admin.create_topic(out, 4);
  sluice::app app(examples::word_count_topology(in, out), cfg);
  app.start();

  // 100 MB bodies and 20 KB headers are refused (413, 431) while the job processes.
  asio::io_context ioc;
  auto send_and_drain = [&](const std::string& request) {
    asio::ip::tcp::socket s(ioc);
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    boost::system::error_code ec;
    asio::write(s, asio::buffer(request), ec);
    char buf[1024];
    while (!ec) s.read_some(asio::buffer(buf), ec);  // until the server closes it
  };
  for (int i = 0; i < 10; ++i) {
    send_and_drain("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n" + std::string(1 << 16, 'x'));
    send_and_drain("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  }
  // Then 1,000 connections (400 more than allowed), half of them with a request that never ends.
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> flood;
  for (int i = 0; i < 1000; ++i) {
    auto s = std::make_unique<asio::ip::tcp::socket>(ioc);
    s->connect({asio::ip::make_address("127.0.0.1"), port});
    boost::system::error_code ec;
    if (i % 2 == 0) asio::write(*s, asio::buffer(std::string("GET /metrics HTTP/1.1\r\nHo")), ec);
    flood.push_back(std::move(s));
  }
  std::map<std::string, std::int64_t> expected;
  std::mt19937 rng(3);
  std::vector<std::string> vocabulary = {"red", "green", "blue", "cyan", "magenta", "yellow", "black"};
  feed(cfg, in, 5000, vocabulary, expected, rng);
  EXPECT_EQ(read_counts(cfg, out, expected), expected);
  flood.clear();
  // Once the flood is gone the server answers again.
  EXPECT_TRUE(sluice::test::eventually([&] { return sluice::test::http_status_or_zero(port, "/health") == 200; }));
  auto metrics = sluice::test::http_get(port, "/metrics");
  EXPECT_GE(metric_value(metrics.body, "sluice_http_connections_refused_total"), 400) << metrics.body;
  EXPECT_NE(metrics.body.find("sluice_http_responses_total{code=\"413\"} 10\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("sluice_http_responses_total{code=\"431\"} 10\n"), std::string::npos) << metrics.body;
  app.close();
}
