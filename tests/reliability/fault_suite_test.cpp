// The fault suite: three instances of a stateful exactly-once job (sluice-word-count: a
// repartition and a RocksDB count store with its changelog) on a three-node KRaft cluster of
// their own, under a randomized, seeded schedule of faults:
//   - SIGKILL and restart of an instance, sometimes with its state directory deleted;
//   - SIGKILL and restart of a broker: a partition leader, the active controller, any node;
//   - SIGSTOP of an instance past its session timeout, SIGCONT later (a zombie);
//   - an instance cut off from the brokers for longer than the transaction timeout, then
//     restored (network_cut.cpp: the CI image has no iptables or nft, so the cut is made in
//     the process's own socket layer);
//   - rebalance churn: a fourth instance joins, works, and leaves.
// A verifier reading read_committed then checks: every word's counts are exactly 1..N with N
// its count in an independent reference model (no input lost, no output duplicated, final
// state equal to the model), and every instance not killed on purpose is still running.
//
// Profiles: the short one (default, CI) runs a fixed schedule of 20 instance kills, 5 broker
// kills, 1 zombie, 1 cut and 2 churns over 150,000 input records (fewer than the 1,000,000
// of a soak, to fit CI's few minutes). `--soak SECONDS` (or SLUICE_SOAK_SECONDS) draws
// faults at random until SECONDS have passed and at least 1,000,000 records were fed.
// SLUICE_TEST_SEED reproduces a schedule; SLUICE_FAULT_KAFKA_PORT (default 39200) places
// the cluster (nodes on PORT, PORT+2, PORT+4; controllers one above each).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "broker_env.hpp"
#include "job_process.hpp"
#include "kafka/consumer.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;
using sluice::test::job_process;

long soak_seconds() {
  const char* s = std::getenv("SLUICE_SOAK_SECONDS");
  return s && *s ? std::stol(s) : 0;
}

/// scripts/kafka driving the suite's own three-node cluster.
class cluster {
 public:
  cluster(std::filesystem::path dir, int port) : port_(port) {
    env_ = "SLUICE_KAFKA_PORT=" + std::to_string(port) + " SLUICE_KAFKA_DIR='" + dir.string() + "' ";
    log_ = (dir.parent_path() / "kafka.log").string();
  }
  ~cluster() {
    if (started_) run("stop");
  }
  /// Starts three nodes; returns the bootstrap list, or empty on failure.
  std::string start() {
    auto out = run("start --brokers 3");
    if (out.find("127.0.0.1:") == std::string::npos) return {};
    started_ = true;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  }
  void kill(int node) { run("kill " + std::to_string(node)); }
  bool restart(int node) { return run("restart " + std::to_string(node)).find("127.0.0.1:") != std::string::npos; }
  int leader(const std::string& topic, int partition) { return number(run("leader " + topic + " " + std::to_string(partition))); }
  int controller() { return number(run("controller")); }
  int low_port() const { return port_; }
  int high_port() const { return port_ + 5; }

 private:
  static int number(const std::string& s) {
    try {
      return std::stoi(s);
    } catch (...) {
      return -1;
    }
  }
  std::string run(const std::string& args) {
    std::string command = env_ + SLUICE_SOURCE_DIR "/scripts/kafka " + args + " 2>>'" + log_ + "'";
    std::string out;
    if (FILE* p = ::popen(command.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    return out;
  }
  std::string env_, log_;
  int port_;
  bool started_ = false;
};

/// What was injected, for the report.
struct injected {
  int instance_kills = 0, state_dirs_deleted = 0, broker_kills = 0, leader_kills = 0, controller_kills = 0,
      zombies = 0, cuts = 0, joins = 0, leaves = 0;
  std::string text() const {
    std::ostringstream o;
    o << instance_kills << " instance SIGKILLs (" << state_dirs_deleted << " with the state directory deleted), "
      << broker_kills << " broker SIGKILLs (" << leader_kills << " of a partition leader, " << controller_kills
      << " of the active controller), " << zombies << " SIGSTOPs past the session timeout, " << cuts
      << " network cuts past the transaction timeout, " << joins << " joins and " << leaves << " leaves";
    return o.str();
  }
};

class fault_suite : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sluice::test::broker_bootstrap().empty()) return;  // gated like the other tiers
    work_ = std::filesystem::temp_directory_path() / sluice::test::unique_name("sluice-faults");
    std::filesystem::create_directories(work_);
    const char* port = std::getenv("SLUICE_FAULT_KAFKA_PORT");
    cluster_ = std::make_unique<cluster>(work_ / "kafka", port && *port ? std::atoi(port) : 39200);
    bootstrap_ = cluster_->start();
    ASSERT_FALSE(bootstrap_.empty()) << "the three-node cluster did not start; see " << work_ / "kafka.log";
    cfg_.set("bootstrap.servers", bootstrap_);
    app_id_ = sluice::test::unique_name("faults-wc");
    input_ = sluice::test::unique_name("faults-lines");
    output_ = sluice::test::unique_name("faults-counts");
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 6);  // replication: the cluster's default, 3 (min.insync.replicas=2)
    admin.create_topic(output_, 6);
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
    for (int i = 0; i < 300; ++i) vocabulary_.push_back("w" + std::to_string(i));
    seed_ = std::random_device{}();
    if (const char* s = std::getenv("SLUICE_TEST_SEED")) seed_ = static_cast<unsigned>(std::stoul(s));
    rng_.seed(seed_);
    std::cout << "fault suite: seed " << seed_ << " (SLUICE_TEST_SEED reproduces it), cluster " << bootstrap_
              << ", work dir " << work_ << "\n";
  }

  void TearDown() override {
    for (auto& [name, job] : jobs_)
      if (job) job->signal(SIGCONT);
    jobs_.clear();
    cluster_.reset();  // stops the cluster, also after a failure
    if (work_.empty()) return;
    if (HasFailure() || std::getenv("SLUICE_KEEP_LOGS")) {
      std::cout << "logs kept in " << work_ << "\n";
    } else {
      std::error_code ec;
      std::filesystem::remove_all(work_, ec);
    }
  }

  std::filesystem::path state_dir(const std::string& name) const { return work_ / ("state-" + name); }
  std::filesystem::path cut_file(const std::string& name) const { return work_ / ("cut-" + name); }

  void start(const std::string& name) {
    auto log = work_ / (name + "-run" + std::to_string(runs_[name]++) + ".log");
    std::vector<std::string> args = {SLUICE_WORD_COUNT_BIN};
    auto set = [&](const std::string& k, const std::string& v) {
      args.push_back("--set");
      args.push_back(k + "=" + v);
    };
    set("bootstrap.servers", bootstrap_);
    set("application.id", app_id_);
    set("input.topic", input_);
    set("output.topic", output_);
    set("state.dir", state_dir(name).string());
    set("instance.id", name);
    set("processing.guarantee", "exactly_once");
    set("commit.interval.ms", "100");
    set("consumer.session.timeout.ms", "6000");
    set("replication.factor", "3");
    std::vector<std::string> env = {"LD_PRELOAD=" SLUICE_NETWORK_CUT_LIB, "SLUICE_CUT_FILE=" + cut_file(name).string(),
                                    "SLUICE_CUT_PORT_LOW=" + std::to_string(cluster_->low_port()),
                                    "SLUICE_CUT_PORT_HIGH=" + std::to_string(cluster_->high_port())};
    jobs_[name] = std::make_unique<job_process>(args, log, env);
  }

  /// Whether an instance that should run does; reports the first that does not.
  bool all_running(const std::vector<std::string>& names) {
    for (const auto& n : names)
      if (!jobs_[n] || !jobs_[n]->running()) {
        ADD_FAILURE() << "instance " << n << " is not running: "
                      << sluice::test::describe_exit(jobs_[n] ? jobs_[n]->wait_exit(0ms) : std::nullopt) << "; "
                      << (jobs_[n] ? sluice::test::last_lines(jobs_[n]->log(), 8) : "never started");
        return false;
      }
    return true;
  }

  void feed(int lines) {
    std::uniform_int_distribution<std::size_t> pick(0, vocabulary_.size() - 1);
    for (int i = 0; i < lines; ++i) {
      std::string line;
      for (int k = 0; k < 3; ++k) {
        const auto& w = vocabulary_[pick(rng_)];
        line += (k ? " " : "") + w;
        ++reference_[w];
      }
      writer_->send_raw(input_, std::nullopt, line);
    }
    writer_->flush(120s);
    fed_ += lines;
  }

  void say(const std::string& what) {
    auto s = std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started_at_).count();
    std::cout << "[" << s << " s] " << what << std::endl;
  }

  // ---- the faults ------------------------------------------------------------------
  std::string pick_instance() {
    std::uniform_int_distribution<std::size_t> d(0, permanent_.size() - 1);
    return permanent_[d(rng_)];
  }

  void kill_instance() {
    auto name = pick_instance();
    jobs_[name]->signal(SIGKILL);
    jobs_[name]->wait_exit(30s);
    bool wipe = std::uniform_int_distribution<int>(0, 3)(rng_) == 0;
    if (wipe) {
      std::filesystem::remove_all(state_dir(name));
      ++done_.state_dirs_deleted;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 2000)(rng_)));
    start(name);
    ++done_.instance_kills;
    say("SIGKILL instance " + name + (wipe ? ", state directory deleted," : "") + " and restarted");
  }

  enum class broker_target { leader, controller, any };
  void kill_broker(broker_target target) {
    int node = -1;
    std::string why;
    if (target == broker_target::leader) {
      int p = std::uniform_int_distribution<int>(0, 5)(rng_);
      bool out = std::uniform_int_distribution<int>(0, 1)(rng_) == 1;
      node = cluster_->leader(out ? output_ : input_, p);
      why = "leader of " + std::string(out ? "output" : "input") + " partition " + std::to_string(p);
      if (node > 0) ++done_.leader_kills;
    } else if (target == broker_target::controller) {
      node = cluster_->controller();
      why = "active controller";
      if (node > 0) ++done_.controller_kills;
    }
    if (node < 1 || node > 3) {
      node = std::uniform_int_distribution<int>(1, 3)(rng_);
      why = "a node";
    }
    cluster_->kill(node);
    auto down = std::chrono::milliseconds(std::uniform_int_distribution<int>(3000, 10000)(rng_));
    std::this_thread::sleep_for(down);
    bool back = cluster_->restart(node);
    ++done_.broker_kills;
    say("SIGKILL broker node " + std::to_string(node) + " (" + why + "), restarted after " +
        std::to_string(down.count()) + " ms" + (back ? "" : " -- IT DID NOT COME BACK"));
    ASSERT_TRUE(back) << "node " << node << " did not restart";
  }

  void zombie() {
    auto name = pick_instance();
    jobs_[name]->signal(SIGSTOP);
    std::this_thread::sleep_for(12s);  // session timeout 6 s, transaction timeout 10 s
    jobs_[name]->signal(SIGCONT);
    ++done_.zombies;
    say("SIGSTOP instance " + name + " for 12 s (session timeout 6 s), then SIGCONT");
  }

  void cut() {
    auto name = pick_instance();
    { std::ofstream(cut_file(name)) << "cut\n"; }
    std::this_thread::sleep_for(20s);  // transaction timeout 10 s
    std::filesystem::remove(cut_file(name));
    ++done_.cuts;
    say("cut instance " + name + " off from the brokers for 20 s (transaction timeout 10 s), then restored");
  }

  void churn() {
    start("d");
    ++done_.joins;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(8000, 15000)(rng_)));
    jobs_["d"]->signal(SIGTERM);
    auto st = jobs_["d"]->wait_exit(90s);
    ++done_.leaves;
    say("instance d joined, worked and left (" + sluice::test::describe_exit(st) + ")");
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "d did not leave cleanly";
  }

  // ---- verification ---------------------------------------------------------------
  /// For a failure: each output partition's high watermark against its last stable offset.
  /// An LSO that stays behind the high watermark while every instance idles is a
  /// transaction left open on the partition (a hanging transaction), which hides every later
  /// commit from read_committed readers.
  void print_output_offsets() {
    sluice::kafka::consumer uncommitted({{"bootstrap.servers", bootstrap_}, {"isolation.level", "read_uncommitted"}});
    sluice::kafka::consumer committed({{"bootstrap.servers", bootstrap_}, {"isolation.level", "read_committed"}});
    for (std::int32_t p = 0; p < 6; ++p) {
      try {
        const auto high = uncommitted.watermarks(output_, p, 30s).second;
        const auto stable = committed.watermarks(output_, p, 30s).second;
        say(output_ + "[" + std::to_string(p) + "]: high watermark " + std::to_string(high) + ", last stable offset " +
            std::to_string(stable) + (stable < high ? " (a transaction is open)" : ""));
      } catch (const std::exception& e) {
        say(output_ + "[" + std::to_string(p) + "]: offsets unknown: " + e.what());
      }
    }
  }

  /// Reads the output read_committed until every word reached its reference count.
  bool wait_until_counted(std::chrono::seconds timeout) {
    sluice::topic_reader reader(cfg_, {output_}, sluice::isolation::read_committed);
    std::map<std::string, std::int64_t> highest;
    auto deadline = clock_type::now() + timeout;
    for (;;) {
      for (const auto& m : reader.poll(500ms))
        if (m.key && m.value) {
          auto& h = highest[*m.key];
          h = std::max(h, sluice::int64_serde::deserialize(*m.value));
        }
      bool done = std::all_of(reference_.begin(), reference_.end(), [&](auto& r) { return highest[r.first] >= r.second; });
      if (done) return true;
      if (clock_type::now() > deadline) return false;
      if (!all_running(permanent_)) return false;
    }
  }

  /// Every word's counts, in output order, are 1..N with N its reference count.
  void verify_exact(std::size_t& records, int& duplicates, int& losses) {
    sluice::topic_reader reader(cfg_, {output_}, sluice::isolation::read_committed);
    std::map<std::string, std::vector<std::int64_t>> values;
    for (const auto& m : reader.read_to_end(300s))
      if (m.key && m.value) {
        values[*m.key].push_back(sluice::int64_serde::deserialize(*m.value));
        ++records;
      }
    int reported = 0;
    for (const auto& [word, n] : reference_) {
      const auto& got = values[word];
      std::int64_t expect = 1;
      for (auto v : got) {
        if (v == expect) {
          ++expect;
        } else if (v < expect) {
          ++duplicates;
          if (++reported <= 10) ADD_FAILURE() << "word " << word << ": count " << v << " emitted twice";
        } else {
          losses += static_cast<int>(v - expect);
          if (++reported <= 10) ADD_FAILURE() << "word " << word << ": counts " << expect << ".." << v - 1 << " missing";
          expect = v + 1;
        }
      }
      if (expect - 1 != n) {
        if (expect - 1 < n) losses += static_cast<int>(n - (expect - 1));
        if (++reported <= 10) ADD_FAILURE() << "word " << word << ": final count " << expect - 1 << ", reference " << n;
      }
    }
    for (const auto& [word, v] : values)
      EXPECT_TRUE(reference_.contains(word)) << "a count for a word never fed: " << word;
  }

  std::filesystem::path work_;
  std::unique_ptr<cluster> cluster_;
  std::string bootstrap_, app_id_, input_, output_;
  sluice::config cfg_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::vector<std::string> vocabulary_;
  std::map<std::string, std::int64_t> reference_;
  std::map<std::string, std::unique_ptr<job_process>> jobs_;
  std::map<std::string, int> runs_;
  const std::vector<std::string> permanent_ = {"a", "b", "c"};
  unsigned seed_ = 0;
  std::mt19937 rng_;
  long fed_ = 0;
  injected done_;
  clock_type::time_point started_at_ = clock_type::now();
};

}  // namespace

TEST_F(fault_suite, exactly_once_count_survives_randomized_faults) {
  SLUICE_REQUIRE_BROKER();
  const long soak = soak_seconds();
  const long total = soak > 0 ? 1000000 : 150000;
  enum class fault { instance_kill, broker_leader, broker_controller, broker_any, zombie, cut, churn };
  std::vector<fault> schedule;
  if (soak == 0) {
    schedule.insert(schedule.end(), 20, fault::instance_kill);
    schedule.insert(schedule.end(), {fault::broker_leader, fault::broker_controller, fault::broker_any,
                                     fault::broker_leader, fault::broker_controller});
    schedule.insert(schedule.end(), {fault::zombie, fault::cut, fault::churn, fault::churn});
    std::shuffle(schedule.begin(), schedule.end(), rng_);
  }
  std::cout << "profile: " << (soak ? "soak " + std::to_string(soak) + " s" : std::string("short (CI)")) << ", "
            << total << " input records\n";
  started_at_ = clock_type::now();
  for (const auto& n : permanent_) start(n);
  const long chunk = soak ? 5000 : std::max<long>(1000, total / static_cast<long>(schedule.size() + 1));
  feed(static_cast<int>(chunk));

  auto pick_random = [&] {
    // Weighted for a soak: mostly instance kills, then brokers, then the rest.
    int r = std::uniform_int_distribution<int>(0, 99)(rng_);
    if (r < 55) return fault::instance_kill;
    if (r < 65) return fault::broker_leader;
    if (r < 72) return fault::broker_controller;
    if (r < 78) return fault::broker_any;
    if (r < 85) return fault::zombie;
    if (r < 92) return fault::cut;
    return fault::churn;
  };
  std::size_t step = 0;
  auto deadline = clock_type::now() + std::chrono::seconds(soak);
  for (;;) {
    fault f;
    if (soak == 0) {
      if (step >= schedule.size()) break;
      f = schedule[step];
    } else {
      if (clock_type::now() >= deadline && fed_ >= total) break;
      f = pick_random();
    }
    ++step;
    switch (f) {
      case fault::instance_kill: kill_instance(); break;
      case fault::broker_leader: kill_broker(broker_target::leader); break;
      case fault::broker_controller: kill_broker(broker_target::controller); break;
      case fault::broker_any: kill_broker(broker_target::any); break;
      case fault::zombie: zombie(); break;
      case fault::cut: cut(); break;
      case fault::churn: churn(); break;
    }
    if (HasFatalFailure()) return;
    if (fed_ < total) feed(static_cast<int>(std::min(chunk, total - fed_)));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(500, 3000)(rng_)));
  }
  if (fed_ < total) feed(static_cast<int>(total - fed_));
  say("faults done: " + done_.text() + "; " + std::to_string(fed_) + " records fed");

  // Verify: everyone not killed on purpose runs; the output catches up and is exact.
  ASSERT_TRUE(all_running(permanent_));
  const bool counted = wait_until_counted(900s);
  if (!counted) print_output_offsets();
  ASSERT_TRUE(counted) << "the output did not reach the reference counts (offsets of the output above)";
  ASSERT_TRUE(all_running(permanent_));
  for (const auto& n : permanent_) jobs_[n]->signal(SIGTERM);
  for (const auto& n : permanent_) {
    auto st = jobs_[n]->wait_exit(120s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
        << "instance " << n << " did not stop cleanly: " << sluice::test::describe_exit(st);
  }
  std::size_t records = 0;
  int duplicates = 0, losses = 0;
  verify_exact(records, duplicates, losses);
  say("verified: " + std::to_string(fed_) + " input records (" + std::to_string(fed_ * 3) + " words), " +
      std::to_string(records) + " counts read read_committed, duplicates " + std::to_string(duplicates) +
      ", losses " + std::to_string(losses) + ", final counts " +
      (duplicates == 0 && losses == 0 ? "equal to" : "NOT equal to") + " the reference model for " +
      std::to_string(reference_.size()) + " words; instances a, b, c ran to the end and stopped cleanly");
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(losses, 0);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--soak" && i + 1 < argc) ::setenv("SLUICE_SOAK_SECONDS", argv[i + 1], 1);
  return RUN_ALL_TESTS();
}
