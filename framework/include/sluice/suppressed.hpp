// The options of ktable::suppress (sluice/suppress.hpp): until_window_closes(),
// until_time_limit() and the buffer's limits, as Kafka Streams 3.9's Suppressed and
// BufferConfig. See docs/time-and-windows.md, "Suppression".
//
// Thread-safety: values; copy freely.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "sluice/error.hpp"

namespace sluice {

/// What a suppression buffer does when a record would take it past its limits.
enum class buffer_full {
  /// Stop the job with an error naming the buffer and its limits (Kafka Streams'
  /// shutDownWhenFull). The only choice for until_window_closes, whose results are final.
  shut_down,
  /// Emit the oldest buffered records early until it fits again (Kafka Streams'
  /// emitEarlyWhenFull): an early record is not final, a later one for its key may follow.
  emit_early,
};

/// The limits of a suppression buffer (Kafka Streams' BufferConfig).
struct buffer_config {
  /// At most this many keys are buffered.
  /// Default: no limit.
  std::uint64_t max_records = std::numeric_limits<std::uint64_t>::max();
  /// At most this many bytes are buffered: the sum over buffered keys of their entries' sizes
  /// in the buffer's store (serialized key, value, timestamp, headers, and the index entry
  /// holding the key's prior value: what the suppression last emitted for it). Kafka Streams
  /// counts the prior value too, but its estimate of the rest is its own (the record's old
  /// value, the source topic's name), so a byte limit trips at other points there.
  /// Default: no limit.
  std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();
  /// What happens when a record would exceed a limit.
  /// Default: buffer_full::shut_down.
  buffer_full when_full = buffer_full::shut_down;
};

/// How a table's updates are suppressed; made by until_window_closes() and until_time_limit().
class suppressed {
 public:
  enum class kind { until_window_closes, until_time_limit };

  /// Names the suppression processor `name` and its buffer store `<name>-store` (Kafka
  /// Streams' Suppressed#withName); by default both get generated names
  /// (KTABLE-SUPPRESS-<n>, KTABLE-SUPPRESS-STATE-STORE-<n>).
  suppressed with_name(std::string name) const {
    if (name.empty()) throw error(errc::invalid_topology, "suppressed::with_name: the name must not be empty");
    auto s = *this;
    s.name_ = std::move(name);
    return s;
  }

  kind what() const noexcept { return kind_; }
  std::chrono::milliseconds time_to_wait() const noexcept { return wait_; }
  const buffer_config& buffer() const noexcept { return buffer_; }
  const std::string& name() const noexcept { return name_; }

 private:
  friend suppressed until_window_closes(buffer_config);
  friend suppressed until_time_limit(std::chrono::milliseconds, buffer_config);
  suppressed(kind k, std::chrono::milliseconds wait, buffer_config buffer) : kind_(k), wait_(wait), buffer_(buffer) {}

  kind kind_;
  std::chrono::milliseconds wait_;
  buffer_config buffer_;
  std::string name_;
};

/// Emits exactly one final result per window, when stream time (the highest timestamp the
/// suppression has seen) reaches window end + the windows' grace (Kafka Streams'
/// Suppressed.untilWindowCloses). Only on the table of a windowed aggregation; the buffer
/// must shut down when full (an early result would not be final).
inline suppressed until_window_closes(buffer_config buffer = {}) {
  if (buffer.when_full != buffer_full::shut_down)
    throw error(errc::invalid_topology,
                "until_window_closes: the buffer must shut down when full (buffer_full::shut_down), since an early "
                "result would not be final; for early results use until_time_limit(...)");
  return suppressed(suppressed::kind::until_window_closes, std::chrono::milliseconds{0}, buffer);
}

/// Emits a key's latest update once stream time reaches the timestamp of the update that
/// first buffered it + `time_to_wait_for_more_events` (Kafka Streams'
/// Suppressed.untilTimeLimit): at most one record per key per period.
inline suppressed until_time_limit(std::chrono::milliseconds time_to_wait_for_more_events, buffer_config buffer) {
  if (time_to_wait_for_more_events.count() < 0)
    throw error(errc::invalid_topology, "until_time_limit: the time to wait must be >= 0, got " +
                                            std::to_string(time_to_wait_for_more_events.count()) + " ms");
  return suppressed(suppressed::kind::until_time_limit, time_to_wait_for_more_events, buffer);
}

}  // namespace sluice
