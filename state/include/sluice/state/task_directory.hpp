// sluice::state::task_directory: a task's folder of stores, locked against a second owner.
#pragma once

#include <filesystem>
#include <string_view>

namespace sluice::state {

/// The directory `<state_dir>/<application_id>/<task_id>/` holding a task's stores, each in
/// `<task dir>/<store name>`, and an exclusive flock(2) on `<task dir>/.lock` held for the
/// object's lifetime (the lock file carries the holder's pid).
///
/// Two owners of one task directory would corrupt each other's stores; so a second holder,
/// whether another process or another task_directory in the same process, fails with
/// sluice::error(errc::state, "state directory '<path>' is locked by another sluice instance
/// (pid N); give each instance its own state.dir"). The lock dies with the process, so a
/// crashed instance never leaves a stale lock.
///
/// Threading: not thread-safe; one owner (the task) uses it.
class task_directory {
 public:
  /// Creates the directory if needed and takes the lock. Throws sluice::error(errc::state)
  /// if the lock is held, sluice::error(errc::io) if the directory or lock file cannot be
  /// created, sluice::error(errc::invalid_config) for empty or path-like ids.
  task_directory(const std::filesystem::path& state_dir, std::string_view application_id, std::string_view task_id);
  task_directory(task_directory&& other) noexcept;
  task_directory& operator=(task_directory&& other) noexcept;
  task_directory(const task_directory&) = delete;
  task_directory& operator=(const task_directory&) = delete;
  /// Releases the lock (the directory and its stores stay).
  ~task_directory();

  /// `<state_dir>/<application_id>/<task_id>`.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// Where the store named `store_name` lives: `path() / store_name`.
  std::filesystem::path store_path(std::string_view store_name) const;

  /// Removes every store folder (everything except the lock file), e.g. after corruption.
  /// Stores in it must be closed. Throws sluice::error(errc::io) on failure.
  void wipe();
  /// Removes one store's folder. Throws sluice::error(errc::io) on failure.
  void wipe_store(std::string_view store_name);

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;
};

/// The directory `<state_dir>/<application_id>/` of one instance of a job, locked for the
/// whole life of the instance by an exclusive flock(2) on `<state_dir>/<application_id>/.lock`.
///
/// The app takes it before it creates any Kafka client: a second instance started on the
/// same state.dir would otherwise join the group with the same derived group.instance.id
/// and transactional.id and fence the first one before any task directory lock is reached.
/// It fails at once with sluice::error(errc::state, "state directory '<path>' is locked by
/// another sluice instance (pid N); ..."). The lock dies with the process.
///
/// Threading: not thread-safe; the app owns it from start() to close().
class application_directory {
 public:
  /// Creates the directory if needed and takes the lock. Throws sluice::error(errc::state)
  /// if the lock is held, sluice::error(errc::io) if the directory or lock file cannot be
  /// created, sluice::error(errc::invalid_config) for an empty or path-like id.
  application_directory(const std::filesystem::path& state_dir, std::string_view application_id);
  application_directory(const application_directory&) = delete;
  application_directory& operator=(const application_directory&) = delete;
  /// Releases the lock (the directory stays).
  ~application_directory();

  /// `<state_dir>/<application_id>`.
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;
};

}  // namespace sluice::state
