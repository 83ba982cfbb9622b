// The overflow buffer's rate contract (topologies/overflow_buffer/README.md, "Token bucket"),
// checked on a customer's emission timestamps as they were read from the output topic: in
// any interval of length L ms at most max(1, r) + r * L / 1000 emissions, r the customer's
// rate per second. For the tests that check the job's committed output (the integration
// test, the fault suite).
//
//   if (auto over = sluice::test::token_bucket_excess(timestamps, 100.0)) ...  // over->first..second
//
// Threading: a plain function.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace sluice::test {

/// The first window [i, j] of the sorted `timestamps` (ms) holding more emissions than a token
/// bucket of `rate_per_second` (burst max(1, rate)) allows, or nullopt when none does.
/// Linear: the window ending at j with the most excess starts where r·ts[i]/1000 - i is largest.
inline std::optional<std::pair<std::size_t, std::size_t>> token_bucket_excess(std::vector<std::int64_t> timestamps,
                                                                              double rate_per_second) {
  if (timestamps.empty()) return std::nullopt;
  std::sort(timestamps.begin(), timestamps.end());
  const double burst = std::max(1.0, rate_per_second);
  const auto origin = timestamps.front();  // relative times keep the doubles exact
  auto at = [&](std::size_t k) { return rate_per_second * static_cast<double>(timestamps[k] - origin) / 1000.0; };
  std::size_t best_start = 0;
  double best = at(0);  // max over i <= j of r·ts[i]/1000 - i
  for (std::size_t j = 0; j < timestamps.size(); ++j) {
    if (at(j) - static_cast<double>(j) > best) {
      best = at(j) - static_cast<double>(j);
      best_start = j;
    }
    // emissions in [best_start, j] minus what the bucket allows over that interval
    const double excess = static_cast<double>(j + 1) - at(j) + best - burst;
    if (excess > 1e-6) return std::pair{best_start, j};
  }
  return std::nullopt;
}

}  // namespace sluice::test
