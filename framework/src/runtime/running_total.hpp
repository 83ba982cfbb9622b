// Feeding a client's own running total into a metrics counter.
#pragma once

#include <cstdint>

#include "sluice/metrics.hpp"

namespace sluice::runtime {

/// Adds to a counter what a client's running total (kafka::consumer::fetch_wakes) grew by
/// since the last observe(); a total below the last one seen (a recreated client counting
/// from 0 again) becomes the new base.
///
/// Lifecycle: a member of its owner (a stream thread, the global tables); the registry's
/// counter outlives it. Threading: observe() on one thread at a time (the owner's); the
/// counter may be read from any thread.
class running_total_feed {
 public:
  explicit running_total_feed(counter& target) noexcept : target_(target) {}

  void observe(std::uint64_t total) noexcept {
    if (total > seen_) target_.add(total - seen_);
    seen_ = total;
  }

 private:
  counter& target_;
  std::uint64_t seen_ = 0;
};

}  // namespace sluice::runtime
