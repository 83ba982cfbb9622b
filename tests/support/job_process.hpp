// A job binary run as a child process for tests that stop, kill and restart jobs.
// posix_spawn with stdin from /dev/null and stdout+stderr into a log file; the destructor
// SIGKILLs and reaps a child still running, so a failing test never leaves one behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "text.hpp"

extern char** environ;

namespace sluice::test {

class job_process {
 public:
  /// Starts args[0] (a path) with args[1..]; output goes to `log` (truncated). The child's
  /// environment is this process's plus `extra_env` ("NAME=value" entries).
  job_process(const std::vector<std::string>& args, std::filesystem::path log,
              const std::vector<std::string>& extra_env = {})
      : log_(std::move(log)) {
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e) envp.push_back(*e);
    for (const auto& e : extra_env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  ~job_process() {
    if (status_) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  job_process(const job_process&) = delete;
  job_process& operator=(const job_process&) = delete;

  /// Sends `sig` unless the process already exited.
  void signal(int sig) {
    if (!status_) ::kill(pid_, sig);
  }
  /// Whether the process is still running (reaps it when it is not).
  bool running() {
    if (!status_) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    }
    return !status_;
  }
  /// The wait status if the process exited within `timeout`, else nullopt.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return status_;
  }
  const std::filesystem::path& log() const { return log_; }
  pid_t pid() const { return pid_; }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// "exited with code 1", "killed by signal Killed", "still running".
inline std::string describe_exit(const std::optional<int>& st) {
  if (!st) return "still running";
  if (WIFEXITED(*st)) return "exited with code " + std::to_string(WEXITSTATUS(*st));
  if (WIFSIGNALED(*st)) return std::string("killed by signal ") + ::strsignal(WTERMSIG(*st));
  return "wait status " + std::to_string(*st);
}

/// The last `lines` lines of a text file (for failure messages).
inline std::string last_lines(const std::filesystem::path& p, std::size_t lines) {
  const auto text = file_text(p);
  std::size_t pos = text.size();
  for (std::size_t n = 0; pos > 0 && n <= lines; ++n) {
    auto nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos);
}

}  // namespace sluice::test
