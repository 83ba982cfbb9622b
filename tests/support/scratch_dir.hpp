// Where a test process keeps its files: state directories, job work directories, metrics
// files. One directory per process under the system temp dir, removed when the process
// exits, so a test run leaves nothing behind in /tmp however many apps it starts.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "broker_env.hpp"

namespace sluice::test {

/// The process's scratch directory, `<temp>/sluice-test-<pid>`, created on first use and
/// removed at normal exit by the process that created it (a forked child that exits does
/// not remove its parent's). A test killed before exit leaves it; the next run's names
/// never collide with it (they carry the pid).
inline const std::filesystem::path& scratch_root() {
  struct root {
    pid_t owner = ::getpid();
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("sluice-test-" + std::to_string(owner));
    root() { std::filesystem::create_directories(path); }
    ~root() {
      if (::getpid() != owner) return;
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const root r;
  return r.path;
}

/// A fresh path under scratch_root(), named `prefix-...` uniquely (see unique_name); not
/// created: an app makes its state.dir itself.
inline std::filesystem::path scratch_path(const std::string& prefix) { return scratch_root() / unique_name(prefix); }

}  // namespace sluice::test
