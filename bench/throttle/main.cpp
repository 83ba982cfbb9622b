// sluice-bench-throttle: decisions per second and CPU per decision of sluice's throttle
// against a Redis sliding-window-log limiter in the style of seed 004, on the same records,
// with a check that every limiter made the same decision for every record.
//
//   sluice-bench-throttle [--records N] [--keys K] [--window-ms W] [--limit L] [--span-s S]
//                         [--pipeline D] [--redis-server PATH] [--seed X]
//
// Workload: N records over K keys (uniform), timestamps spread over S seconds ending at the
// wall clock, a fifth of them late by up to 5 s (out of order); one window and limit.
//
// sluice: the throttle topology (record key = throttle key) through the TopologyTestDriver,
// in-process, no broker: the CPU of the decision path, with the in-memory store and with
// RocksDB stores (driver_options::rocksdb_stores). CPU = the process's user + system time.
//
// Redis: redis-server started here on 127.0.0.1 (a free port, no persistence), one sorted
// set per key of passed effective times plus the key's last effective time, trimmed,
// counted and appended in one atomic Lua script (EVALSHA). Run once with one round trip per
// decision (as a workflow step calls it) and once pipelined (D commands in flight; Redis
// runs them in order). CPU = redis-server's CPU (from /proc) + this client's CPU.
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/topologies/throttle.hpp"

extern char** environ;

namespace {

using steady = std::chrono::steady_clock;

struct options {
  std::size_t records = 1'000'000;
  std::size_t keys = 10'000;
  std::int64_t window_ms = 60'000;
  std::int64_t limit = 3;
  std::int64_t span_s = 600;
  std::size_t pipeline = 256;
  std::string redis_server = "redis-server";
  unsigned seed = 42;
};

struct input {
  std::string key;
  std::string value;  // the record's id, decimal
  std::int64_t ts;
};

struct result {
  std::string name;
  std::vector<char> passed;  // by record id
  double wall_s = 0;
  double cpu_s = 0;
  std::string cpu_note;
};

double process_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double seconds_since(steady::time_point t0) { return std::chrono::duration<double>(steady::now() - t0).count(); }

std::vector<input> make_workload(const options& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<std::size_t> key(0, o.keys - 1);
  std::uniform_int_distribution<int> coin(0, 9), late(0, 5000);
  auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::int64_t span = o.span_s * 1000, base = now_ms - span;
  std::vector<input> out;
  out.reserve(o.records);
  for (std::size_t i = 0; i < o.records; ++i) {
    std::int64_t ts = base + span * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(o.records);
    if (coin(rng) < 2) ts -= late(rng);
    out.push_back({"key" + std::to_string(key(rng)), std::to_string(i), ts});
  }
  return out;
}

// ---- sluice ---------------------------------------------------------------------------

result run_sluice(const options& o, const std::vector<input>& in, bool rocksdb) {
  sluice::topologies::throttle_options t;
  t.window = std::chrono::milliseconds(o.window_ms);
  t.limit = o.limit;
  t.on_throttled = sluice::topologies::throttled_action::drop;
  sluice::streams_builder b;
  auto out = sluice::topologies::apply_throttle(b, b.stream<std::string, std::string>("in"), t);
  out.passed.to("passed");
  sluice::testing::driver_options d;
  d.rocksdb_stores = rocksdb;
  d.start_wall_clock_ms = in.empty() ? 0 : in.back().ts;
  sluice::testing::topology_test_driver driver(b.build(), sluice::config{}, d);
  auto topic = driver.input_topic<std::string, std::string>("in");

  result r{rocksdb ? "sluice throttle, TopologyTestDriver, RocksDB store"
                   : "sluice throttle, TopologyTestDriver, in-memory store",
           std::vector<char>(in.size(), 0)};
  std::size_t n_passed = 0;
  auto drain = [&] {
    // Output and changelog records pile up in the driver: take the decisions, drop the rest.
    for (const auto& name : driver.topics()) {
      auto& q = driver.records(name);
      if (name == "passed")
        for (const auto& m : q) {
          std::size_t id = 0;
          std::from_chars(m.value->data(), m.value->data() + m.value->size(), id);
          r.passed[id] = 1;
          ++n_passed;
        }
      q.clear();
    }
  };
  auto cpu0 = process_cpu_s();
  auto t0 = steady::now();
  for (std::size_t i = 0; i < in.size(); ++i) {
    topic.pipe(in[i].key, in[i].value, in[i].ts);
    if (i % 10'000 == 9'999) drain();
  }
  drain();
  r.wall_s = seconds_since(t0);
  r.cpu_s = process_cpu_s() - cpu0;
  r.cpu_note = "process";
  return r;
}

// ---- Redis ----------------------------------------------------------------------------

// KEYS[1] = sorted set of passed effective times (member = record id), KEYS[2] = the key's
// last effective time. ARGV = timestamp, window ms, limit, record id, TTL ms.
constexpr const char* sliding_log_lua = R"lua(
local t = tonumber(ARGV[1])
local last = redis.call('GET', KEYS[2])
if last then
  last = tonumber(last)
  if last > t then t = last end
end
local ts = string.format('%d', t)
redis.call('SET', KEYS[2], ts, 'PX', ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', t - tonumber(ARGV[2])))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ts, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
)lua";

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

class redis_server {
 public:
  explicit redis_server(const std::string& binary) : port_(free_port()) {
    std::vector<std::string> args = {
        binary,        "--port", std::to_string(port_), "--bind", "127.0.0.1",  "--save", "", "--appendonly", "no",
        "--daemonize", "no",     "--logfile",           "",       "--loglevel", "warning"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;  // its log lines would interleave with the table
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    int rc = ::posix_spawnp(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
      throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc) +
                               " (bench/throttle/run.sh installs Debian's redis-server)");
    auto deadline = steady::now() + std::chrono::seconds(10);
    while (steady::now() < deadline) {
      if (redisContext* c = redisConnect("127.0.0.1", port_); c && !c->err) {
        redisFree(c);
        return;
      } else if (c) {
        redisFree(c);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("redis-server did not accept connections on port " + std::to_string(port_));
  }
  ~redis_server() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  int port() const { return port_; }
  /// redis-server's CPU so far (user + system), from /proc/PID/stat.
  double cpu_s() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
    std::string line;
    std::getline(f, line);
    std::istringstream s(line.substr(line.rfind(')') + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; s >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) {
        stime = std::stod(field);
        break;
      }
    }
    return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

struct reply_ptr {
  redisReply* r;
  ~reply_ptr() {
    if (r) freeReplyObject(r);
  }
};

redisReply* expect_reply(redisContext* c, void* r) {
  if (!r) throw std::runtime_error(std::string("redis: ") + c->errstr);
  auto* reply = static_cast<redisReply*>(r);
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string msg = reply->str;
    freeReplyObject(reply);
    throw std::runtime_error("redis: " + msg);
  }
  return reply;
}

result run_redis(const options& o, const std::vector<input>& in, const redis_server& server, std::size_t depth) {
  redisContext* c = redisConnect("127.0.0.1", server.port());
  if (!c || c->err) throw std::runtime_error("cannot connect to redis-server");
  reply_ptr flushed{expect_reply(c, redisCommand(c, "FLUSHALL"))};
  reply_ptr loaded{expect_reply(c, redisCommand(c, "SCRIPT LOAD %s", sliding_log_lua))};
  std::string sha(loaded.r->str, loaded.r->len);
  // Keys live window + 1 h of wall clock (sluice's store: window + retention grace).
  std::string window = std::to_string(o.window_ms), limit = std::to_string(o.limit),
              ttl = std::to_string(o.window_ms + 3'600'000);

  result r{depth == 1 ? "Redis sorted-set log (Lua, EVALSHA), 1 round trip per decision"
                      : "Redis sorted-set log (Lua, EVALSHA), pipelined " + std::to_string(depth),
           std::vector<char>(in.size(), 0)};
  std::string log_key, last_key, ts;
  auto server0 = server.cpu_s();
  auto cpu0 = process_cpu_s();
  auto t0 = steady::now();
  for (std::size_t i = 0; i < in.size(); i += depth) {
    auto end = std::min(in.size(), i + depth);
    for (std::size_t j = i; j < end; ++j) {
      log_key = "log:" + in[j].key;
      last_key = "last:" + in[j].key;
      ts = std::to_string(in[j].ts);
      const char* argv[] = {"EVALSHA",  sha.c_str(),    "2",           log_key.c_str(),     last_key.c_str(),
                            ts.c_str(), window.c_str(), limit.c_str(), in[j].value.c_str(), ttl.c_str()};
      std::size_t lens[10];
      for (int k = 0; k < 10; ++k) lens[k] = std::strlen(argv[k]);
      redisAppendCommandArgv(c, 10, argv, lens);
    }
    for (std::size_t j = i; j < end; ++j) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) throw std::runtime_error(std::string("redis: ") + c->errstr);
      reply_ptr reply{expect_reply(c, raw)};
      r.passed[j] = reply.r->type == REDIS_REPLY_INTEGER && reply.r->integer == 1;
    }
  }
  r.wall_s = seconds_since(t0);
  double client = process_cpu_s() - cpu0, srv = server.cpu_s() - server0;
  r.cpu_s = client + srv;
  char note[96];
  std::snprintf(note, sizeof note, "server %.2f µs + client %.2f µs", srv * 1e6 / static_cast<double>(in.size()),
                client * 1e6 / static_cast<double>(in.size()));
  r.cpu_note = note;
  redisFree(c);
  return r;
}

// ---- the definition, for a third opinion ----------------------------------------------

std::vector<char> reference(const options& o, const std::vector<input>& in) {
  struct key_state {
    std::int64_t last = 0;
    bool seen = false;
    std::vector<std::int64_t> passed;
  };
  std::map<std::string, key_state> keys;
  std::vector<char> out(in.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i) {
    auto& k = keys[in[i].key];
    auto t = k.seen ? std::max(in[i].ts, k.last) : in[i].ts;
    k.seen = true;
    k.last = t;
    std::erase_if(k.passed, [&](std::int64_t p) { return p <= t - o.window_ms; });
    if (static_cast<std::int64_t>(k.passed.size()) < o.limit) {
      k.passed.push_back(t);
      out[i] = 1;
    }
  }
  return out;
}

std::size_t differences(const std::vector<char>& a, const std::vector<char>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--records")
      o.records = std::stoull(next());
    else if (a == "--keys")
      o.keys = std::stoull(next());
    else if (a == "--window-ms")
      o.window_ms = std::stoll(next());
    else if (a == "--limit")
      o.limit = std::stoll(next());
    else if (a == "--span-s")
      o.span_s = std::stoll(next());
    else if (a == "--pipeline")
      o.pipeline = std::stoull(next());
    else if (a == "--redis-server")
      o.redis_server = next();
    else if (a == "--seed")
      o.seed = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--help" || a == "-h") {
      std::cout << "sluice-bench-throttle [--records N] [--keys K] [--window-ms W] [--limit L] [--span-s S] "
                   "[--pipeline D] [--redis-server PATH] [--seed X]\n";
      std::exit(0);
    } else {
      throw std::runtime_error("unknown argument " + a + " (see --help)");
    }
  }
  if (o.records == 0 || o.keys == 0 || o.pipeline == 0) throw std::runtime_error("records, keys, pipeline must be > 0");
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  auto o = parse(argc, argv);
  auto in = make_workload(o);
  auto ref = reference(o, in);
  std::size_t ref_passed = 0;
  for (char p : ref) ref_passed += static_cast<std::size_t>(p);
  std::cout << o.records << " records over " << o.keys << " keys, window " << o.window_ms << " ms, limit " << o.limit
            << ", span " << o.span_s << " s; the definition passes " << ref_passed << "\n";

  std::vector<result> results;
  results.push_back(run_sluice(o, in, false));
  results.push_back(run_sluice(o, in, true));
  {
    redis_server server(o.redis_server);
    results.push_back(run_redis(o, in, server, 1));
    results.push_back(run_redis(o, in, server, o.pipeline));
  }

  std::cout << "\n| limiter | records | decisions/s | CPU µs/decision | agreement |\n|---|---|---|---|---|\n";
  bool all_agree = true;
  for (const auto& r : results) {
    auto diff_first = differences(r.passed, results.front().passed);
    auto diff_ref = differences(r.passed, ref);
    all_agree = all_agree && diff_first == 0 && diff_ref == 0;
    char line[512];
    std::snprintf(line, sizeof line, "| %s | %zu | %.0f | %.2f (%s) | %s |\n", r.name.c_str(), in.size(),
                  static_cast<double>(in.size()) / r.wall_s, r.cpu_s * 1e6 / static_cast<double>(in.size()),
                  r.cpu_note.c_str(),
                  diff_first == 0 && diff_ref == 0 ? "identical"
                                                   : (std::to_string(diff_first) + " differ from the first row, " +
                                                      std::to_string(diff_ref) + " from the definition")
                                                         .c_str());
    std::cout << line;
  }
  std::cout << (all_agree ? "\nall limiters made the same decision for every record (and match the definition)\n"
                          : "\nDISAGREEMENT: see the agreement column\n");
  return all_agree ? 0 : 2;
} catch (const std::exception& e) {
  std::cerr << "sluice-bench-throttle: " << e.what() << "\n";
  return 1;
}
