// State stores against a real broker: restart after kill -9 replays only the changelog
// tail, a deleted state directory is rebuilt byte for byte, an aborted transaction leaves
// no trace, and global tables are complete before the first input record.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "broker_env.hpp"
#include "scratch_dir.hpp"
#include "kafka/consumer.hpp"
#include "sluice/sluice.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "word_count/topology.hpp"

extern char** environ;

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using clock_type = std::chrono::steady_clock;
/// task id -> key -> value, bytes as stored.
using store_contents = std::map<std::string, std::map<std::string, std::string>>;

sluice::config base_config(const std::string& app_id, const fs::path& state_dir) {
  sluice::config c;
  c.set("bootstrap.servers", sluice::test::broker_bootstrap());
  c.set("application.id", app_id);
  c.set("state.dir", state_dir.string());
  return c;
}

fs::path fresh_state_dir() { return sluice::test::scratch_path("sluice-state"); }

/// Every task's copy of `store` under <state_dir>/<app_id>/<task>/<store>, read through the
/// store implementation (the app must be closed). The stores read are aggregations', kept
/// timestamped: opened as plain, a store holding timestamped values would wipe itself.
store_contents read_stores(const fs::path& state_dir, const std::string& app_id, const std::string& store) {
  store_contents out;
  sluice::state::rocksdb_environment env;
  for (const auto& task : fs::directory_iterator(state_dir / app_id)) {
    if (!fs::exists(task.path() / store)) continue;
    sluice::state::store_options o;
    o.name = store;
    o.directory = task.path();
    o.format = sluice::state::value_format::timestamped;
    auto s = sluice::state::open_rocksdb_store(o, env);
    auto& entries = out[task.path().filename().string()];
    for (auto it = s->all(); it.valid(); it.next()) entries.emplace(std::string(it.key()), std::string(it.value()));
    s->close();
  }
  return out;
}

std::size_t entry_count(const store_contents& c) {
  std::size_t n = 0;
  for (const auto& [task, entries] : c) n += entries.size();
  return n;
}

/// Sum of the end offsets of every partition of `topic`.
std::int64_t topic_size(const std::string& topic, int partitions) {
  sluice::kafka::consumer c({{"bootstrap.servers", sluice::test::broker_bootstrap()}});
  std::int64_t sum = 0;
  for (int p = 0; p < partitions; ++p) sum += c.watermarks(topic, p, 30s).second;
  return sum;
}

/// Waits until `pred` holds or `timeout` passes; returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout, std::chrono::milliseconds step = 100ms) {
  auto deadline = clock_type::now() + timeout;
  while (clock_type::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

/// A job process with stdout and stderr in a log file.
class job_process {
 public:
  job_process(const std::vector<std::string>& args, const fs::path& log) : log_(log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawn " + args[0] + " failed: " + std::to_string(rc));
  }
  ~job_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  int kill_and_wait(int sig) {
    ::kill(pid_, sig);
    return wait();
  }
  /// Exit code, or 128 + signal.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

/// Restored records per (task, partition) from the runtime's "restored store" log lines.
std::map<std::string, std::int64_t> restored_from_log(const std::string& log, const std::string& store) {
  std::map<std::string, std::int64_t> out;
  std::regex line("restored store '" + store + "' partition ([0-9]+) of task ([0-9_]+): ([0-9]+) records");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
    out[(*it)[2].str()] += std::stoll((*it)[3].str());
  return out;
}

/// True when every task the job's log says is restoring ("task 1_2: restoring N store
/// partition(s)") has logged as many "restored store ..." lines: the job's stores have
/// caught up with their changelogs and it processes again.
bool restores_finished(const std::string& log) {
  std::map<std::string, std::int64_t> pending;
  std::regex started("task ([0-9_]+): restoring ([0-9]+) store partition");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), started); it != std::sregex_iterator(); ++it)
    pending[(*it)[1].str()] += std::stoll((*it)[2].str());
  std::regex done("restored store '[^']+' partition [0-9]+ of task ([0-9_]+):");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), done); it != std::sregex_iterator(); ++it)
    --pending[(*it)[1].str()];
  for (const auto& [task, n] : pending)
    if (n > 0) return false;
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------------------

TEST(state, restart_after_sigkill_replays_only_the_changelog_tail) {
  SLUICE_REQUIRE_BROKER();
  constexpr int partitions = 4, records = 1000000, vocabulary = 150000, kills = 6;
  auto app_id = sluice::test::unique_name("crash-wc");
  auto in = app_id + "-lines", out = app_id + "-counts";
  auto changelog = app_id + "-word-counts-changelog";
  auto state_dir = fresh_state_dir();
  auto cfg = base_config(app_id, state_dir);
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, partitions);
  admin.create_topic(out, partitions);

  // One token per line: 1,000,000 input records and as many word records, over 150,000 words.
  std::map<std::string, std::int64_t> expected;
  {
    std::mt19937 rng(11);
    sluice::topic_writer w(cfg);
    for (int i = 0; i < records; ++i) {
      auto word = "w" + std::to_string(rng() % vocabulary);
      ++expected[word];
      w.send_raw(in, std::nullopt, word, 1700000000000 + i);
    }
    w.flush(120s);
  }

  std::vector<std::string> args = {SLUICE_WORD_COUNT_BINARY,
                                   "--set",
                                   "bootstrap.servers=" + sluice::test::broker_bootstrap(),
                                   "--set",
                                   "application.id=" + app_id,
                                   "--set",
                                   "processing.guarantee=exactly_once",
                                   "--set",
                                   "state.dir=" + state_dir.string(),
                                   "--set",
                                   "input.topic=" + in,
                                   "--set",
                                   "output.topic=" + out};
  sluice::topic_reader reader(cfg, {out}, sluice::isolation::read_committed);
  std::map<std::string, std::int64_t> counts;
  std::size_t outputs = 0;
  auto read_outputs = [&](std::chrono::milliseconds t) {
    auto got = reader.poll(t);
    for (const auto& m : got) {
      auto& c = counts[*m.key];
      c = std::max(c, sluice::int64_serde::deserialize(*m.value));
    }
    outputs += got.size();
    return got.size();
  };

  struct crash {
    std::size_t keys_at_kill;        // distinct words in committed outputs when killed
    std::int64_t changelog_at_kill;  // sum of changelog end offsets when killed
    std::int64_t restored;           // records restored by the next run
    std::map<std::string, std::int64_t> per_task;
  };
  std::vector<crash> crashes;
  std::mt19937 rng(5);
  for (int run = 0; run <= kills; ++run) {
    auto log = state_dir.string() + "-run" + std::to_string(run) + ".log";
    job_process job(args, log);
    if (run > 0) {
      // The restore of the previous crash's tail happens first; processing resumes after it.
      auto& c = crashes.back();
      auto before = outputs;
      ASSERT_TRUE(eventually(
          [&] {
            read_outputs(200ms);
            return outputs > before + 1000 || counts == expected;
          },
          180s))
          << "run " << run << " made no progress after a restart; log " << log;
      // The outputs may be complete already (the previous run processed everything): the
      // stores are compared below, so the restore must have finished before the next signal.
      ASSERT_TRUE(eventually([&] { return restores_finished(job.log()); }, 180s))
          << "run " << run << " did not finish restoring; log " << log;
      c.per_task = restored_from_log(job.log(), "word-counts");
      c.restored = 0;
      for (auto& [t, n] : c.per_task) c.restored += n;
    }
    if (run == kills) {
      ASSERT_TRUE(eventually(
          [&] {
            read_outputs(300ms);
            return counts == expected;
          },
          600s))
          << "final counts differ from the reference after " << outputs << " outputs; log " << log;
      EXPECT_EQ(job.kill_and_wait(SIGTERM), 0) << job.log();
      break;
    }
    // Kill after an eighth of the input has gone through this run (and at least 2 s of it).
    auto started = clock_type::now();
    auto target = outputs + records / (kills + 2) + rng() % 20000;
    while (outputs < target && clock_type::now() - started < 120s) read_outputs(200ms);
    while (clock_type::now() - started < 2s) read_outputs(200ms);
    ASSERT_TRUE(job.alive()) << job.log();
    EXPECT_EQ(job.kill_and_wait(SIGKILL), 128 + SIGKILL);
    while (read_outputs(500ms) > 0) {}
    crashes.push_back({counts.size(), topic_size(changelog, partitions), 0, {}});
  }

  std::size_t checked = 0;
  for (std::size_t i = 0; i < crashes.size(); ++i) {
    const auto& c = crashes[i];
    std::string tasks;
    for (auto& [t, n] : c.per_task) tasks += " " + t + ":" + std::to_string(n);
    std::printf(
        "restart %zu: store >= %zu keys, changelog %lld records, restored %lld (%.1f%%)%s\n", i + 1, c.keys_at_kill,
        static_cast<long long>(c.changelog_at_kill), static_cast<long long>(c.restored),
        100.0 * static_cast<double>(c.restored) / static_cast<double>(std::max<std::int64_t>(1, c.changelog_at_kill)),
        tasks.c_str());
    if (c.keys_at_kill <= 100000) continue;
    ++checked;
    EXPECT_LT(c.restored * 10, c.changelog_at_kill)
        << "restart " << i + 1 << " restored " << c.restored << " records of a " << c.changelog_at_kill
        << "-record changelog: more than the tail";
  }
  EXPECT_GE(checked, 3u) << "too few restarts happened with a store above 100,000 keys";
  EXPECT_EQ(counts, expected);
  auto stores = read_stores(state_dir, app_id, "word-counts");
  EXPECT_EQ(entry_count(stores), expected.size());
  fs::remove_all(state_dir);
}

// ---------------------------------------------------------------------------------------

TEST(state, deleted_state_dir_is_rebuilt_from_the_changelog_byte_for_byte) {
  SLUICE_REQUIRE_BROKER();
  auto app_id = sluice::test::unique_name("rebuild-wc");
  auto in = app_id + "-lines", out = app_id + "-counts";
  auto state_dir = fresh_state_dir();
  auto cfg = base_config(app_id, state_dir);
  cfg.set("commit.interval.ms", "200");
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 4);
  admin.create_topic(out, 4);

  std::map<std::string, std::int64_t> expected;
  {
    std::mt19937 rng(3);
    sluice::topic_writer w(cfg);
    for (int i = 0; i < 20000; ++i) {
      std::string line;
      for (int k = 0; k < 3; ++k) {
        auto word = "v" + std::to_string(rng() % 5000);
        ++expected[word];
        line += word + " ";
      }
      w.send_raw(in, std::nullopt, line);
    }
    w.flush();
  }
  {
    sluice::app app(examples::word_count_topology(in, out), cfg);
    app.start();
    sluice::topic_reader r(cfg, {out});
    std::map<std::string, std::int64_t> counts;
    ASSERT_TRUE(eventually(
        [&] {
          for (auto& m : r.poll(300ms))
            counts[*m.key] = std::max(counts[*m.key], sluice::int64_serde::deserialize(*m.value));
          return counts == expected;
        },
        120s));
    app.close();
    ASSERT_EQ(app.state(), sluice::app_state::not_running) << app.error_message();
  }
  auto before = read_stores(state_dir, app_id, "word-counts");
  ASSERT_EQ(before.size(), 4u);
  ASSERT_EQ(entry_count(before), expected.size());

  fs::remove_all(state_dir);
  {
    sluice::app app(examples::word_count_topology(in, out), cfg);
    std::atomic<bool> saw_restoring{false};
    app.on_state_change([&](sluice::app_state, sluice::app_state next) {
      if (next == sluice::app_state::restoring) saw_restoring = true;
    });
    app.start();
    std::int64_t last = -1;
    int stable = 0;
    ASSERT_TRUE(eventually(
        [&] {
          auto now = static_cast<std::int64_t>(app.metrics().total("sluice_restored_records_total"));
          stable = (app.state() == sluice::app_state::running && now == last && now > 0) ? stable + 1 : 0;
          last = now;
          return stable >= 5;
        },
        120s, 200ms))
        << "restoration did not finish; state " << sluice::to_string(app.state());
    EXPECT_GE(last, static_cast<std::int64_t>(expected.size()));
    EXPECT_TRUE(saw_restoring) << "the app state must say restoring while stores are rebuilt";
    app.close();
    ASSERT_EQ(app.state(), sluice::app_state::not_running) << app.error_message();
  }
  auto after = read_stores(state_dir, app_id, "word-counts");
  EXPECT_EQ(after.size(), before.size());
  for (const auto& [task, entries] : before) {
    ASSERT_TRUE(after.contains(task)) << "task " << task << " has no store after the rebuild";
    EXPECT_TRUE(after[task] == entries) << "task " << task << ": " << after[task].size() << " entries after, "
                                        << entries.size() << " before, or different bytes";
  }
  fs::remove_all(state_dir);
}

// ---------------------------------------------------------------------------------------

namespace {

/// Passes counts through; throws transaction_aborted once, on the `nth` count of `key`.
class abort_once final : public sluice::processor<std::string, std::int64_t> {
 public:
  abort_once(std::string key, std::int64_t nth, std::atomic<int>& thrown)
      : key_(std::move(key)), nth_(nth), thrown_(thrown) {}
  void process(const sluice::record<std::string, std::int64_t>& r) override {
    if (r.key == key_ && r.value == nth_ && thrown_.fetch_add(1) == 0)
      throw sluice::error(sluice::errc::transaction_aborted,
                          "test: abort the transaction holding " + key_ + "=" + std::to_string(nth_));
    context().forward(r);
  }

 private:
  std::string key_;
  std::int64_t nth_;
  std::atomic<int>& thrown_;
};

}  // namespace

TEST(state, aborted_transaction_leaves_no_trace) {
  SLUICE_REQUIRE_BROKER();
  auto app_id = sluice::test::unique_name("abort-wc");
  auto in = app_id + "-words", out = app_id + "-counts";
  auto state_dir = fresh_state_dir();
  auto cfg = base_config(app_id, state_dir);
  cfg.set("processing.guarantee", "exactly_once");
  cfg.set("commit.interval.ms", "1000");  // large transactions: the aborted one holds many records
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 2);
  admin.create_topic(out, 2);

  constexpr int records = 60000;
  std::map<std::string, std::int64_t> expected;
  {
    sluice::topic_writer w(cfg);
    for (int i = 0; i < records; ++i) {
      auto word = "k" + std::to_string(i % 300);
      ++expected[word];
      w.send(in, word, std::string("x"));
    }
    w.flush();
  }
  std::atomic<int> thrown{0};
  sluice::streams_builder b;
  b.stream<std::string, std::string>(in)
      .group_by_key()
      .count("counts")
      .to_stream()
      .process([&thrown] { return std::make_unique<abort_once>("k7", 150, thrown); })
      .to(out);
  {
    sluice::app app(b.build(), cfg);
    app.start();
    sluice::topic_reader r(cfg, {out}, sluice::isolation::read_committed);
    std::map<std::string, std::vector<std::int64_t>> seen;
    std::size_t total = 0;
    ASSERT_TRUE(eventually(
        [&] {
          for (auto& m : r.poll(300ms)) {
            seen[*m.key].push_back(sluice::int64_serde::deserialize(*m.value));
            ++total;
          }
          return total >= static_cast<std::size_t>(records);
        },
        180s))
        << total << " outputs; state " << sluice::to_string(app.state()) << " " << app.error_message();
    auto extra = r.poll(2s);
    EXPECT_TRUE(extra.empty()) << extra.size() << " outputs more than records";
    app.close();
    ASSERT_EQ(app.state(), sluice::app_state::not_running) << app.error_message();
    EXPECT_EQ(thrown.load(), 2) << "the marked record should be met twice: aborted, then reprocessed";
    EXPECT_EQ(app.metrics().total("sluice_transaction_aborts_total"), 1);
    // Per key, committed outputs are exactly 1, 2, ..., n: a duplicate or a leftover of the
    // aborted transaction would repeat a count.
    ASSERT_EQ(seen.size(), expected.size());
    for (const auto& [key, values] : seen) {
      ASSERT_EQ(static_cast<std::int64_t>(values.size()), expected[key]) << key;
      for (std::size_t i = 0; i < values.size(); ++i)
        ASSERT_EQ(values[i], static_cast<std::int64_t>(i + 1)) << key << " at " << i;
    }
  }
  auto stores = read_stores(state_dir, app_id, "counts");
  std::map<std::string, std::string> merged;
  // A count's store keeps each count behind its 8-byte timestamp (value_format::timestamped).
  for (auto& [task, entries] : stores)
    for (const auto& [k, v] : entries) merged[k] = v.size() >= 8 ? v.substr(8) : v;
  std::map<std::string, std::string> reference;
  for (auto& [k, n] : expected) {
    std::string kb, vb;
    sluice::default_state_serde<std::string>::serialize(k, kb);
    sluice::default_state_serde<std::int64_t>::serialize(n, vb);
    reference[kb] = vb;
  }
  EXPECT_TRUE(merged == reference) << merged.size() << " entries in the stores, " << reference.size() << " expected";
  fs::remove_all(state_dir);
}

// ---------------------------------------------------------------------------------------

namespace {

/// On its first record, looks up every expected key in the global store and forwards how
/// many it found; later records pass nothing.
class global_probe final : public sluice::processor<std::string, std::string, std::string, std::int64_t> {
 public:
  global_probe(std::string store, int keys) : store_(std::move(store)), keys_(keys) {}
  void process(const sluice::record<std::string, std::string>& r) override {
    if (done_) return;
    done_ = true;
    auto view = context().global_store<std::string, std::string>(store_);
    std::int64_t found = 0;
    for (int i = 0; i < keys_; ++i)
      if (auto v = view.get("g" + std::to_string(i)); v && *v == "rate-" + std::to_string(i)) ++found;
    context().forward(sluice::record<std::string, std::int64_t>{r.key, found, r.timestamp});
  }

 private:
  std::string store_;
  int keys_;
  bool done_ = false;
};

}  // namespace

TEST(state, global_table_is_fully_loaded_before_the_first_input_record) {
  SLUICE_REQUIRE_BROKER();
  constexpr int keys = 20000, partitions = 3;
  auto app_id = sluice::test::unique_name("global");
  auto table = app_id + "-rates", in = app_id + "-events", out = app_id + "-found";
  auto state_dir = fresh_state_dir();
  auto cfg = base_config(app_id, state_dir);
  sluice::topic_admin admin(cfg);
  admin.create_topic(table, 3, sluice::cleanup_policy::compact);
  admin.create_topic(in, partitions);
  admin.create_topic(out, 1);
  {
    sluice::topic_writer w(cfg);
    for (int i = 0; i < keys; ++i) w.send(table, "g" + std::to_string(i), "rate-" + std::to_string(i));
    for (int i = 0; i < 30; ++i) w.send(in, "e" + std::to_string(i), std::string("event"));
    w.flush();
  }
  sluice::streams_builder b;
  auto rates = b.global_table<std::string, std::string>(table, "rates");
  b.stream<std::string, std::string>(in)
      .process([n = keys] { return std::make_unique<global_probe>("rates", n); }, rates)
      .to(out);
  sluice::app app(b.build(), cfg);
  app.start();
  sluice::topic_reader r(cfg, {out});
  auto got = r.read_at_least(partitions, 120s);
  auto extra = r.poll(1s);
  app.close();
  got.insert(got.end(), extra.begin(), extra.end());
  ASSERT_EQ(got.size(), static_cast<std::size_t>(partitions)) << "one probe per task expected";
  for (const auto& m : got) EXPECT_EQ(sluice::int64_serde::deserialize(*m.value), keys) << "probe of " << *m.key;
  fs::remove_all(state_dir);
}
