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
//   sluice-bench-tool load-efforts --bootstrap B --topic T --partitions P --records N --segments S
//                                  --users U [--updates 0.10 --deletes 0.02 --stale 0.05 --seed X]
//       the leaderboard's input (topologies/leaderboard/README.md): N effort events keyed by
//       segment over S segments and U users, attribute gender; a share are updates (a newer
//       version of an earlier effort), deletes (a newer version, deleted), and stale events (an
//       older version of an effort than one already written: out of order, ignored). Replays
//       the events through a model of the job and prints {"records":N,"expected_updates":M,...}.
//   sluice-bench-tool verify --leaderboard --topic T --expect M (+ the load-efforts options)
//       reads the job's updates topic until M records arrived, lingers, then checks: exactly M,
//       and the last update of every (segment, board, user) equals the model's final entry
//       (effort, elapsed, start) or null, and every entry of the model had an update.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <tuple>
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
      value = "{\"id\":" + std::to_string(i) + ",\"workflow\":\"wf" + std::to_string(k % 100) +
              "\",\"recipient\":\"user" + std::to_string(k) + "\",\"tenant\":\"t" + std::to_string(k % 8) +
              "\",\"channel\":\"email\",\"body\":\"";
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
  std::printf(
      "{\"count\":%lld,\"expect\":%lld,\"passed\":%lld,\"throttled\":%lld,\"bad_values\":%lld,"
      "\"duplicates\":%lld,\"missing\":%lld,\"wrong_decisions\":%lld,\"done_at\":%.3f,\"ok\":%s}\n",
      count, expect, passed, count - passed, bad_values, duplicates, missing, wrong_decisions, done_at,
      ok ? "true" : "false");
  return ok ? 0 : 1;
}

// ---- the leaderboard workload: generator and model ------------------------------------------

struct effort_workload {
  long long records = 0, segments = 1000, users = 200000;
  double updates = 0.10, deletes = 0.02, stale = 0.05;
  std::uint64_t seed = 7;
};

effort_workload effort_args(const std::map<std::string, std::string>& a) {
  effort_workload w;
  w.records = num(a, "records", 1000);
  w.segments = num(a, "segments", 1000);
  w.users = num(a, "users", 200000);
  if (a.contains("updates")) w.updates = std::atof(a.at("updates").c_str());
  if (a.contains("deletes")) w.deletes = std::atof(a.at("deletes").c_str());
  if (a.contains("stale")) w.stale = std::atof(a.at("stale").c_str());
  w.seed = static_cast<std::uint64_t>(num(a, "seed", 7));
  return w;
}

struct effort_event {
  std::uint32_t effort, segment, user;
  std::int64_t elapsed, started, version;
  bool deleted;
};

/// Calls sink(event) for each of the workload's events in the order they are written. The
/// same workload gives the same events.
template <class Sink>
void generate_efforts(const effort_workload& w, Sink&& sink) {
  struct known {
    std::uint32_t segment, user;
    std::int64_t latest;
  };
  std::vector<known> efforts;
  efforts.reserve(static_cast<std::size_t>(w.records));
  std::mt19937_64 rng(w.seed);
  std::uniform_real_distribution<double> kind(0.0, 1.0);
  auto elapsed = [&] { return static_cast<std::int64_t>(300'000 + rng() % 3'600'000); };
  auto started = [&] { return static_cast<std::int64_t>(1'700'000'000'000 + rng() % 2'592'000'000); };
  for (long long i = 0; i < w.records; ++i) {
    const double k = kind(rng);
    if (efforts.empty() || k >= w.updates + w.deletes + w.stale) {
      known e{static_cast<std::uint32_t>(rng() % static_cast<std::uint64_t>(w.segments)),
              static_cast<std::uint32_t>(rng() % static_cast<std::uint64_t>(w.users)), 1};
      efforts.push_back(e);
      sink(effort_event{static_cast<std::uint32_t>(efforts.size() - 1), e.segment, e.user, elapsed(), started(), 1,
                        false});
      continue;
    }
    const auto id = static_cast<std::uint32_t>(rng() % efforts.size());
    auto& e = efforts[id];
    if (k < w.updates) {
      sink(effort_event{id, e.segment, e.user, elapsed(), started(), ++e.latest, false});
    } else if (k < w.updates + w.deletes) {
      sink(effort_event{id, e.segment, e.user, elapsed(), started(), ++e.latest, true});
    } else {  // out of order: a version at or below one already written (a duplicate when 1)
      const std::int64_t v =
          e.latest > 1 ? 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(e.latest - 1)) : 1;
      sink(effort_event{id, e.segment, e.user, elapsed(), started(), v, false});
    }
  }
}

const char* gender_of(std::uint32_t user) { return user % 2 == 0 ? "F" : "M"; }

/// The job's semantics (topologies/leaderboard/README.md) on the generated events, per
/// (segment, board, user): boards overall (0) and gender=<F|M> (1); an entry is the best live
/// effort by (elapsed, started, effort id as text). Counts the update records the job writes:
/// one per change of an entry.
class leaderboard_model {
 public:
  struct score {
    std::int64_t elapsed, started;
    std::uint32_t effort;
    friend bool operator==(const score&, const score&) = default;
  };
  static bool less(const score& a, const score& b) {
    if (a.elapsed != b.elapsed) return a.elapsed < b.elapsed;
    if (a.started != b.started) return a.started < b.started;
    return std::to_string(a.effort) < std::to_string(b.effort);  // "e<n>" compared as text
  }
  static std::uint64_t key(std::uint32_t segment, int board, std::uint32_t user) {
    return (std::uint64_t{segment} << 33) | (std::uint64_t(board) << 32) | user;
  }

  void apply(const effort_event& e) {
    if (e.effort >= efforts_.size()) efforts_.resize(e.effort + 1);
    auto& st = efforts_[e.effort];
    if (st.version != 0 && e.version <= st.version) {
      ++stale_;
      return;
    }
    const bool was_live = st.live;
    const score old_score = st.s;
    const score new_score{e.elapsed, e.started, e.effort};
    for (int board = 0; board < 2; ++board) {  // the gender never changes: same boards
      auto& list = efforts_of_[key(e.segment, board, e.user)];
      if (was_live) list.erase(std::find(list.begin(), list.end(), old_score));
      if (!e.deleted) list.push_back(new_score);
      std::optional<score> best;
      for (const auto& c : list)
        if (!best || less(c, *best)) best = c;
      auto& cur = entry_[key(e.segment, board, e.user)];
      if (cur != best) {
        ++updates_;
        cur = best;
      }
    }
    st.version = e.version;
    st.live = !e.deleted;
    st.s = new_score;
  }

  long long updates() const { return updates_; }
  long long stale() const { return stale_; }
  const std::unordered_map<std::uint64_t, std::optional<score>>& entries() const { return entry_; }

 private:
  struct effort_state {
    std::int64_t version = 0;
    bool live = false;
    score s{};
  };
  std::vector<effort_state> efforts_;
  std::unordered_map<std::uint64_t, std::vector<score>> efforts_of_;
  std::unordered_map<std::uint64_t, std::optional<score>> entry_;
  long long updates_ = 0, stale_ = 0;
};

int load_efforts(const std::map<std::string, std::string>& a, sluice::config& cfg) {
  const auto w = effort_args(a);
  const auto topic = a.at("topic");
  sluice::topic_admin admin(cfg);
  admin.create_topic(topic, static_cast<int>(num(a, "partitions", 4)));
  if (a.contains("also-create")) {
    std::stringstream ss(a.at("also-create"));
    for (std::string t; std::getline(ss, t, ',');)
      if (!t.empty()) admin.create_topic(t, static_cast<int>(num(a, "partitions", 4)));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto now_ms = static_cast<std::int64_t>(epoch_now() * 1000);
  sluice::topic_writer writer(cfg);
  leaderboard_model model;
  long long deletes = 0, events = 0;
  std::string key, value;
  generate_efforts(w, [&](const effort_event& e) {
    key = "s" + std::to_string(e.segment);
    value = "{\"effort_id\":\"e" + std::to_string(e.effort) + "\",\"segment_id\":\"" + key + "\",\"user_id\":\"u" +
            std::to_string(e.user) + "\",\"elapsed_ms\":" + std::to_string(e.elapsed) +
            ",\"started_at_ms\":" + std::to_string(e.started) + ",\"version\":" + std::to_string(e.version) +
            ",\"deleted\":" + (e.deleted ? "true" : "false") + ",\"attributes\":{\"gender\":\"" + gender_of(e.user) +
            "\"}}";
    writer.send_raw(topic, std::string_view(key), std::string_view(value), now_ms);
    model.apply(e);
    deletes += e.deleted;
    ++events;
  });
  writer.flush(std::chrono::minutes(10));
  std::printf("{\"records\":%lld,\"expected_updates\":%lld,\"stale\":%lld,\"deletes\":%lld,\"seconds\":%.3f}\n", events,
              model.updates(), model.stale(), deletes,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

/// The text of `"field":` in `v` from `from` on, up to the next ',' or '}' (strings unquoted).
std::string_view json_field(std::string_view v, std::string_view field, std::size_t from = 0) {
  const std::string needle = "\"" + std::string(field) + "\":";
  auto at = v.find(needle, from);
  if (at == std::string_view::npos) return {};
  at += needle.size();
  if (at < v.size() && v[at] == '"') {
    auto end = v.find('"', at + 1);
    return end == std::string_view::npos ? std::string_view{} : v.substr(at + 1, end - at - 1);
  }
  auto end = v.find_first_of(",}", at);
  return v.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
}

int verify_leaderboard(const std::map<std::string, std::string>& a, sluice::config& cfg) {
  const long long expect = num(a, "expect", 0);
  sluice::topic_reader reader(cfg, {a.at("topic")}, sluice::isolation::read_committed);
  std::unordered_map<std::string, std::string> last;  // "segment/board/user" -> the last "current" text
  long long count = 0, bad_values = 0;
  auto take = [&](std::vector<sluice::raw_message>&& batch) {
    for (auto& m : batch) {
      ++count;
      const std::string_view v = m.value ? std::string_view(*m.value) : std::string_view{};
      const auto segment = json_field(v, "segment_id"), board = json_field(v, "board"), user = json_field(v, "user_id");
      const auto current = v.find("\"current\":");
      if (segment.empty() || board.empty() || user.empty() || current == std::string_view::npos || m.key != segment) {
        ++bad_values;
        continue;
      }
      std::string k;
      k.append(segment).append("/").append(board).append("/").append(user);
      last[std::move(k)] = std::string(v.substr(current + 10));
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
  // The model's final boards, compared with the last update of every (segment, board, user).
  leaderboard_model model;
  generate_efforts(effort_args(a), [&](const effort_event& e) { model.apply(e); });
  long long wrong_entries = 0, missing = 0, entries = 0;
  for (const auto& [k, best] : model.entries()) {
    const auto segment = static_cast<std::uint32_t>(k >> 33);
    const int board = static_cast<int>((k >> 32) & 1);
    const auto user = static_cast<std::uint32_t>(k & 0xffffffffu);
    const std::string name = "s" + std::to_string(segment) + "/" +
                             (board == 0 ? std::string("overall") : std::string("gender=") + gender_of(user)) + "/u" +
                             std::to_string(user);
    auto it = last.find(name);
    if (it == last.end()) {
      missing += best.has_value();  // never on the board: no update is right
      continue;
    }
    ++entries;
    const std::string_view cur = it->second;
    if (!best) {
      wrong_entries += !cur.starts_with("null");
      continue;
    }
    const bool same = json_field(cur, "effort_id") == "e" + std::to_string(best->effort) &&
                      json_field(cur, "elapsed_ms") == std::to_string(best->elapsed) &&
                      json_field(cur, "started_at_ms") == std::to_string(best->started);
    wrong_entries += !same;
  }
  const long long unknown = static_cast<long long>(last.size()) - entries;  // updates for entries the model never had
  const bool ok = count == expect && expect == model.updates() && bad_values == 0 && wrong_entries == 0 &&
                  missing == 0 && unknown == 0;
  std::printf(
      "{\"count\":%lld,\"expect\":%lld,\"model_updates\":%lld,\"bad_values\":%lld,\"entries\":%lld,"
      "\"wrong_entries\":%lld,\"missing\":%lld,\"unknown\":%lld,\"done_at\":%.3f,\"ok\":%s}\n",
      count, expect, model.updates(), bad_values, entries, wrong_entries, missing, unknown, done_at,
      ok ? "true" : "false");
  return ok ? 0 : 1;
}

int verify(const std::map<std::string, std::string>& a, sluice::config& cfg) {
  if (a.contains("throttled-topic")) return verify_throttle(a, cfg);
  if (a.contains("leaderboard")) return verify_leaderboard(a, cfg);
  long long expect = num(a, "expect", 0), keys = num(a, "keys", 0), records = num(a, "records", expect);
  auto format = a.contains("format") ? a.at("format") : std::string("be64");
  const bool check_values = !(a.contains("values") && a.at("values") == "any");
  auto timeout = std::chrono::seconds(num(a, "timeout-s", 600));
  auto linger = std::chrono::seconds(num(a, "linger-s", 2));
  sluice::topic_reader reader(cfg, {a.at("topic")}, sluice::isolation::read_committed);
  long long count = 0, bad_values = 0;
  std::unordered_map<std::string, long long> last;
  double done_at = 0, first_at = 0;  // first_at: when the first record arrived
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // Records are lent, not copied, and their headers not read: on a shared host the checker's
  // CPU competes with the contender it measures (bench/README.md, "The checker reads records lent").
  auto check = [&](const sluice::raw_view& m) {
    if (first_at == 0) first_at = epoch_now();
    ++count;
    const std::string_view v = m.value.value_or(std::string_view());
    if (keys > 0) {
      long long n = 0;
      if (format == "be64" && v.size() == 8) {
        for (unsigned char c : v) n = (n << 8) | c;
      } else if (format == "decimal") {
        std::from_chars(v.data(), v.data() + v.size(), n);
      } else {
        ++bad_values;
      }
      last[std::string(m.key.value_or(std::string_view()))] = n;
    } else if (check_values) {
      for (char c : v)
        if (c >= 'a' && c <= 'z') {
          ++bad_values;
          break;
        }
    }
  };
  while (count < expect && std::chrono::steady_clock::now() < deadline)
    reader.poll_views(std::chrono::milliseconds(100), check);
  done_at = epoch_now();
  if (count >= expect) {
    auto linger_end = std::chrono::steady_clock::now() + linger;
    while (std::chrono::steady_clock::now() < linger_end) reader.poll_views(std::chrono::milliseconds(100), check);
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
  std::printf(
      "{\"count\":%lld,\"expect\":%lld,\"bad_values\":%lld,\"wrong_keys\":%lld,\"first_at\":%.3f,"
      "\"done_at\":%.3f,\"ok\":%s}\n",
      count, expect, bad_values, wrong_keys, first_at, done_at, ok ? "true" : "false");
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
    if (cmd == "load-efforts") return load_efforts(a, cfg);
    if (cmd == "verify") return verify(a, cfg);
    std::fprintf(stderr, "unknown command %s\n", argv[1]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-bench-tool: %s\n", e.what());
    return 1;
  }
}
