// Time windows for the DSL, with Kafka Streams 3.9's semantics: time_windows (tumbling and
// hopping, with a grace period), windowed<K> (a key and its window) and its serde in Kafka
// Streams' TimeWindowedSerializer layout for output topics.
//
//   b.stream<std::string, view>("views")
//       .group_by_key()
//       .windowed_by(sluice::time_windows::of_size_and_grace(1min, 10s))
//       .count("views-per-minute")            // a window store
//       .to_stream()
//       .to("views-per-minute");              // key: the page's bytes + 8-byte window start
//
// See docs/time-and-windows.md for which records are late and when windows are emitted.
//
// Thread-safety: values; copy freely.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>

#include "sluice/error.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/state/big_endian.hpp"

namespace sluice {

/// A window [start, end): start inclusive, end exclusive, in ms since the epoch.
struct time_window {
  std::int64_t start = 0;
  std::int64_t end = 0;
  friend auto operator<=>(const time_window&, const time_window&) = default;
};

/// A key and the window its aggregate belongs to (Kafka Streams' Windowed<K>).
template <class K>
struct windowed {
  K key{};
  time_window window{};
  friend auto operator<=>(const windowed&, const windowed&) = default;
};

/// Fixed-size windows that advance by a fixed step: tumbling when the step is the size
/// (the default), hopping (overlapping) when it is smaller. Windows are aligned to the epoch:
/// a window starts at every multiple of `advance` (Kafka Streams' TimeWindows).
class time_windows {
 public:
  /// Tumbling windows of `size` with no grace period: a record is late once stream time
  /// reaches its window's end.
  static time_windows of_size_with_no_grace(std::chrono::milliseconds size) { return time_windows(size, {}); }
  /// Tumbling windows of `size` that accept out-of-order records until stream time reaches
  /// window end + `grace`.
  static time_windows of_size_and_grace(std::chrono::milliseconds size, std::chrono::milliseconds grace) {
    return time_windows(size, grace);
  }
  /// Hopping windows: a new window every `advance` (0 < advance <= size).
  time_windows advance_by(std::chrono::milliseconds advance) const {
    if (advance.count() <= 0 || advance > size_)
      throw error(errc::invalid_topology, "time_windows: advance_by(" + std::to_string(advance.count()) +
                                              " ms) must be positive and at most the window size (" +
                                              std::to_string(size_.count()) + " ms)");
    auto w = *this;
    w.advance_ = advance;
    return w;
  }

  std::chrono::milliseconds size() const noexcept { return size_; }
  std::chrono::milliseconds advance() const noexcept { return advance_; }
  std::chrono::milliseconds grace() const noexcept { return grace_; }

  /// The windows a record at `timestamp` belongs to, by start (Kafka Streams'
  /// TimeWindows.windowsFor): starts from max(0, timestamp - size + advance) rounded down to
  /// a multiple of advance, up to timestamp.
  template <class F>
  void for_each_window(std::int64_t timestamp, F&& f) const {
    const std::int64_t size = size_.count(), advance = advance_.count();
    std::int64_t start = std::max<std::int64_t>(0, timestamp - size + advance) / advance * advance;
    for (; start <= timestamp; start += advance) f(time_window{start, start + size});
  }

 private:
  time_windows(std::chrono::milliseconds size, std::chrono::milliseconds grace)
      : size_(size), advance_(size), grace_(grace) {
    if (size.count() <= 0)
      throw error(errc::invalid_topology,
                  "time_windows: the window size must be positive, got " + std::to_string(size.count()) + " ms");
    if (grace.count() < 0)
      throw error(errc::invalid_topology,
                  "time_windows: the grace period must be >= 0, got " + std::to_string(grace.count()) + " ms");
  }
  std::chrono::milliseconds size_, advance_, grace_;
};

/// Windows of a fixed length that slide with the records (Kafka Streams' SlidingWindows,
/// KIP-450): two records are in a common window when their timestamps differ by at most
/// `time_difference`. Instead of a window at every millisecond, a window is kept where its
/// contents change: each record at t gets its "left" window [t - time_difference, t], and a
/// "right" window [t + 1, t + 1 + time_difference] once a later record falls within it.
/// Both ends are inclusive. A time difference of 0 groups the records of the same millisecond
/// (windows [t, t]), as in Kafka Streams. See docs/time-and-windows.md, "Sliding windows".
class sliding_windows {
 public:
  /// Sliding windows of `time_difference` with no grace period.
  static sliding_windows of_time_difference_with_no_grace(std::chrono::milliseconds time_difference) {
    return sliding_windows(time_difference, {});
  }
  /// Sliding windows of `time_difference` accepting out-of-order records until stream time
  /// passes window end + `grace`.
  static sliding_windows of_time_difference_and_grace(std::chrono::milliseconds time_difference,
                                                      std::chrono::milliseconds grace) {
    return sliding_windows(time_difference, grace);
  }

  std::chrono::milliseconds time_difference() const noexcept { return difference_; }
  std::chrono::milliseconds grace() const noexcept { return grace_; }

 private:
  sliding_windows(std::chrono::milliseconds difference, std::chrono::milliseconds grace)
      : difference_(difference), grace_(grace) {
    if (difference.count() < 0)
      throw error(errc::invalid_topology, "sliding_windows: the time difference must be >= 0, got " +
                                              std::to_string(difference.count()) + " ms");
    if (grace.count() < 0)
      throw error(errc::invalid_topology,
                  "sliding_windows: the grace period must be >= 0, got " + std::to_string(grace.count()) + " ms");
  }
  std::chrono::milliseconds difference_, grace_;
};

/// Session windows (Kafka Streams' SessionWindows): a key's records whose timestamps are
/// within `inactivity_gap` of each other form one session, [first record's time, last
/// record's time] (both inclusive); a record that bridges two sessions merges them. See
/// docs/time-and-windows.md, "Session windows".
class session_windows {
 public:
  /// Sessions closed by `inactivity_gap` with no grace period.
  static session_windows of_inactivity_gap_with_no_grace(std::chrono::milliseconds inactivity_gap) {
    return session_windows(inactivity_gap, {});
  }
  /// Sessions that accept out-of-order records until stream time passes session end + `grace`.
  static session_windows of_inactivity_gap_and_grace(std::chrono::milliseconds inactivity_gap,
                                                     std::chrono::milliseconds grace) {
    return session_windows(inactivity_gap, grace);
  }

  std::chrono::milliseconds inactivity_gap() const noexcept { return gap_; }
  std::chrono::milliseconds grace() const noexcept { return grace_; }

 private:
  session_windows(std::chrono::milliseconds gap, std::chrono::milliseconds grace) : gap_(gap), grace_(grace) {
    if (gap.count() <= 0)
      throw error(errc::invalid_topology,
                  "session_windows: the inactivity gap must be positive, got " + std::to_string(gap.count()) + " ms");
    if (grace.count() < 0)
      throw error(errc::invalid_topology,
                  "session_windows: the grace period must be >= 0, got " + std::to_string(grace.count()) + " ms");
  }
  std::chrono::milliseconds gap_, grace_;
};

/// The windows of a stream–stream join (Kafka Streams' JoinWindows): a record of the left
/// stream at time t joins the right stream's records of its key with times in
/// [t - before, t + after]; a right record at t joins left records in [t - after, t + before]
/// (the mirrored window). The factories make before = after = the time difference; before()
/// and after() move one bound and keep the other and the grace. A record's left/outer result
/// without a match comes out once stream time passes its timestamp + after (a left record)
/// or + before (a right record) + `grace`. Each stream's records are kept for
/// before + after + grace. See docs/time-and-windows.md, "Stream–stream joins".
class join_windows {
 public:
  static join_windows of_time_difference_without_grace(std::chrono::milliseconds time_difference) {
    check_time_difference(time_difference);
    return join_windows(time_difference, time_difference, {});
  }
  static join_windows of_time_difference_and_grace(std::chrono::milliseconds time_difference,
                                                   std::chrono::milliseconds grace) {
    check_time_difference(time_difference);
    return join_windows(time_difference, time_difference, grace);
  }

  /// These windows with the start bound moved: a left record at t joins right records from
  /// t - time_difference (Kafka Streams' JoinWindows.before). May be negative (the window then
  /// starts after t) as long as before + after stays >= 0; after and grace are kept.
  join_windows before(std::chrono::milliseconds time_difference) const {
    return join_windows(time_difference, after_, grace_);
  }
  /// These windows with the end bound moved: a left record at t joins right records up to
  /// t + time_difference (Kafka Streams' JoinWindows.after). May be negative (the window then
  /// ends before t) as long as before + after stays >= 0; before and grace are kept.
  join_windows after(std::chrono::milliseconds time_difference) const {
    return join_windows(before_, time_difference, grace_);
  }

  /// How far before a left record's time the right stream's records join it.
  std::chrono::milliseconds before() const noexcept { return before_; }
  /// How far after a left record's time the right stream's records join it.
  std::chrono::milliseconds after() const noexcept { return after_; }
  std::chrono::milliseconds grace() const noexcept { return grace_; }
  /// before + after, Kafka Streams' JoinWindows.size().
  std::chrono::milliseconds size() const noexcept { return before_ + after_; }

 private:
  join_windows(std::chrono::milliseconds before, std::chrono::milliseconds after, std::chrono::milliseconds grace)
      : before_(before), after_(after), grace_(grace) {
    if (size().count() < 0)
      throw error(errc::invalid_topology,
                  "join_windows: before + after must be >= 0 (a window cannot end before it starts), got before " +
                      std::to_string(before.count()) + " ms and after " + std::to_string(after.count()) +
                      " ms; make the negative bound's magnitude at most the other bound");
    if (grace.count() < 0)
      throw error(errc::invalid_topology,
                  "join_windows: the grace period must be >= 0, got " + std::to_string(grace.count()) + " ms");
  }
  static void check_time_difference(std::chrono::milliseconds time_difference) {
    if (time_difference.count() < 0)
      throw error(errc::invalid_topology,
                  "join_windows: the time difference must be >= 0, got " + std::to_string(time_difference.count()) +
                      " ms; for a window that starts or ends after the record use before()/after()");
  }
  std::chrono::milliseconds before_, after_, grace_;
};

/// A key and its session (Kafka Streams' Windowed<K> over a SessionWindow): window.start and
/// window.end are the timestamps of the session's first and last record, both inclusive.
/// A distinct type from windowed<K> because its topic layout differs
/// (SessionWindowedSerializer's).
template <class K>
struct session_windowed {
  K key{};
  time_window window{};
  friend auto operator<=>(const session_windowed&, const session_windowed&) = default;
};

/// A windowed key in Kafka Streams' TimeWindowedSerializer layout: the key's bytes (KS),
/// then the window start as 8 bytes big-endian. The layout has no window end: deserialize
/// gives end = start + window_size_ms, or INT64_MAX when the size is not known (as Kafka
/// Streams' TimeWindowedDeserializer without a window size).
template <class KS, std::int64_t WindowSizeMs = 0>
struct time_windowed_serde {
  using value_type = windowed<typename KS::value_type>;
  static void serialize(const value_type& w, std::string& out) {
    KS::serialize(w.key, out);
    state::append_u64(out, static_cast<std::uint64_t>(w.window.start));
  }
  static value_type deserialize(std::string_view in) {
    if (in.size() < 8)
      throw serialization_error("a time-windowed key needs at least 8 bytes (key bytes + window start), got " +
                                std::to_string(in.size()));
    const auto s = static_cast<std::int64_t>(state::read_u64(in, in.size() - 8));
    const std::int64_t end = WindowSizeMs > 0 && s <= std::numeric_limits<std::int64_t>::max() - WindowSizeMs
                                 ? s + WindowSizeMs
                                 : std::numeric_limits<std::int64_t>::max();
    return {KS::deserialize(in.substr(0, in.size() - 8)), time_window{s, end}};
  }
};

/// A session key in Kafka Streams' SessionWindowedSerializer layout: the key's bytes (KS),
/// then the session end and the session start, each 8 bytes big-endian.
template <class KS>
struct session_windowed_serde {
  using value_type = session_windowed<typename KS::value_type>;
  static void serialize(const value_type& w, std::string& out) {
    KS::serialize(w.key, out);
    state::append_u64(out, static_cast<std::uint64_t>(w.window.end));
    state::append_u64(out, static_cast<std::uint64_t>(w.window.start));
  }
  static value_type deserialize(std::string_view in) {
    if (in.size() < 16)
      throw serialization_error("a session-windowed key needs at least 16 bytes (key bytes + end + start), got " +
                                std::to_string(in.size()));
    auto read = [&](std::size_t at) { return static_cast<std::int64_t>(state::read_u64(in, at)); };
    const std::size_t n = in.size() - 16;
    return {KS::deserialize(in.substr(0, n)), time_window{read(n + 8), read(n)}};
  }
};

namespace detail {
/// Whether K is a time-windowed key (windowed<K>) or a session key (session_windowed<K>).
template <class K>
struct is_windowed : std::false_type {};
template <class K>
struct is_windowed<windowed<K>> : std::true_type {};
template <class K>
struct is_session_windowed : std::false_type {};
template <class K>
struct is_session_windowed<session_windowed<K>> : std::true_type {};
}  // namespace detail

namespace serde_detail {
template <class K>
struct default_serde_for<windowed<K>> {
  using type = time_windowed_serde<typename default_serde_for<K>::type>;
};
template <class K>
struct default_serde_for<session_windowed<K>> {
  using type = session_windowed_serde<typename default_serde_for<K>::type>;
};
}  // namespace serde_detail

/// A value with the timestamp of the record that last updated it, as a windowed
/// aggregation keeps it (Kafka Streams' ValueAndTimestamp): the output timestamp of a
/// window's update is the highest timestamp of the records folded into it.
template <class V>
struct value_and_timestamp {
  V value{};
  std::int64_t timestamp = 0;
  friend bool operator==(const value_and_timestamp&, const value_and_timestamp&) = default;
};

/// State serde of value_and_timestamp<V>: 8 bytes big-endian timestamp, then VS's bytes.
template <class VS>
struct value_and_timestamp_serde {
  using value_type = value_and_timestamp<typename VS::value_type>;
  static void serialize(const value_type& v, std::string& out) {
    out.clear();
    state::append_u64(out, static_cast<std::uint64_t>(v.timestamp));
    std::string payload;
    VS::serialize(v.value, payload);
    out.append(payload);
  }
  static value_type deserialize(std::string_view in) {
    if (in.size() < 8)
      throw serialization_error("a timestamped value needs at least 8 bytes, got " + std::to_string(in.size()));
    return {VS::deserialize(in.substr(8)), static_cast<std::int64_t>(state::read_u64(in))};
  }
};

/// A session's aggregate and its start, as a session store keeps it under (key, session end).
template <class A>
struct session_value {
  A value{};
  std::int64_t start = 0;
  friend bool operator==(const session_value&, const session_value&) = default;
};

/// State serde of session_value<A>: 8 bytes big-endian start, then VS's bytes.
template <class VS>
struct session_value_serde {
  using value_type = session_value<typename VS::value_type>;
  static void serialize(const value_type& v, std::string& out) {
    value_and_timestamp_serde<VS>::serialize({v.value, v.start}, out);
  }
  static value_type deserialize(std::string_view in) {
    auto v = value_and_timestamp_serde<VS>::deserialize(in);
    return {std::move(v.value), v.timestamp};
  }
};

}  // namespace sluice
