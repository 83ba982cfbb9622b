// sluice::state::changelog_offset: a position in a store's changelog partition, the one
// Kafka offset that crosses from the runtime into the store layer.
#pragma once

#include <compare>
#include <cstdint>

namespace sluice::state {

/// The offset of the next changelog record a store has not applied: the last applied record's
/// offset + 1, Kafka's convention for committed offsets. A store records it atomically with
/// its data (commit, restore) and restores from it after a restart.
///
/// A type of its own so that it cannot be mixed up with a count, a timestamp or the offset
/// of the last record: built only explicitly, compared only with its own kind.
class changelog_offset {
 public:
  constexpr explicit changelog_offset(std::int64_t next) noexcept : next_(next) {}
  /// The offset as Kafka numbers it (what a consumer seeks to, to restore from here).
  constexpr std::int64_t value() const noexcept { return next_; }
  friend constexpr auto operator<=>(changelog_offset, changelog_offset) noexcept = default;

 private:
  std::int64_t next_;
};

}  // namespace sluice::state
