// sluice-bench-http: interactive queries under load. Two instances of a count job (group_by_key
// + count into a RocksDB store) run in this process against a real broker; while they process
// a preloaded input at full speed, query clients send GET /stores/bench-counts/keys/{key} to
// the first instance over keep-alive loopback connections. An answer served by the first
// instance is a local lookup, one served by the second (X-Sluice-Served-By) was forwarded. The
// same input is processed once without queries first: the job's throughput with and without
// the query load gives the ratio.
//
// Bounded: at most --max-queries requests and --seconds of querying per run, 127.0.0.1 only.
//
//   sluice-bench-http [--bootstrap host:port] [--records N] [--keys K] [--clients C]
//                     [--max-queries Q] [--seconds S]
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <unistd.h>

#include "sluice/sluice.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

std::uint16_t free_port() {
  asio::io_context ioc;
  asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

/// One keep-alive connection to 127.0.0.1:port; reconnects when the server closes it.
class client {
 public:
  explicit client(std::uint16_t port) : port_(port) {}
  /// Status and X-Sluice-Served-By of GET target; status 0 on a transport error.
  std::pair<int, std::string> get(const std::string& target) {
    try {
      if (!socket_.is_open()) socket_.connect({asio::ip::make_address("127.0.0.1"), port_});
      bhttp::request<bhttp::empty_body> req(bhttp::verb::get, target, 11);
      req.set(bhttp::field::host, "127.0.0.1");
      req.keep_alive(true);
      bhttp::write(socket_, req);
      bhttp::response<bhttp::string_body> res;
      bhttp::read(socket_, buffer_, res);
      std::pair<int, std::string> out{static_cast<int>(res.result_int()), std::string(res["X-Sluice-Served-By"])};
      body = std::move(res.body());
      if (!res.keep_alive()) close();
      return out;
    } catch (const std::exception&) {
      close();
      return {0, {}};
    }
  }

  /// The body of the last answer.
  std::string body;

 private:
  void close() {
    boost::system::error_code ec;
    socket_.close(ec);
    buffer_.clear();
  }
  std::uint16_t port_;
  asio::io_context ioc_;
  asio::ip::tcp::socket socket_{ioc_};
  boost::beast::flat_buffer buffer_;
};

struct latencies {
  std::vector<double> local_ms, forwarded_ms;
  long long refused = 0, failed = 0;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

sluice::topology count_topology(const std::string& in, const std::string& out) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in).group_by_key().count("bench-counts").to_stream().to(out);
  return b.build();
}

struct run_result {
  double seconds = 0;     ///< from start() until every record is processed
  double processing = 0;  ///< from the first record processed until the last
  latencies lat;
  double query_seconds = 0;  ///< from the first answered query (200 or 404) until the clients stopped
};

/// Two instances of a fresh application over a fresh input topic holding `records` until both
/// processed them all; with `clients` > 0 query threads hit the first instance meanwhile.
run_result run(const std::string& bootstrap, long long records, int keys, int clients, long long max_queries,
               double max_seconds) {
  const auto app_id = "bench-http-" + std::to_string(::getpid()) + "-" + std::to_string(clients);
  const auto in = app_id + "-in";
  const std::uint16_t ports[] = {free_port(), free_port()};
  std::vector<std::unique_ptr<sluice::app>> apps;
  std::vector<std::filesystem::path> dirs;
  {
    sluice::config c;
    c.set("bootstrap.servers", bootstrap);
    sluice::topic_admin admin(c);
    admin.create_topic(in, 4);
    admin.create_topic(app_id + "-out", 4);
  }
  for (auto port : ports) {
    sluice::config c;
    c.set("bootstrap.servers", bootstrap);
    c.set("application.id", app_id);
    dirs.push_back(std::filesystem::temp_directory_path() / (app_id + "-" + std::to_string(port)));
    c.set("state.dir", dirs.back().string());
    c.set("application.server", "127.0.0.1:" + std::to_string(port));
    c.set("commit.interval.ms", "1000");  // queries see committed state: let it move often
    apps.push_back(std::make_unique<sluice::app>(count_topology(in, app_id + "-out"), c));
  }
  {
    sluice::config c;
    c.set("bootstrap.servers", bootstrap);
    sluice::topic_writer w(c);
    const std::string value(100, 'v');
    for (long long i = 0; i < records; ++i) w.send_raw(in, "k" + std::to_string(i % keys), value);
    w.flush(std::chrono::seconds(300));
  }
  run_result r;
  const auto started = clock_type::now();
  // The first instance takes every partition and starts on the backlog; the second joins
  // a moment later and takes two of them (a rebalance in both runs alike): lookups of keys of
  // its partitions are forwarded from then on.
  for (auto& a : apps) a->start();
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::atomic<long long> sent{0};
  std::vector<std::thread> threads;
  std::optional<clock_type::time_point> first_answer;
  clock_type::time_point clients_done = started;
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      client cl(ports[0]);
      std::mt19937 rng(static_cast<unsigned>(t + 1));
      const std::string self = "127.0.0.1:" + std::to_string(ports[0]);
      latencies mine;
      std::optional<clock_type::time_point> my_first;
      while (!stop.load() && sent.fetch_add(1) < max_queries && seconds_since(started) < max_seconds) {
        const auto target = "/stores/bench-counts/keys/k" + std::to_string(rng() % static_cast<unsigned>(keys));
        const auto t0 = clock_type::now();
        auto [status, served_by] = cl.get(target);
        const double ms = seconds_since(t0) * 1000;
        if (status == 200 || status == 404) {
          if (!my_first) my_first = t0;
          (served_by == self ? mine.local_ms : mine.forwarded_ms).push_back(ms);
        } else if (status == 503)
          ++mine.refused;  // starting or rebalancing: the partition is moving
        else
          ++mine.failed;
      }
      std::lock_guard lock(mutex);
      if (my_first && (!first_answer || *my_first < *first_answer)) first_answer = my_first;
      clients_done = std::max(clients_done, clock_type::now());
      r.lat.local_ms.insert(r.lat.local_ms.end(), mine.local_ms.begin(), mine.local_ms.end());
      r.lat.forwarded_ms.insert(r.lat.forwarded_ms.end(), mine.forwarded_ms.begin(), mine.forwarded_ms.end());
      r.lat.refused += mine.refused;
      r.lat.failed += mine.failed;
    });
  const auto processed = [&] {
    double n = 0;
    for (auto& a : apps) n += a->metrics().total("sluice_records_processed_total");
    return n;
  };
  std::optional<clock_type::time_point> first_processed;
  while (processed() < static_cast<double>(records) && seconds_since(started) < 600) {
    if (!first_processed && processed() > 0) first_processed = clock_type::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = seconds_since(started);
  r.processing = first_processed ? seconds_since(*first_processed) : r.seconds;
  stop = true;
  for (auto& t : threads) t.join();
  if (first_answer) r.query_seconds = std::chrono::duration<double>(clients_done - *first_answer).count();
  for (auto& a : apps) a->close();
  for (auto& d : dirs) std::filesystem::remove_all(d);
  if (processed() < static_cast<double>(records)) {
    std::fprintf(stderr, "the job did not process all %lld records within 600 s\n", records);
    std::exit(1);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bootstrap = std::getenv("SLUICE_BOOTSTRAP") ? std::getenv("SLUICE_BOOTSTRAP") : "127.0.0.1:39092";
  long long records = 1000000, max_queries = 1000000;
  int keys = 10000, clients = 2;
  double seconds = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--bootstrap")
      bootstrap = argv[i + 1];
    else if (a == "--records")
      records = std::atoll(argv[i + 1]);
    else if (a == "--keys")
      keys = std::atoi(argv[i + 1]);
    else if (a == "--clients")
      clients = std::atoi(argv[i + 1]);
    else if (a == "--max-queries")
      max_queries = std::atoll(argv[i + 1]);
    else if (a == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (records <= 0 || keys <= 0 || clients <= 0 || max_queries <= 0 || seconds <= 0) {
    std::fprintf(stderr, "--records, --keys, --clients, --max-queries and --seconds must be positive\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  auto quiet = run(bootstrap, records, keys, 0, 0, seconds);
  auto loaded = run(bootstrap, records, keys, clients, max_queries, seconds);
  const auto& l = loaded.lat;
  std::printf("records %lld over %d keys, 4 partitions, two instances in one process; %d query clients\n", records,
              keys, clients);
  const auto rate = [&](const run_result& r) { return static_cast<double>(records) / r.processing; };
  const double window = std::max(loaded.query_seconds, 1e-9);
  std::printf("job without queries: %.2f s from start, %.2f s processing = %.0f records/s\n", quiet.seconds,
              quiet.processing, rate(quiet));
  std::printf("job with queries:    %.2f s from start, %.2f s processing = %.0f records/s (ratio %.2f)\n",
              loaded.seconds, loaded.processing, rate(loaded), rate(loaded) / rate(quiet));
  std::printf("local lookups:     %zu in %.2f s = %.0f/s, p50 %.3f ms, p99 %.3f ms\n", l.local_ms.size(), window,
              static_cast<double>(l.local_ms.size()) / window, percentile(l.local_ms, 0.5),
              percentile(l.local_ms, 0.99));
  std::printf("forwarded lookups: %zu in %.2f s = %.0f/s, p50 %.3f ms, p99 %.3f ms\n", l.forwarded_ms.size(), window,
              static_cast<double>(l.forwarded_ms.size()) / window, percentile(l.forwarded_ms, 0.5),
              percentile(l.forwarded_ms, 0.99));
  std::printf("refused (503 while partitions moved): %lld, failed: %lld\n", l.refused, l.failed);
  return l.failed == 0 ? 0 : 1;
}
