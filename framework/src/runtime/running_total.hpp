// Feeding a client's own running total into a metrics counter.
#pragma once

#include <cstdint>

#include "sluice/metrics.hpp"

namespace sluice::runtime {

/// Adds to a counter what a client's running total (kafka::consumer::fetch_wakes) grew by
/// since the last observe(); a total below the last one seen (a recreated client counting
/// from 0 again) becomes the new base.
///
/// Lifecycle: lives as long as its owner (a stream thread, the global tables), which must
/// outlive nothing here but the registry's counter. Threading: observe() on the owner's
/// thread only; the counter itself may be read from any thread.
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
