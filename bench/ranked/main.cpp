// sluice-bench-ranked: the ranked index alone (state/README.md, "Ranked index") at growing
// sizes of one index, on both backends, against Redis sorted sets and against a full scan
// of the index (Strava's approach: read every row and count the faster ones).
//
//   sluice-bench-ranked [--sizes 10000,100000,1000000] [--queries Q] [--scans S]
//                       [--redis-server PATH] [--no-redis] [--seed X]
//
// Per size N: N members with random scores (8-byte elapsed + 8-byte start + effort id, as the
// leaderboard encodes them) are upserted into one index (commit every 10,000), timed as
// upserts/s; then Q random members are asked, each timed alone: rank (position of the
// member), page (offset N/2, limit 10) and around (n = 5), reported as p50 / p99 in
// microseconds. Full scan: S ranks computed by a prefix scan of the index's kv entries
// counting the smaller scores. Redis: redis-server on 127.0.0.1 (free port, no persistence),
// one sorted set: ZADD pipelined 1,000 deep for upserts/s; ZRANK, ZRANGE by index
// (offset N/2, limit 10) and ZRANGE around ZRANK, one round trip each (latency includes
// loopback). Without hiredis at build time or with --no-redis the Redis columns are empty.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sluice/state/kv_store.hpp"
#include "sluice/state/ranked_index.hpp"
#include "sluice/state/rocksdb_store.hpp"

#if SLUICE_BENCH_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

extern char** environ;

namespace {

using steady = std::chrono::steady_clock;

struct options {
  std::vector<std::size_t> sizes{10'000, 100'000, 1'000'000};
  std::size_t queries = 20'000;
  std::size_t scans = 5;
  std::string redis_server = "redis-server";
  bool redis = true;
  std::uint64_t seed = 42;
};

struct row {
  std::string contender;
  std::size_t n = 0;
  double upserts_per_s = 0;
  double rank_p50 = 0, rank_p99 = 0, page_p50 = 0, page_p99 = 0, around_p50 = 0, around_p99 = 0;
};

std::string be64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((v >> (56 - 8 * i)) & 0xff);
  return s;
}

struct member {
  std::string user;
  std::uint64_t elapsed;
  std::string score;
};

std::vector<member> make_members(std::size_t n, std::mt19937_64& rng) {
  std::vector<member> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t elapsed = 300'000 + rng() % 3'600'000;
    std::string effort = "e" + std::to_string(i);
    out.push_back({"user" + std::to_string(i), elapsed, be64(elapsed) + be64(1'700'000'000'000 + i) + effort});
  }
  return out;
}

double micros(steady::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

std::pair<double, double> p50_p99(std::vector<double> v) {
  if (v.empty()) return {0, 0};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)]};
}

template <class F>
std::pair<double, double> time_each(std::size_t count, F&& f) {
  std::vector<double> t;
  t.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto start = steady::now();
    f(i);
    t.push_back(micros(steady::now() - start));
  }
  return p50_p99(std::move(t));
}

volatile std::uint64_t sink_value = 0;  // keeps results alive

row run_sluice(const std::string& name, std::unique_ptr<sluice::state::kv_store> kv, const std::vector<member>& ms,
               const options& o, std::mt19937_64& rng, std::optional<row>* scan_row) {
  sluice::state::memory_budget memory(std::size_t{4} << 30);  // one index: never evicted here
  sluice::state::ranked_index idx(std::move(kv), nullptr, memory);
  const std::string index = "segment-1/overall";
  row r{name, ms.size()};
  auto start = steady::now();
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    idx.upsert(index, ms[i].user, ms[i].score, 0);
    if ((i + 1) % 10'000 == 0) idx.commit(sluice::state::changelog_offset(++offset));
  }
  idx.commit(sluice::state::changelog_offset(++offset));
  (void)idx.count(index);  // the one load of the in-memory list (part of the write cost)
  r.upserts_per_s = static_cast<double>(ms.size()) / std::chrono::duration<double>(steady::now() - start).count();

  std::vector<std::size_t> picks(o.queries);
  for (auto& p : picks) p = rng() % ms.size();
  std::tie(r.rank_p50, r.rank_p99) =
      time_each(o.queries, [&](std::size_t i) { sink_value = sink_value + *idx.position(index, ms[picks[i]].user); });
  std::tie(r.page_p50, r.page_p99) =
      time_each(o.queries, [&](std::size_t) { sink_value = sink_value + idx.range(index, ms.size() / 2, 10).size(); });
  std::tie(r.around_p50, r.around_p99) = time_each(
      o.queries, [&](std::size_t i) { sink_value = sink_value + idx.around(index, ms[picks[i]].user, 5).size(); });

  if (scan_row != nullptr) {
    // Strava's way: read the whole index and count the members with a smaller score.
    row s{name + " full scan", ms.size()};
    std::string prefix;
    sluice::state::ranked_index::encode_key(index, "", prefix);
    std::tie(s.rank_p50, s.rank_p99) = time_each(o.scans, [&](std::size_t i) {
      const auto& score = ms[picks[i]].score;
      std::uint64_t smaller = 0;
      for (auto it = idx.storage().prefix(prefix); it.valid(); it.next()) smaller += it.value() < score ? 1 : 0;
      sink_value = sink_value + smaller;
    });
    *scan_row = s;
  }
  return r;
}

#if SLUICE_BENCH_HAVE_HIREDIS
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

/// redis-server on loopback for the lifetime of this object.
class redis_process {
 public:
  explicit redis_process(const std::string& binary) : port_(free_port()) {
    std::vector<std::string> args = {
        binary,         "--port", std::to_string(port_), "--bind", "127.0.0.1",  "--save", "",
        "--appendonly", "no",     "--daemonize",         "no",     "--loglevel", "warning"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    int rc = ::posix_spawnp(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
      throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc) +
                               " (bench/ranked/run.sh installs Debian's redis-server)");
    for (int i = 0; i < 200; ++i) {
      if (redisContext* c = redisConnect("127.0.0.1", port_)) {
        bool ok = !c->err;
        redisFree(c);
        if (ok) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("redis-server did not accept connections on port " + std::to_string(port_));
  }
  ~redis_process() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

redisReply* checked(redisContext* c, void* r) {
  if (r == nullptr) throw std::runtime_error(std::string("redis: ") + c->errstr);
  auto* reply = static_cast<redisReply*>(r);
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string msg = reply->str;
    freeReplyObject(reply);
    throw std::runtime_error("redis: " + msg);
  }
  return reply;
}

row run_redis(const redis_process& server, const std::vector<member>& ms, const options& o, std::mt19937_64& rng) {
  redisContext* c = redisConnect("127.0.0.1", server.port());
  if (c == nullptr || c->err) throw std::runtime_error("cannot connect to redis-server");
  freeReplyObject(checked(c, redisCommand(c, "FLUSHALL")));
  row r{"redis sorted set", ms.size()};
  const char* key = "segment-1/overall";
  constexpr std::size_t depth = 1000;
  auto start = steady::now();
  std::size_t sent = 0, received = 0;
  while (received < ms.size()) {
    while (sent < ms.size() && sent - received < depth) {
      std::string score = std::to_string(ms[sent].elapsed);
      redisAppendCommand(c, "ZADD %s %s %s", key, score.c_str(), ms[sent].user.c_str());
      ++sent;
    }
    void* reply = nullptr;
    if (redisGetReply(c, &reply) != REDIS_OK) throw std::runtime_error("redis: ZADD failed");
    freeReplyObject(checked(c, reply));
    ++received;
  }
  r.upserts_per_s = static_cast<double>(ms.size()) / std::chrono::duration<double>(steady::now() - start).count();
  std::vector<std::size_t> picks(o.queries);
  for (auto& p : picks) p = rng() % ms.size();
  std::tie(r.rank_p50, r.rank_p99) = time_each(o.queries, [&](std::size_t i) {
    auto* rep = checked(c, redisCommand(c, "ZRANK %s %s", key, ms[picks[i]].user.c_str()));
    sink_value = sink_value + static_cast<std::uint64_t>(rep->integer);
    freeReplyObject(rep);
  });
  const std::string from = std::to_string(ms.size() / 2), to = std::to_string(ms.size() / 2 + 9);
  std::tie(r.page_p50, r.page_p99) = time_each(o.queries, [&](std::size_t) {
    auto* rep = checked(c, redisCommand(c, "ZRANGE %s %s %s WITHSCORES", key, from.c_str(), to.c_str()));
    sink_value = sink_value + rep->elements;
    freeReplyObject(rep);
  });
  std::tie(r.around_p50, r.around_p99) = time_each(o.queries, [&](std::size_t i) {
    auto* rank = checked(c, redisCommand(c, "ZRANK %s %s", key, ms[picks[i]].user.c_str()));
    long long p = rank->integer;
    freeReplyObject(rank);
    auto lo = std::to_string(std::max(0LL, p - 5)), hi = std::to_string(p + 5);
    auto* rep = checked(c, redisCommand(c, "ZRANGE %s %s %s WITHSCORES", key, lo.c_str(), hi.c_str()));
    sink_value = sink_value + rep->elements;
    freeReplyObject(rep);
  });
  redisFree(c);
  return r;
}
#endif

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    out.push_back(std::stoull(text.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

void print(const row& r) {
  auto pair = [](double p50, double p99) {
    if (p50 == 0 && p99 == 0) return std::string("-");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f / %.2f", p50, p99);
    return std::string(buf);
  };
  std::string upserts = r.upserts_per_s > 0 ? std::to_string(static_cast<long long>(r.upserts_per_s)) : "-";
  std::printf("| %s | %zu | %s | %s | %s | %s |\n", r.contender.c_str(), r.n, upserts.c_str(),
              pair(r.rank_p50, r.rank_p99).c_str(), pair(r.page_p50, r.page_p99).c_str(),
              pair(r.around_p50, r.around_p99).c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes")
      o.sizes = parse_sizes(next());
    else if (a == "--queries")
      o.queries = std::stoull(next());
    else if (a == "--scans")
      o.scans = std::stoull(next());
    else if (a == "--redis-server")
      o.redis_server = next();
    else if (a == "--no-redis")
      o.redis = false;
    else if (a == "--seed")
      o.seed = std::stoull(next());
    else {
      std::cerr << "usage: sluice-bench-ranked [--sizes 10000,100000,1000000] [--queries Q] [--scans S] "
                   "[--redis-server PATH] [--no-redis] [--seed X]\n";
      return a == "--help" ? 0 : 2;
    }
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sluice-bench-ranked-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  sluice::state::rocksdb_environment env({.memory_budget_bytes = std::size_t{512} << 20});
#if SLUICE_BENCH_HAVE_HIREDIS
  std::unique_ptr<redis_process> redis;
  if (o.redis) redis = std::make_unique<redis_process>(o.redis_server);
#endif
  std::printf("| contender | members | upserts/s | rank p50 / p99 µs | page p50 / p99 µs | around p50 / p99 µs |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  int store_no = 0;
  for (auto n : o.sizes) {
    std::mt19937_64 rng(o.seed + n);
    auto ms = make_members(n, rng);
    std::optional<row> scan;
    print(run_sluice("sluice in-memory", sluice::state::open_memory_store({.name = "m" + std::to_string(store_no++)}),
                     ms, o, rng, nullptr));
    print(
        run_sluice("sluice RocksDB",
                   sluice::state::open_rocksdb_store({.name = "r" + std::to_string(store_no++), .directory = dir}, env),
                   ms, o, rng, &scan));
    print(*scan);
#if SLUICE_BENCH_HAVE_HIREDIS
    if (redis) print(run_redis(*redis, ms, o, rng));
#endif
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
