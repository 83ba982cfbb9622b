// sluice-bench-tool: the loader and the checker of bench/run.
//
//   sluice-bench-tool load   --bootstrap B --topic T --partitions P --records N --keys K --value-bytes S
//       creates T (and --also-create topics, comma-separated) and writes N records: key "k<i % K>",
//       a value of S lower-case letters. Prints {"records":N,"seconds":s}.
//       [--value-format json]: the value is a notification of about S bytes,
//       {"id":i,"workflow":"wf<k % 100>","recipient":"user<k>","tenant":..,"channel":..,"body":..}
//       (k = i % K, so the key fields identify the record key). [--span-s S]: timestamps spread
//       over S seconds ending now, a fifth of the records up to 5 s late (out of order).
//   sluice-bench-tool verify --bootstrap B --topic T --expect N [--keys K --records R --format be64|decimal]
//                            [--timeout-s S] [--linger-s S]
//       reads T read_committed until N records arrived (or the timeout), prints the epoch time
//       at which they had, then lingers to catch extra records. Passthrough check: every value
//       upper-case. Count check (--keys): the last value per key equals the reference count of R
//       records over K keys. [--values any]: no value check (jobs that pass values through
//       unchanged, e.g. the overflow buffer). Prints one JSON line; exit 0 when correct.
//   sluice-bench-tool verify ... --throttled-topic T2 --window-ms W --limit L
//       throttle check: reads T (passed) and T2 (throttled) until N decisions arrived; every id
//       of the json load exactly once, every throttled record with its reason header, and each
//       decision the one the sliding-window definition gives (replayed per key in id order).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::map<std::string, std::string> parse(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 2; i + 1 < argc; i += 2) a[std::string(argv[i]).substr(2)] = argv[i + 1];
  return a;
}

long long num(const std::map<std::string, std::string>& a, const std::string& k, long long d) {
  auto it = a.find(k);
  return it == a.end() ? d : std::atoll(it->second.c_str());
}

int load(const std::map<std::string, std::string>& a, sluice::config& cfg) {
  auto topic = a.at("topic");
  int partitions = static_cast<int>(num(a, "partitions", 4));
  long long records = num(a, "records", 1000), keys = num(a, "keys", 10000), size = num(a, "value-bytes", 100);
  const bool json = a.contains("value-format") && a.at("value-format") == "json";
  const long long span_ms = num(a, "span-s", 0) * 1000;
  sluice::topic_admin admin(cfg);
  admin.create_topic(topic, partitions);
  if (a.contains("also-create")) {
    std::stringstream ss(a.at("also-create"));
    for (std::string t; std::getline(ss, t, ',');)
      if (!t.empty()) admin.create_topic(t, partitions);
  }
  auto start = std::chrono::steady_clock::now();
  const auto now_ms = static_cast<std::int64_t>(epoch_now() * 1000);
  sluice::topic_writer w(cfg);
  std::string key, value(static_cast<std::size_t>(size), 'a');
  std::uint64_t lateness = 42;  // a fixed xorshift sequence: the same records every run
  for (long long i = 0; i < records; ++i) {
    const long long k = i % keys;
    key = "k" + std::to_string(k);
    if (json) {
      value = "{\"id\":" + std::to_string(i) + ",\"workflow\":\"wf" + std::to_string(k % 100) + "\",\"recipient\":\"user" +
              std::to_string(k) + "\",\"tenant\":\"t" + std::to_string(k % 8) + "\",\"channel\":\"email\",\"body\":\"";
      value.append(static_cast<std::size_t>(std::max(0LL, size - static_cast<long long>(value.size()) - 2)),
                   static_cast<char>('a' + i % 26));
      value += "\"}";
    } else {
      value[static_cast<std::size_t>(i % size)] = static_cast<char>('a' + i % 26);
    }
    // Current timestamps: the broker's 7-day time retention would delete old ones mid-run.
    std::int64_t ts = now_ms;
    if (span_ms > 0) {
      ts = now_ms - span_ms + span_ms * i / records;
      lateness ^= lateness << 13;
      lateness ^= lateness >> 7;
      lateness ^= lateness << 17;
      if (lateness % 5 == 0) ts -= static_cast<std::int64_t>(lateness / 5 % 5001);
    }
    w.send_raw(topic, std::string_view(key), std::string_view(value), ts);
  }
  w.flush(std::chrono::minutes(10));
  std::printf("{\"records\":%lld,\"seconds\":%.3f}\n", records,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

// The throttle job's decisions for the json load: passed records in `topic`, throttled ones
// (with the reason header) in `throttled-topic`. Reads until `expect` decisions arrived, then
// replays each key's decisions in id order (the order the loader wrote them, hence the order
// of the key's partition) through the definition in topologies/throttle/README.md.
int verify_throttle(const std::map<std::string, std::string>& a, sluice::config& cfg) {
  struct decision {
    long long id;
    std::int64_t ts;
    bool passed;
  };
  const long long expect = num(a, "expect", 0), window = num(a, "window-ms", 60000), limit = num(a, "limit", 1);
  const auto passed_topic = a.at("topic");
  sluice::topic_reader reader(cfg, {passed_topic, a.at("throttled-topic")}, sluice::isolation::read_committed);
  std::unordered_map<std::string, std::vector<decision>> by_key;
  long long count = 0, passed = 0, bad_values = 0;
  auto take = [&](std::vector<sluice::raw_message>&& batch) {
    for (auto& m : batch) {
      ++count;
      const bool pass = m.topic == passed_topic;
      passed += pass;
      const std::string v = m.value.value_or("");
      long long id = -1;
      if (v.starts_with("{\"id\":")) std::from_chars(v.data() + 6, v.data() + v.size(), id);
      const bool has_reason = m.headers.last("sluice-throttle-reason") != nullptr;
      if (id < 0 || has_reason == pass) ++bad_values;
      by_key[m.key.value_or("")].push_back({id, m.timestamp, pass});
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(num(a, "timeout-s", 600));
  while (count < expect && std::chrono::steady_clock::now() < deadline)
    take(reader.poll(std::chrono::milliseconds(100)));
  const double done_at = epoch_now();
  if (count >= expect) {
    const auto linger_end = std::chrono::steady_clock::now() + std::chrono::seconds(num(a, "linger-s", 2));
    while (std::chrono::steady_clock::now() < linger_end) take(reader.poll(std::chrono::milliseconds(100)));
  }
  long long duplicates = 0, wrong_decisions = 0;
  std::vector<char> seen(static_cast<std::size_t>(std::max(0LL, expect)), 0);
  for (auto& [key, decisions] : by_key) {
    std::sort(decisions.begin(), decisions.end(), [](const decision& x, const decision& y) { return x.id < y.id; });
    std::int64_t last = 0;
    bool first = true;
    std::vector<std::int64_t> window_passes;  // effective times of passes, oldest first
    std::size_t head = 0;
    for (const auto& d : decisions) {
      if (d.id >= 0 && d.id < expect) {
        if (seen[static_cast<std::size_t>(d.id)]++) ++duplicates;
      }
      const std::int64_t t = first ? d.ts : std::max(d.ts, last);
      first = false;
      last = t;
      while (head < window_passes.size() && window_passes[head] <= t - window) ++head;
      const bool should_pass = static_cast<long long>(window_passes.size() - head) < limit;
      if (should_pass) window_passes.push_back(t);
      wrong_decisions += should_pass != d.passed;
    }
  }
  const long long missing = static_cast<long long>(std::count(seen.begin(), seen.end(), 0));
  const bool ok = count == expect && bad_values == 0 && duplicates == 0 && missing == 0 && wrong_decisions == 0;
  std::printf("{\"count\":%lld,\"expect\":%lld,\"passed\":%lld,\"throttled\":%lld,\"bad_values\":%lld,"
              "\"duplicates\":%lld,\"missing\":%lld,\"wrong_decisions\":%lld,\"done_at\":%.3f,\"ok\":%s}\n",
              count, expect, passed, count - passed, bad_values, duplicates, missing, wrong_decisions, done_at,
              ok ? "true" : "false");
  return ok ? 0 : 1;
}

int verify(const std::map<std::string, std::string>& a, sluice::config& cfg) {
  if (a.contains("throttled-topic")) return verify_throttle(a, cfg);
  long long expect = num(a, "expect", 0), keys = num(a, "keys", 0), records = num(a, "records", expect);
  auto format = a.contains("format") ? a.at("format") : std::string("be64");
  const bool check_values = !(a.contains("values") && a.at("values") == "any");
  auto timeout = std::chrono::seconds(num(a, "timeout-s", 600));
  auto linger = std::chrono::seconds(num(a, "linger-s", 2));
  sluice::topic_reader reader(cfg, {a.at("topic")}, sluice::isolation::read_committed);
  long long count = 0, bad_values = 0;
  std::unordered_map<std::string, long long> last;
  double done_at = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto take = [&](std::vector<sluice::raw_message>&& batch) {
    for (auto& m : batch) {
      ++count;
      const std::string v = m.value.value_or("");
      if (keys > 0) {
        long long n = 0;
        if (format == "be64" && v.size() == 8) {
          for (unsigned char c : v) n = (n << 8) | c;
        } else if (format == "decimal") {
          n = std::atoll(v.c_str());
        } else {
          ++bad_values;
        }
        last[m.key.value_or("")] = n;
      } else if (check_values) {
        for (char c : v)
          if (c >= 'a' && c <= 'z') { ++bad_values; break; }
      }
    }
  };
  while (count < expect && std::chrono::steady_clock::now() < deadline)
    take(reader.poll(std::chrono::milliseconds(100)));
  done_at = epoch_now();
  if (count >= expect) {
    auto linger_end = std::chrono::steady_clock::now() + linger;
    while (std::chrono::steady_clock::now() < linger_end) take(reader.poll(std::chrono::milliseconds(100)));
  }
  long long wrong_keys = 0;
  if (keys > 0) {
    for (long long k = 0; k < keys; ++k) {
      long long want = records / keys + (k < records % keys ? 1 : 0);
      auto it = last.find("k" + std::to_string(k));
      if (want > 0 && (it == last.end() || it->second != want)) ++wrong_keys;
    }
  }
  bool ok = count == expect && bad_values == 0 && wrong_keys == 0;
  std::printf("{\"count\":%lld,\"expect\":%lld,\"bad_values\":%lld,\"wrong_keys\":%lld,\"done_at\":%.3f,\"ok\":%s}\n",
              count, expect, bad_values, wrong_keys, done_at, ok ? "true" : "false");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s load|verify --bootstrap B ...\n", argv[0]);
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  auto a = parse(argc, argv);
  sluice::config cfg;
  cfg.set("bootstrap.servers", a.contains("bootstrap") ? a.at("bootstrap") : "127.0.0.1:39092");
  cfg.set("application.id", "sluice-bench-tool");
  try {
    std::string cmd = argv[1];
    if (cmd == "load") return load(a, cfg);
    if (cmd == "verify") return verify(a, cfg);
    std::fprintf(stderr, "unknown command %s\n", argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-bench-tool: %s\n", e.what());
    return 1;
  }
}
