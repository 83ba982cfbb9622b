// A blocking Kafka call that may wait long on the cluster, made in short slices so that a
// stop request is answered meanwhile.
#pragma once

#include <chrono>
#include <functional>

#include "sluice/error.hpp"

namespace sluice::runtime {

/// Calls `attempt(slice)`, a blocking call given `slice` as its timeout, again after each
/// failure that says "not yet" (a timeout, or a Kafka error flagged retriable), until it
/// returns, `total` has passed or `stop_requested()` says so; then its last error is thrown.
/// A coordinator can hold a transactional producer's init or a group's offset fetch back for
/// most of a minute (away in an outage, loading, or busy with a twin's transaction): made in
/// one-second slices, such a wait no longer holds a close back. Runs on the caller's thread.
template <class Attempt>
auto wait_in_slices(std::chrono::milliseconds total, const std::function<bool()>& stop_requested, Attempt&& attempt) {
  constexpr std::chrono::milliseconds slice{1000};
  const auto deadline = std::chrono::steady_clock::now() + total;
  for (;;) {
    try {
      return attempt(slice);
    } catch (const sluice::error& e) {
      const bool not_yet = e.code() == errc::timeout || e.kafka().retriable;
      if (!not_yet || std::chrono::steady_clock::now() >= deadline || (stop_requested && stop_requested())) throw;
    }
  }
}

}  // namespace sluice::runtime
