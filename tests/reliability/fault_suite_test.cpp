// The fault suite: three instances of a stateful exactly-once job on a three-node KRaft
// cluster of their own, under a randomized, seeded schedule of faults:
//   - SIGKILL and restart of an instance, some with its state directory deleted;
//   - SIGKILL and restart of a broker: a partition leader, the active controller, any node;
//   - SIGSTOP of an instance past its session timeout, SIGCONT later (a zombie);
//   - an instance cut off from the brokers for longer than the transaction timeout, then
//     restored (network_cut.cpp: the CI image has no iptables or nft, so the cut is made in
//     the process's own socket layer);
//   - every broker hung (SIGSTOP) for 8 s while an instance is asked for /metadata: 503,
//     and the instance still runs once the brokers answer again (the group description's
//     requests then end late: librdkafka 2.0.2's DescribeConsumerGroups aborted the process
//     on that);
//   - rebalance churn: a fourth instance joins, works, and leaves.
// The job is a parameter (fault_job.hpp: count, throttle, leaderboard, overflow_buffer): the
// cluster, the instances and the schedule are the suite's, the same for every job, and each
// job brings its records and a verifier that reads its output read_committed and checks it
// against an independent reference model (no input lost, no output duplicated, final state
// equal to the model); the suite checks that every instance not killed on purpose is still
// running and stops cleanly. The jobs of a run go one after the other on one cluster.
//
// Profiles: the short one (default, CI) runs a fixed, shuffled schedule per job: for count 20
// instance kills (5 with the state directory deleted), 5 broker kills (2 leaders, 2
// controllers, 1 any node), 1 zombie, 1 cut and 2 churns over 150,000 input records; for the
// others every fault kind at least once (3 instance kills, 1 of them with the state
// directory deleted, a leader and a controller kill, a zombie, a cut, a churn) over fewer
// records (each job's records()), to keep CI short (docs/reliability.md). `--soak SECONDS`
// (or SLUICE_SOAK_SECONDS) has each job draw faults at random until SECONDS have passed and
// at least 1,000,000 records were fed (SLUICE_SOAK_RECORDS sets another floor: a soak feeds a
// chunk of 1/200 of it, at least 1,000 records, after each fault, so its floor also sets the
// least number of faults). Both profiles run every job unless SLUICE_FAULT_JOBS
// ("all", or names separated by commas) chooses. SLUICE_TEST_SEED reproduces a run;
// SLUICE_FAULT_KAFKA_PORT (default 39200) places the cluster (nodes on PORT, PORT+2, PORT+4;
// controllers one above each).
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
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "broker_env.hpp"
#include "eventually.hpp"
#include "fault_job.hpp"
#include "http_client.hpp"
#include "job_process.hpp"
#include "kafka/consumer.hpp"
#include "runtime/partition_group.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;
using sluice::test::job_process;
using sluice::test::faults::fault_job;
using sluice::test::faults::profile;

long soak_seconds() {
  const char* s = std::getenv("SLUICE_SOAK_SECONDS");
  return s && *s ? std::stol(s) : 0;
}

/// The least number of input records a soak feeds: SLUICE_SOAK_RECORDS, else the job's own.
long soak_records(const fault_job& job) {
  const char* s = std::getenv("SLUICE_SOAK_RECORDS");
  return s && *s ? std::stol(s) : job.records(profile::soak);
}

/// The run's seed: SLUICE_TEST_SEED or drawn once, the same for every job of the run.
unsigned run_seed() {
  static const unsigned seed = [] {
    if (const char* s = std::getenv("SLUICE_TEST_SEED"); s && *s) return static_cast<unsigned>(std::stoul(s));
    return static_cast<unsigned>(std::random_device{}());
  }();
  return seed;
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
  /// SIGSTOP (pause) or SIGCONT (resume) of every node: a hung cluster.
  void pause_all(bool pause) {
    for (int node = 1; node <= 3; ++node) run((pause ? "pause " : "resume ") + std::to_string(node));
  }
  bool restart(int node) { return run("restart " + std::to_string(node)).find("127.0.0.1:") != std::string::npos; }
  int leader(const std::string& topic, int partition) {
    return number(run("leader " + topic + " " + std::to_string(partition)));
  }
  int controller() { return number(run("controller")); }
  int low_port() const { return port_; }
  int high_port() const { return port_ + 5; }
  const std::string& log() const { return log_; }

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
  int instance_kills = 0, state_dirs_deleted = 0, broker_kills = 0, leader_kills = 0, controller_kills = 0, zombies = 0,
      cuts = 0, hangs = 0, joins = 0, leaves = 0;
  std::string text() const {
    std::ostringstream o;
    o << instance_kills << " instance SIGKILLs (" << state_dirs_deleted << " with the state directory deleted), "
      << broker_kills << " broker SIGKILLs (" << leader_kills << " of a partition leader, " << controller_kills
      << " of the active controller), " << zombies << " SIGSTOPs past the session timeout, " << cuts
      << " network cuts past the transaction timeout, " << hangs << " hung clusters, " << joins << " joins and "
      << leaves << " leaves";
    return o.str();
  }
};

enum class fault {
  instance_kill,
  instance_kill_wiped,
  broker_leader,
  broker_controller,
  broker_any,
  zombie,
  cut,
  hang,
  churn
};

/// The short profile's fixed schedule for `job`, before shuffling.
std::vector<fault> short_schedule(const std::string& job) {
  std::vector<fault> s;
  if (job == "count") {
    s.insert(s.end(), 15, fault::instance_kill);
    s.insert(s.end(), 5, fault::instance_kill_wiped);
    s.insert(s.end(), {fault::broker_leader, fault::broker_controller, fault::broker_any, fault::broker_leader,
                       fault::broker_controller});
    s.insert(s.end(), {fault::zombie, fault::cut, fault::hang, fault::churn, fault::churn});
  } else {
    s = {fault::instance_kill,
         fault::instance_kill,
         fault::instance_kill_wiped,
         fault::broker_leader,
         fault::broker_controller,
         fault::zombie,
         fault::cut,
         fault::hang,
         fault::churn};
  }
  return s;
}

const std::vector<std::string> all_jobs = {"count", "throttle", "leaderboard", "overflow_buffer"};

/// The jobs of this run: SLUICE_FAULT_JOBS ("all", or names separated by commas); by default
/// every job, in both profiles (CI time: see docs/reliability.md).
std::vector<std::string> jobs_of_run() {
  if (const char* list = std::getenv("SLUICE_FAULT_JOBS"); list && *list) {
    if (std::string(list) == "all") return all_jobs;
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string name; std::getline(in, name, ',');) {
      if (std::find(all_jobs.begin(), all_jobs.end(), name) == all_jobs.end())
        throw std::invalid_argument("SLUICE_FAULT_JOBS names '" + name +
                                    "'; the fault suite's jobs are count, throttle, leaderboard, overflow_buffer "
                                    "(or all)");
      out.push_back(name);
    }
    return out;
  }
  return all_jobs;
}

std::unique_ptr<fault_job> make_job(const std::string& name) {
  if (name == "count") return sluice::test::faults::make_count_job();
  if (name == "throttle") return sluice::test::faults::make_throttle_job();
  if (name == "leaderboard") return sluice::test::faults::make_leaderboard_job();
  if (name == "overflow_buffer") return sluice::test::faults::make_overflow_buffer_job();
  throw std::invalid_argument("no fault-suite job '" + name + "'");
}

/// One job under faults: three permanent instances (a, b, c) and a churning one (d) of the
/// job on the cluster, the schedule, the report. Lifecycle: made, run() once; the destructor
/// SIGKILLs instances still running. Threading: the test's thread only.
class job_under_faults {
 public:
  job_under_faults(std::unique_ptr<fault_job> job, cluster& kafka, std::string bootstrap, std::filesystem::path work,
                   unsigned seed)
      : job_(std::move(job)), cluster_(kafka), bootstrap_(std::move(bootstrap)), work_(std::move(work)), seed_(seed) {
    std::filesystem::create_directories(work_);
    cfg_.set("bootstrap.servers", bootstrap_);
    rng_.seed(seed_);
    app_id_ = sluice::test::unique_name("faults-" + job_->name());
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
  }
  ~job_under_faults() {
    for (auto& [name, instance] : instances_)
      if (instance) instance->signal(SIGCONT);
  }

  /// Feeds the job's records between the faults of `soak` seconds (0: the short profile's
  /// schedule), then waits for the output to catch up, stops the instances and verifies.
  void run(long soak) {
    const profile p = soak > 0 ? profile::soak : profile::short_ci;
    total_ = soak > 0 ? soak_records(*job_) : job_->records(p);
    const long total = total_;
    job_->prepare(cfg_, rng_, total);
    std::vector<fault> schedule;
    if (soak == 0) {
      schedule = short_schedule(job_->name());
      std::shuffle(schedule.begin(), schedule.end(), rng_);
    }
    std::cout << "fault suite: job " << job_->name() << " (" << job_->binary() << "), seed " << seed_
              << " (SLUICE_TEST_SEED reproduces it), cluster " << bootstrap_ << ", work dir " << work_ << "\n"
              << "profile: " << (soak ? "soak " + std::to_string(soak) + " s" : std::string("short (CI)")) << ", "
              << total << " input records" << std::endl;
    started_at_ = clock_type::now();
    for (const auto& n : permanent_) start(n);
    // A chunk after every fault and one more just before every broker kill (see kill_broker).
    const auto broker_kills = std::count_if(schedule.begin(), schedule.end(), [](fault f) {
      return f == fault::broker_leader || f == fault::broker_controller || f == fault::broker_any;
    });
    chunk_ = soak ? std::max<long>(1000, total / 200)
                  : std::max<long>(1000, total / static_cast<long>(schedule.size() + 1 + broker_kills));
    feed_chunk();

    std::size_t step = 0;
    const auto deadline = clock_type::now() + std::chrono::seconds(soak);
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
      // Every instance must still run before the next fault: a crash since the last one would
      // go unnoticed once an instance kill's restart replaced the dead process (how an abort
      // after the hung-cluster fault first hid). Reported, and the run goes on.
      all_running(permanent_);
      if (!inject(f)) return;  // a broker did not come back: the run cannot go on
      feed_chunk();
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(500, 3000)(rng_)));
    }
    if (fed_ < total) feed(total - fed_);
    say("faults done: " + done_.text() + "; " + std::to_string(fed_) + " records fed");

    // Verify: everyone not killed on purpose runs; the output catches up and is exact.
    ASSERT_TRUE(all_running(permanent_));
    const bool caught_up = wait_until_caught_up(900s);
    if (!caught_up) print_output_offsets();
    ASSERT_TRUE(caught_up) << "the output did not catch up with the input (offsets of the output above)";
    ASSERT_TRUE(all_running(permanent_));
    for (const auto& n : permanent_) instances_[n]->signal(SIGTERM);
    bool clean = true;
    for (const auto& n : permanent_) {
      auto st = instances_[n]->wait_exit(120s);
      const bool ok = st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
      clean = clean && ok;
      EXPECT_TRUE(ok) << "instance " << n << " did not stop cleanly: " << sluice::test::describe_exit(st);
    }
    const auto v = job_->verify(cfg_);
    say("verified: " + v.text + "; instances a, b, c ran to the end and " +
        (clean ? "stopped cleanly" : "NOT all stopped cleanly") + "; " + redeliveries_skipped());
    EXPECT_EQ(v.duplicates, 0);
    EXPECT_EQ(v.losses, 0);
    EXPECT_EQ(v.wrong, 0) << "results that differ from the reference model";
  }

 private:
  std::filesystem::path state_dir(const std::string& name) const { return work_ / ("state-" + name); }

  /// How often an instance's consumer delivered records again that its task had had (the
  /// stream thread skips them and logs a warning naming the counter once per run of
  /// records): shown, not asserted, as skipping them is the guard working. From the logs,
  /// not /metrics: a SIGKILLed instance's counter dies with it.
  std::string redeliveries_skipped() const {
    int lines = 0;
    for (const auto& entry : std::filesystem::directory_iterator(work_)) {
      if (entry.path().extension() != ".log") continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);)
        if (line.find(sluice::runtime::partition_group::redelivered_metric) != std::string::npos) ++lines;
    }
    return std::to_string(lines) + " consumer re-deliveries skipped";
  }
  std::filesystem::path cut_file(const std::string& name) const { return work_ / ("cut-" + name); }

  void start(const std::string& name) {
    auto log = work_ / (name + "-run" + std::to_string(runs_[name]++) + ".log");
    std::vector<std::string> args = {job_->binary()};
    auto set = [&](const std::string& k, const std::string& v) {
      args.push_back("--set");
      args.push_back(k + "=" + v);
    };
    set("bootstrap.servers", bootstrap_);
    set("application.id", app_id_);
    set("state.dir", state_dir(name).string());
    set("instance.id", name);
    http_ports_[name] = sluice::test::free_port();  // a new one per start: a killed one's may be taken
    set("application.server", "127.0.0.1:" + std::to_string(http_ports_[name]));
    set("processing.guarantee", "exactly_once");
    set("commit.interval.ms", "100");
    set("consumer.session.timeout.ms", "6000");
    set("replication.factor", "3");
    for (const auto& [k, v] : job_->settings()) set(k, v);
    std::vector<std::string> env = {"LD_PRELOAD=" SLUICE_NETWORK_CUT_LIB, "SLUICE_CUT_FILE=" + cut_file(name).string(),
                                    "SLUICE_CUT_PORT_LOW=" + std::to_string(cluster_.low_port()),
                                    "SLUICE_CUT_PORT_HIGH=" + std::to_string(cluster_.high_port())};
    instances_[name] = std::make_unique<job_process>(args, log, env);
  }

  /// Whether an instance that should run does; reports the first that does not.
  bool all_running(const std::vector<std::string>& names) {
    for (const auto& n : names)
      if (!instances_[n] || !instances_[n]->running()) {
        ADD_FAILURE() << job_->name() << ": instance " << n << " is not running: "
                      << sluice::test::describe_exit(instances_[n] ? instances_[n]->wait_exit(0ms) : std::nullopt)
                      << "; " << (instances_[n] ? sluice::test::last_lines(instances_[n]->log(), 8) : "never started");
        return false;
      }
    return true;
  }

  void feed(long n) {
    job_->feed(*writer_, n);
    fed_ += n;
  }
  /// The next chunk of the records, if any are left.
  void feed_chunk() {
    if (fed_ < total_) feed(std::min(chunk_, total_ - fed_));
  }

  void say(const std::string& what) {
    auto s = std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started_at_).count();
    std::cout << "[" << job_->name() << " " << s << " s] " << what << std::endl;
  }

  // ---- the faults ------------------------------------------------------------------
  std::string pick_instance() {
    std::uniform_int_distribution<std::size_t> d(0, permanent_.size() - 1);
    return permanent_[d(rng_)];
  }

  enum class state_dir_action { keep, wipe };
  void kill_instance(state_dir_action action) {
    auto name = pick_instance();
    instances_[name]->signal(SIGKILL);
    instances_[name]->wait_exit(30s);
    const bool wipe = action == state_dir_action::wipe;
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
  bool kill_broker(broker_target target) {
    int node = -1;
    std::string why;
    if (target == broker_target::leader) {
      const auto topics = job_->data_topics();
      const auto& topic = topics[std::uniform_int_distribution<std::size_t>(0, topics.size() - 1)(rng_)];
      int p = std::uniform_int_distribution<int>(0, sluice::test::faults::topic_partitions - 1)(rng_);
      node = cluster_.leader(topic, p);
      why = "leader of " + topic + "[" + std::to_string(p) + "]";
      if (node > 0) ++done_.leader_kills;
    } else if (target == broker_target::controller) {
      node = cluster_.controller();
      why = "active controller";
      if (node > 0) ++done_.controller_kills;
    }
    if (node < 1 || node > 3) {
      node = std::uniform_int_distribution<int>(1, 3)(rng_);
      why = "a node";
    }
    // Finding the leader or controller takes seconds, long enough for the job to go idle: give
    // it records to work on, so the broker dies under open transactions.
    feed_chunk();
    cluster_.kill(node);
    auto down = std::chrono::milliseconds(std::uniform_int_distribution<int>(3000, 10000)(rng_));
    std::this_thread::sleep_for(down);
    bool back = cluster_.restart(node);
    ++done_.broker_kills;
    say("SIGKILL broker node " + std::to_string(node) + " (" + why + "), restarted after " +
        std::to_string(down.count()) + " ms" + (back ? "" : " -- IT DID NOT COME BACK"));
    if (!back) ADD_FAILURE() << "node " << node << " did not restart; see " << cluster_.log();
    return back;
  }

  void zombie() {
    auto name = pick_instance();
    instances_[name]->signal(SIGSTOP);
    std::this_thread::sleep_for(12s);  // session timeout 6 s, transaction timeout 10 s
    instances_[name]->signal(SIGCONT);
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

  void hang() {
    auto name = pick_instance();
    // A just restarted instance may not listen yet: wait until its server answers.
    const auto listening =
        sluice::test::eventually([&] { return sluice::test::http_status_or_zero(http_ports_[name], "/health") != 0; });
    EXPECT_TRUE(listening) << job_->name() << ": instance " << name << "'s HTTP server never answered";
    if (!listening) return;
    cluster_.pause_all(true);
    const auto hung_at = std::chrono::steady_clock::now();
    // The group cannot be described: 503 after the description's 5 s, and its requests end
    // only when the brokers answer again.
    const auto metadata = sluice::test::http_get(http_ports_[name], "/metadata");
    EXPECT_EQ(metadata.status, 503) << job_->name() << ": /metadata of " << name << " while hung: " << metadata.body;
    std::this_thread::sleep_until(hung_at + 8s);  // under the transaction and session timeouts
    cluster_.pause_all(false);
    // Once a new description succeeds, the brokers have answered what was asked before it
    // on the same connections: the late ends of the timed-out description have come, and
    // the instance must have lived through them.
    const bool described =  // 0 while not listening: dead, or (if restarted) not yet
        sluice::test::eventually(
            [&] { return sluice::test::http_status_or_zero(http_ports_[name], "/metadata") == 200; });
    EXPECT_TRUE(described && instances_[name]->running())
        << job_->name() << ": instance " << name
        << " after the hung cluster: " << sluice::test::describe_exit(instances_[name]->wait_exit(0ms)) << "; "
        << sluice::test::last_lines(instances_[name]->log(), 8);
    ++done_.hangs;
    say("SIGSTOP every broker for 8 s (instance " + name + " asked for /metadata meanwhile), then SIGCONT");
  }

  void churn() {
    start("d");
    ++done_.joins;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(8000, 15000)(rng_)));
    instances_["d"]->signal(SIGTERM);
    auto st = instances_["d"]->wait_exit(90s);
    ++done_.leaves;
    say("instance d joined, worked and left (" + sluice::test::describe_exit(st) + ")");
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << job_->name() << ": d did not leave cleanly";
  }

  /// Injects `f`; false when the cluster did not recover from it.
  bool inject(fault f) {
    switch (f) {
      case fault::instance_kill: kill_instance(state_dir_action::keep); break;
      case fault::instance_kill_wiped: kill_instance(state_dir_action::wipe); break;
      case fault::broker_leader: return kill_broker(broker_target::leader);
      case fault::broker_controller: return kill_broker(broker_target::controller);
      case fault::broker_any: return kill_broker(broker_target::any);
      case fault::zombie: zombie(); break;
      case fault::cut: cut(); break;
      case fault::hang: hang(); break;
      case fault::churn: churn(); break;
    }
    return true;
  }

  /// A soak's next fault: mostly instance kills (a quarter of them with the state directory
  /// deleted), then brokers, then the rest.
  fault pick_random() {
    int r = std::uniform_int_distribution<int>(0, 99)(rng_);
    if (r < 41) return fault::instance_kill;
    if (r < 55) return fault::instance_kill_wiped;
    if (r < 65) return fault::broker_leader;
    if (r < 72) return fault::broker_controller;
    if (r < 78) return fault::broker_any;
    if (r < 85) return fault::zombie;
    if (r < 90) return fault::cut;
    if (r < 94) return fault::hang;
    return fault::churn;
  }

  // ---- verification ---------------------------------------------------------------
  /// For a failure: each output partition's high watermark against its last stable offset.
  /// An LSO that stays behind the high watermark while every instance idles is a
  /// transaction left open on the partition (a hanging transaction), which hides every later
  /// commit from read_committed readers.
  void print_output_offsets() {
    sluice::kafka::consumer uncommitted({{"bootstrap.servers", bootstrap_}, {"isolation.level", "read_uncommitted"}});
    sluice::kafka::consumer committed({{"bootstrap.servers", bootstrap_}, {"isolation.level", "read_committed"}});
    for (const auto& topic : job_->output_topics())
      for (std::int32_t p = 0; p < sluice::test::faults::topic_partitions; ++p) {
        try {
          const auto high = uncommitted.watermarks(topic, p, 30s).second;
          const auto stable = committed.watermarks(topic, p, 30s).second;
          say(topic + "[" + std::to_string(p) + "]: high watermark " + std::to_string(high) + ", last stable offset " +
              std::to_string(stable) + (stable < high ? " (a transaction is open)" : ""));
        } catch (const std::exception& e) {
          say(topic + "[" + std::to_string(p) + "]: offsets unknown: " + e.what());
        }
      }
  }

  /// Reads the output read_committed until the job says it reflects every record fed.
  bool wait_until_caught_up(std::chrono::seconds timeout) {
    sluice::topic_reader reader(cfg_, job_->output_topics(), sluice::isolation::read_committed);
    const auto deadline = clock_type::now() + timeout;
    for (;;) {
      if (job_->observe(reader.poll(500ms))) return true;
      if (clock_type::now() > deadline) return false;
      if (!all_running(permanent_)) return false;
    }
  }

  std::unique_ptr<fault_job> job_;
  cluster& cluster_;
  std::string bootstrap_;
  std::filesystem::path work_;
  unsigned seed_;
  sluice::config cfg_;
  std::mt19937 rng_;
  std::string app_id_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::map<std::string, std::unique_ptr<job_process>> instances_;
  std::map<std::string, int> runs_;
  std::map<std::string, std::uint16_t> http_ports_;  ///< each instance's application.server port
  const std::vector<std::string> permanent_ = {"a", "b", "c"};
  long fed_ = 0, total_ = 0, chunk_ = 1000;
  injected done_;
  clock_type::time_point started_at_ = clock_type::now();
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
    ASSERT_FALSE(bootstrap_.empty()) << "the three-node cluster did not start; see " << cluster_->log();
  }

  void TearDown() override {
    cluster_.reset();  // stops the cluster, also after a failure
    if (work_.empty()) return;
    if (HasFailure() || std::getenv("SLUICE_KEEP_LOGS")) {
      std::cout << "logs kept in " << work_ << "\n";
    } else {
      std::error_code ec;
      std::filesystem::remove_all(work_, ec);
    }
  }

  std::filesystem::path work_;
  std::unique_ptr<cluster> cluster_;
  std::string bootstrap_;
};

}  // namespace

// Each job of the run, one after the other, on the suite's cluster, under the same kind of
// schedule; a job that fails is reported and the next one still runs.
TEST_F(fault_suite, exactly_once_jobs_survive_randomized_faults) {
  SLUICE_REQUIRE_BROKER();
  const long soak = soak_seconds();
  const unsigned seed = run_seed();
  const auto jobs = jobs_of_run();
  std::string names;
  for (const auto& j : jobs) names += (names.empty() ? "" : ", ") + j;
  std::cout << "fault suite: jobs " << names << ", seed " << seed << ", cluster " << bootstrap_ << std::endl;
  for (const auto& name : jobs) {
    SCOPED_TRACE("job " + name + ", seed " + std::to_string(seed));
    job_under_faults run(make_job(name), *cluster_, bootstrap_, work_ / name, seed);
    run.run(soak);
  }
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--soak" && i + 1 < argc) ::setenv("SLUICE_SOAK_SECONDS", argv[i + 1], 1);
  return RUN_ALL_TESTS();
}
