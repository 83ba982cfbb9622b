// task_directory: the per-task state folder and its flock(2).
#include "sluice/state/task_directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "sluice/error.hpp"

namespace sluice::state {
namespace {

namespace fs = std::filesystem;

constexpr const char* lock_file_name = ".lock";

void validate_component(std::string_view what, std::string_view id) {
  if (id.empty() || id == "." || id == ".." || id.find('/') != std::string_view::npos) {
    throw sluice::error(errc::invalid_config,
                        std::string(what) + " '" + std::string(id) + "' cannot be used as a directory name");
  }
}

std::string read_holder_pid(int fd) {
  char buf[32] = {};
  auto n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) {
    pid.pop_back();
  }
  return pid.empty() ? std::string("unknown") : pid;
}

/// An exclusive flock(2) on `<dir>/.lock` with this process's pid written into it; the
/// open descriptor holds it. A lock held elsewhere throws errc::state naming `dir` and `fix`.
int lock_directory(const fs::path& dir, std::string_view fix) {
  const auto lock_path = dir / lock_file_name;
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw sluice::error(errc::io, "cannot create lock file '" + lock_path.string() + "': " + std::strerror(errno));
  }
  // flock locks belong to the open file description: a second open() in this process
  // conflicts just like another process does.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string pid = read_holder_pid(fd);
    ::close(fd);
    if (err == EWOULDBLOCK) {
      throw sluice::error(errc::state, "state directory '" + dir.string() +
                                           "' is locked by another sluice instance (pid " + pid + "); " +
                                           std::string(fix));
    }
    throw sluice::error(errc::io, "cannot lock state directory '" + dir.string() + "': " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    spdlog::warn("state: cannot write the pid into '{}': {}", lock_path.string(), std::strerror(errno));
  }
  return fd;
}

}  // namespace

task_directory::task_directory(const fs::path& state_dir, std::string_view application_id, std::string_view task_id) {
  validate_component("application.id", application_id);
  validate_component("task id", task_id);
  path_ = state_dir / std::string(application_id) / std::string(task_id);
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec) {
    throw sluice::error(
        errc::io, "cannot create state directory '" + path_.string() + "': " + ec.message() + "; check state.dir");
  }
  lock_fd_ = lock_directory(path_, "give each instance its own state.dir");
}

task_directory::task_directory(task_directory&& other) noexcept
    : path_(std::move(other.path_)), lock_fd_(std::exchange(other.lock_fd_, -1)) {}

task_directory& task_directory::operator=(task_directory&& other) noexcept {
  if (this != &other) {
    if (lock_fd_ >= 0) {
      ::close(lock_fd_);
    }
    path_ = std::move(other.path_);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

task_directory::~task_directory() {
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);  // releases the flock; the file stays (unlinking it would race)
  }
}

fs::path task_directory::store_path(std::string_view store_name) const { return path_ / std::string(store_name); }

void task_directory::wipe() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (entry.path().filename() == lock_file_name) {
      continue;
    }
    fs::remove_all(entry.path(), ec);
    if (ec) {
      break;
    }
  }
  if (ec) {
    throw sluice::error(errc::io, "cannot wipe state directory '" + path_.string() + "': " + ec.message());
  }
  spdlog::info("state: wiped state directory '{}'", path_.string());
}

void task_directory::wipe_store(std::string_view store_name) {
  validate_component("store name", store_name);
  if (store_name == lock_file_name) {
    return;
  }
  std::error_code ec;
  fs::remove_all(store_path(store_name), ec);
  if (ec) {
    throw sluice::error(errc::io, "cannot wipe state store '" + std::string(store_name) + "' in '" + path_.string() +
                                      "': " + ec.message());
  }
  spdlog::info("state: wiped store '{}' in '{}'", store_name, path_.string());
}

}  // namespace sluice::state

namespace sluice::state {

application_directory::application_directory(const fs::path& state_dir, std::string_view application_id) {
  validate_component("application.id", application_id);
  path_ = state_dir / std::string(application_id);
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (ec) {
    throw sluice::error(
        errc::io, "cannot create state directory '" + path_.string() + "': " + ec.message() + "; check state.dir");
  }
  lock_fd_ = lock_directory(path_,
                            "it is already running with this state.dir; stop it first, or give this instance "
                            "its own state.dir (and instance.id)");
}

application_directory::~application_directory() {
  if (lock_fd_ >= 0) {
    ::close(lock_fd_);
  }
}

}  // namespace sluice::state
