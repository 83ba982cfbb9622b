// Helpers for the state unit tests: a fresh temp directory per test, an injectable clock,
// and re-running this test binary as a child process (for crashes and cross-process locks).
#pragma once

#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sluice/error.hpp"

extern char** environ;

namespace sluice::state::test {

namespace fs = std::filesystem;

/// The environment variable that makes a test body act as the child of run_child().
inline constexpr const char* child_env = "SLUICE_STATE_TEST_CHILD";

/// The child's argument if this process is a child of run_child(), else nullptr.
inline const char* child_argument() { return std::getenv(child_env); }

/// True in a child process: run_child()'s, or gtest's re-executed death-test child.
inline bool is_child_process() {
  if (child_argument() != nullptr) return true;
  std::ifstream cmdline("/proc/self/cmdline");
  std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  return args.find("--gtest_internal_run_death_test") != std::string::npos;
}

/// A unique directory under the system temp dir, removed on destruction. Children die
/// without destructors, so a child names its directories after its parent, which removes
/// them.
class temp_dir {
 public:
  temp_dir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    const std::string owner =
        is_child_process() ? child_prefix(::getppid()) : "sluice-state-" + std::to_string(::getpid());
    path_ = fs::temp_directory_path() / (owner + "-" + std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    const std::string children = child_prefix(::getpid());
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
      if (e.path().filename().string().rfind(children, 0) == 0) fs::remove_all(e.path(), ec);
    }
  }
  const fs::path& path() const { return path_; }

 private:
  static std::string child_prefix(pid_t parent) { return "sluice-state-child-of-" + std::to_string(parent) + "-"; }
  fs::path path_;
};

/// A clock tests move by hand; thread-safe (RocksDB compaction threads read it).
struct manual_clock {
  std::shared_ptr<std::atomic<std::int64_t>> now = std::make_shared<std::atomic<std::int64_t>>(1'700'000'000'000);
  std::function<std::int64_t()> fn() const {
    return [n = now] { return n->load(); };
  }
  void advance(std::int64_t ms) { *now += ms; }
};

/// Runs the current test again in a child process with SLUICE_STATE_TEST_CHILD=argument and
/// returns its exit code (-1 if it died by a signal).
inline int run_child(const std::string& argument) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    env_strings.emplace_back(*e);
  }
  env_strings.push_back(std::string(child_env) + "=" + argument);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe_arg = exe;
  std::vector<char*> argv{exe_arg.data(), filter.data(), nullptr};
  pid_t pid = 0;
  if (::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) {
    ADD_FAILURE() << "posix_spawn failed";
    return -1;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Runs `f` and returns the sluice::error it throws (failing the test if it throws none).
template <class F>
sluice::error thrown_error(F&& f) {
  try {
    f();
  } catch (const sluice::error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a sluice::error";
  return sluice::error(errc::ok, "");
}

}  // namespace sluice::state::test
