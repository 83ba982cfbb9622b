// A changelog for the state unit tests: what a store logs, kept as the runtime's changelog
// writer would send it, and handed back as restore batches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/state/state_store.hpp"

namespace sluice::state::test {

/// When a logged record reaches the log.
enum class logged { at_once, at_commit };

/// Records every log() call. With logged::at_commit, records wait as the open transaction's
/// do under exactly-once: commit() moves them into the log, abort() drops them; with
/// logged::at_once they are in the log at once.
///
/// Lifecycle: outlives the stores that log into it. Threading: the test's thread only.
class recording_changelog final : public changelog_sink {
 public:
  struct record {
    std::string key;
    std::optional<std::string> value;
    std::int64_t timestamp;
  };

  explicit recording_changelog(logged when = logged::at_once) : hold_(when == logged::at_commit) {}

  void log(std::string_view key, const std::optional<std::string_view>& value, std::int64_t timestamp) override {
    (hold_ ? pending_ : log_)
        .push_back({std::string(key), value ? std::optional<std::string>(*value) : std::nullopt, timestamp});
  }
  void commit() {
    log_.insert(log_.end(), pending_.begin(), pending_.end());
    pending_.clear();
  }
  void abort() { pending_.clear(); }

  /// What reached the log, in order.
  const std::vector<record>& records() const { return log_; }

  /// Up to `count` logged records from `first` as one restore batch (views into the log).
  std::vector<restore_record> restore_batch(std::size_t first = 0,
                                            std::size_t count = std::numeric_limits<std::size_t>::max()) const {
    std::vector<restore_record> batch;
    const std::size_t end = first + std::min(count, log_.size() - std::min(first, log_.size()));
    for (std::size_t i = first; i < end; ++i) {
      const auto& r = log_[i];
      batch.push_back({r.key, r.value ? std::optional<std::string_view>(*r.value) : std::nullopt, r.timestamp});
    }
    return batch;
  }

 private:
  bool hold_;
  std::vector<record> pending_;
  std::vector<record> log_;
};

}  // namespace sluice::state::test
