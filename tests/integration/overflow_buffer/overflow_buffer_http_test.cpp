// GET /overflow/backlog and GET /overflow/customers/{c} on two instances of the
// sluice-overflow-buffer job against a real broker. Every customer's rate is 0, so every
// record stays buffered and the expected backlog is known exactly: customer k holds
// 10 * (k + 1) records. With scope=instance each instance answers for the partitions it runs
// (together: every partition once, every customer once with its exact count); the default
// scope gathers the other instance's partitions, so either instance answers the
// application's largest backlogs; a customer asked of the instance not running its partition
// is forwarded to the one that does (X-Sluice-Served-By names it). With one instance killed,
// the other's gather names the partitions and the instance it could not reach.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "broker_env.hpp"
#include "http_client.hpp"
#include "job_process.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
using sluice::test::job_process;

namespace {

constexpr int customers = 8;

std::string customer_name(int c) { return "hold-" + std::to_string(c); }
int expected_backlog(int c) { return 10 * (c + 1); }

class overflow_buffer_http : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sluice::test::broker_bootstrap().empty()) return;
    work_ = std::filesystem::temp_directory_path() / sluice::test::unique_name("sluice-overflow-http");
    std::filesystem::create_directories(work_);
    cfg_.set("bootstrap.servers", sluice::test::broker_bootstrap());
    app_id_ = sluice::test::unique_name("ovf-http");
    input_ = sluice::test::unique_name("ovf-http-in");
    output_ = sluice::test::unique_name("ovf-http-out");
    rates_ = sluice::test::unique_name("ovf-http-rates");
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 4);
    admin.create_topic(output_, 4);
    admin.create_topic(rates_, 1, sluice::cleanup_policy::compact);
    admin.create_topic(app_id_ + "-dlq", 1);
    sluice::topic_writer writer(cfg_);
    for (int c = 0; c < customers; ++c)
      for (int i = 0; i < expected_backlog(c); ++i)
        writer.send_raw(input_, customer_name(c), nlohmann::json{{"n", i}}.dump());
    writer.flush();
  }

  void TearDown() override {
    jobs_.clear();
    if (work_.empty()) return;
    if (HasFailure()) {
      for (const auto& log : logs_)
        std::cout << "---- last lines of " << log << " ----\n" << sluice::test::last_lines(log, 25) << "\n";
    } else {
      std::error_code ec;
      std::filesystem::remove_all(work_, ec);
    }
  }

  std::uint16_t start_instance(const std::string& id) {
    const auto port = sluice::test::free_port();
    auto log = work_ / (id + ".log");
    logs_.push_back(log);
    std::vector<std::string> args = {SLUICE_OVERFLOW_BUFFER_BIN};
    auto set = [&](const std::string& k, const std::string& v) {
      args.push_back("--set");
      args.push_back(k + "=" + v);
    };
    set("bootstrap.servers", sluice::test::broker_bootstrap());
    set("application.id", app_id_);
    set("input.topic", input_);
    set("output.topic", output_);
    set("expired.topic", "");
    set("rates.topic", rates_);
    set("overflow.default.rate.per.second", "0");  // hold everything
    set("state.dir", (work_ / ("state-" + id)).string());
    set("processing.guarantee", "exactly_once");
    set("commit.interval.ms", "100");
    set("consumer.session.timeout.ms", "6000");
    set("instance.id", id);
    set("application.server", "127.0.0.1:" + std::to_string(port));
    jobs_.push_back(std::make_unique<job_process>(args, log));
    return port;
  }

  static nlohmann::json get_json(std::uint16_t port, const std::string& target, int* status = nullptr) {
    auto r = sluice::test::http_get(port, target);
    if (status) *status = r.status;
    return nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  }

  sluice::config cfg_;
  std::filesystem::path work_;
  std::string app_id_, input_, output_, rates_;
  std::vector<std::unique_ptr<job_process>> jobs_;
  std::vector<std::filesystem::path> logs_;
};

}  // namespace

TEST_F(overflow_buffer_http, backlog_gathers_every_instance_and_customers_answer_on_either_instance) {
  SLUICE_REQUIRE_BROKER();
  const std::uint16_t ports[2] = {start_instance("a"), start_instance("b")};

  // Wait until the two instances split the partitions and their committed buffers hold every
  // record: the evidence is the answers themselves (every partition local to exactly one
  // instance, every customer's exact count).
  std::map<std::string, std::uint64_t> buffered;
  std::map<std::string, int> answered_by;
  std::map<int, int> partition_owner;  // which instance runs which partition, when settled
  std::set<int> partitions_seen;
  bool settled = false;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!settled && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(500ms);
    buffered.clear();
    answered_by.clear();
    partitions_seen.clear();
    partition_owner.clear();
    bool ok = true;
    int local_partitions = 0;
    for (int i = 0; i < 2 && ok; ++i) {
      int status = 0;
      nlohmann::json j;
      try {
        j = get_json(ports[i], "/overflow/backlog?limit=100&scope=instance", &status);
      } catch (const std::exception&) {
        ok = false;  // the server is not up yet
        break;
      }
      if (status != 200 || !j.is_object() || j["partitions"].empty()) {
        ok = false;
        break;
      }
      for (const auto& p : j["partitions"]) {
        partitions_seen.insert(p.get<int>());
        partition_owner[p.get<int>()] = i;
        ++local_partitions;
      }
      for (const auto& c : j["customers"]) {
        buffered[c["customer"].get<std::string>()] += c["buffered"].get<std::uint64_t>();
        answered_by[c["customer"].get<std::string>()] = i;
      }
    }
    settled = ok && local_partitions == 4 && partitions_seen.size() == 4 && buffered.size() == customers;
    for (int c = 0; settled && c < customers; ++c)
      settled = buffered[customer_name(c)] == static_cast<std::uint64_t>(expected_backlog(c));
  }
  ASSERT_TRUE(settled) << "the two instances never reported every partition once with every record buffered";

  for (int i = 0; i < 2; ++i) {
    auto j = get_json(ports[i], "/overflow/backlog?limit=2&scope=instance");
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["scope"], "instance");
    ASSERT_LE(j["customers"].size(), 2u);
    std::uint64_t previous = UINT64_MAX;
    for (const auto& c : j["customers"]) {
      const auto name = c["customer"].get<std::string>();
      EXPECT_EQ(answered_by[name], i) << name << " listed by an instance not owning it";
      EXPECT_LE(c["buffered"].get<std::uint64_t>(), previous) << "largest first";
      previous = c["buffered"].get<std::uint64_t>();
      EXPECT_EQ(c["rate_per_second"].get<double>(), 0.0);
      EXPECT_TRUE(c["drain_eta_ms"].is_null()) << "rate 0 never drains";
      EXPECT_GE(c["oldest_age_ms"].get<std::int64_t>(), 0);
      for (const char* field : {"customer", "buffered", "rate_per_second", "oldest_age_ms", "drain_eta_ms"})
        EXPECT_TRUE(c.contains(field)) << field;
    }
  }

  ASSERT_EQ(partition_owner.size(), 4u);

  // The default scope: either instance answers the application's largest backlogs, the same
  // list, every partition answered, the other instance named with its partitions.
  for (int i = 0; i < 2; ++i) {
    auto j = get_json(ports[i], "/overflow/backlog?limit=3");
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["scope"], "application") << j.dump();
    EXPECT_EQ(j["partitions"], nlohmann::json({0, 1, 2, 3})) << j.dump();
    EXPECT_TRUE(j["partitions_unavailable"].empty()) << j.dump();
    EXPECT_TRUE(j["unreachable"].empty()) << j.dump();
    ASSERT_EQ(j["customers"].size(), 3u) << j.dump();
    for (int rank = 0; rank < 3; ++rank) {
      const int c = customers - 1 - rank;  // the largest backlogs: hold-7, hold-6, hold-5
      const auto& row = j["customers"][rank];
      EXPECT_EQ(row["customer"], customer_name(c)) << j.dump();
      EXPECT_EQ(row["buffered"].get<int>(), expected_backlog(c));
      EXPECT_EQ(answered_by[customer_name(c)], partition_owner[row["partition"].get<int>()])
          << "row partition " << row["partition"] << " of " << customer_name(c);
    }
    std::set<int> other_partitions;
    for (const auto& [p, owner] : partition_owner)
      if (owner != i) other_partitions.insert(p);
    ASSERT_EQ(j["instances_asked"].size(), other_partitions.empty() ? 0u : 1u) << j.dump();
    if (!other_partitions.empty()) {
      EXPECT_EQ(j["instances_asked"][0]["instance"], "127.0.0.1:" + std::to_string(ports[1 - i])) << j.dump();
      EXPECT_EQ(j["instances_asked"][0]["partitions"].get<std::set<int>>(), other_partitions) << j.dump();
    }
  }
  // Every customer, gathered, with its exact count.
  {
    auto j = get_json(ports[0], "/overflow/backlog?limit=100");
    std::map<std::string, std::uint64_t> gathered;
    for (const auto& c : j["customers"])
      gathered[c["customer"].get<std::string>()] += c["buffered"].get<std::uint64_t>();
    EXPECT_EQ(gathered, buffered);
  }

  // A customer answers on either instance: the owner's own answer, forwarded by the other.
  for (int c = 0; c < customers; ++c) {
    const auto name = customer_name(c);
    const int owner = answered_by[name];
    for (int asked : {owner, 1 - owner}) {
      auto r = sluice::test::http_get(ports[asked], "/overflow/customers/" + name);
      ASSERT_EQ(r.status, 200) << name << " asked of instance " << asked << ": " << r.body;
      auto j = nlohmann::json::parse(r.body);
      EXPECT_EQ(j["customer"], name);
      EXPECT_EQ(j["buffered"].get<int>(), expected_backlog(c));
      EXPECT_EQ(j["scheduled"].get<int>(), 0);
      EXPECT_EQ(partition_owner[j["partition"].get<int>()], owner);
      EXPECT_EQ(r.header("X-Sluice-Served-By"), "127.0.0.1:" + std::to_string(ports[owner]))
          << name << " asked of instance " << asked;
    }
  }

  int status = 0;
  get_json(ports[0], "/overflow/backlog?limit=0", &status);
  EXPECT_EQ(status, 400);
  get_json(ports[0], "/overflow/backlog?scope=everything", &status);
  EXPECT_EQ(status, 400);

  // Instance b killed: until the group notices (session timeout 6 s) its partitions still
  // belong to it; a's gather cannot reach it and says so, partition by partition, naming b,
  // and still answers with its own partitions. Each partition is in exactly one of
  // "partitions" and "partitions_unavailable", and every unavailable one says why.
  jobs_[1]->signal(SIGKILL);
  auto j = get_json(ports[0], "/overflow/backlog?limit=100", &status);
  ASSERT_EQ(status, 200) << j.dump();
  std::set<int> answered = j["partitions"].get<std::set<int>>();
  std::set<int> missing = j["partitions_unavailable"].get<std::set<int>>();
  for (int p = 0; p < 4; ++p) EXPECT_NE(answered.count(p), missing.count(p)) << "partition " << p << ": " << j.dump();
  std::set<int> explained;
  for (const auto& u : j["unreachable"]) {
    explained.insert(u["partition"].get<int>());
    if (partition_owner[u["partition"].get<int>()] == 1) {
      EXPECT_NE(u["error"].get<std::string>().find("127.0.0.1:" + std::to_string(ports[1])), std::string::npos)
          << "an unreachable partition of b names b: " << u.dump();
    }
  }
  EXPECT_EQ(explained, missing) << j.dump();
  std::set<int> b_partitions;
  for (const auto& [p, owner] : partition_owner)
    if (owner == 1) b_partitions.insert(p);
  EXPECT_EQ(missing, b_partitions) << "b's partitions are the ones not reached: " << j.dump();
}
