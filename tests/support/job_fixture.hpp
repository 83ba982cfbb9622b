// A GoogleTest fixture for tests that run a shipped job as a child process against the real
// broker: a work directory (kept with the jobs' last log lines when the test fails), jobs
// started with `--set key=value` settings, evidence that a job's group consumed its input
// (committed offsets at the end), a clean stop, and reads of committed output.
//
// Lifecycle: SetUp makes the work directory (only when a broker is configured); TearDown
// kills the jobs still running and removes the directory unless the test failed or
// SLUICE_KEEP_LOGS is set. Single-threaded, like the tests that use it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "broker_env.hpp"
#include "group_offsets.hpp"
#include "job_process.hpp"
#include "sluice/client.hpp"

namespace sluice::test {

class job_fixture : public ::testing::Test {
 protected:
  using settings = std::vector<std::pair<std::string, std::string>>;

  void SetUp() override {
    if (broker_bootstrap().empty()) return;
    work_ = std::filesystem::temp_directory_path() / unique_name("sluice-job-test");
    std::filesystem::create_directories(work_);
    cfg_.set("bootstrap.servers", broker_bootstrap());
  }

  void TearDown() override {
    jobs_.clear();
    if (work_.empty()) return;
    if (HasFailure() || std::getenv("SLUICE_KEEP_LOGS")) {
      for (const auto& log : logs_)
        std::cout << "---- last lines of " << log << " ----\n" << last_lines(log, 25) << "\n";
      std::cout << "logs and state kept in " << work_ << "\n";
    } else {
      std::error_code ec;
      std::filesystem::remove_all(work_, ec);
    }
  }

  /// Starts `binary` with `--set k=v` for every setting (bootstrap.servers and a state.dir
  /// in the work directory first, so `with` can override them); its log is runN.log.
  job_process& start_job(const std::string& binary, const settings& with) {
    auto log = work_ / ("run" + std::to_string(logs_.size()) + ".log");
    logs_.push_back(log);
    std::vector<std::string> args = {binary};
    auto set = [&](const std::string& k, const std::string& v) {
      args.push_back("--set");
      args.push_back(k + "=" + v);
    };
    set("bootstrap.servers", broker_bootstrap());
    set("state.dir", (work_ / "state").string());
    for (const auto& [k, v] : with) set(k, v);
    jobs_.push_back(std::make_unique<job_process>(args, log));
    return *jobs_.back();
  }

  /// Waits until `group` committed the end of every partition of each of `topics`, in
  /// order (a later sub-topology's input after an earlier one's). Fails if the job exits
  /// first or the end is not reached within `timeout`.
  void expect_consumed(job_process& job, const std::string& group,
                       const std::vector<std::pair<std::string, std::int32_t>>& topics,
                       std::chrono::seconds timeout = std::chrono::seconds(120)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const auto& [topic, partitions] : topics) {
      for (;;) {
        ASSERT_TRUE(job.running()) << job.log() << ": the job "
                                   << describe_exit(job.wait_exit(std::chrono::milliseconds(0)));
        auto progress = group_progress(broker_bootstrap(), group, topic, partitions);
        if (group_at_end(progress)) break;
        if (std::chrono::steady_clock::now() > deadline) {
          std::string state;
          for (const auto& p : progress)
            state +=
                " [" + std::to_string(p.partition) + "] " + std::to_string(p.committed) + "/" + std::to_string(p.end);
          FAIL() << "the job's group never committed the end offsets of " << topic << ":" << state;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    }
  }

  /// SIGTERM, then expects a clean exit within a minute.
  void stop_cleanly(job_process& job) {
    job.signal(SIGTERM);
    auto st = job.wait_exit(std::chrono::seconds(60));
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << job.log() << ": " << describe_exit(st);
  }

  /// Everything committed so far in `topics`, read read_committed to the end.
  std::vector<raw_message> read_all(const std::vector<std::string>& topics) {
    topic_reader reader(cfg_, topics, isolation::read_committed);
    return reader.read_to_end(std::chrono::seconds(120));
  }

  config cfg_;
  std::filesystem::path work_;
  std::vector<std::unique_ptr<job_process>> jobs_;
  std::vector<std::filesystem::path> logs_;
};

}  // namespace sluice::test
