// pace: option checks and the token bucket (see sluice/topologies/pace.hpp).
#include "sluice/topologies/pace.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sluice/error.hpp"

namespace sluice::topologies {

void validate(const pace_options& o) {
  if (!(o.records_per_second > 0) || !std::isfinite(o.records_per_second))
    throw error(errc::invalid_config,
                "pace: records_per_second must be a positive number, got " + std::to_string(o.records_per_second));
  if (o.burst < std::chrono::milliseconds(0) || o.burst > std::chrono::milliseconds(10'000))
    throw error(errc::invalid_config,
                "pace: burst must be within 0 .. 10000 ms, got " + std::to_string(o.burst.count()) + " ms");
}

namespace pace_detail {

bucket::bucket(double records_per_second, std::chrono::milliseconds burst)
    : interval_ms_(1000.0 / records_per_second),
      capacity_(std::max(1.0, std::floor(records_per_second * static_cast<double>(burst.count()) / 1000.0))),
      tolerance_ms_((capacity_ - 1) * interval_ms_),
      half_full_ms_(std::floor(capacity_ / 2) * interval_ms_) {}

std::int64_t bucket::take(std::int64_t now_ms) noexcept {
  auto now = static_cast<double>(now_ms);
  // A full bucket does not fill further: an idle task earns no more than B records.
  if (!started_ || theoretical_ < now) theoretical_ = now;
  started_ = true;
  theoretical_ += interval_ms_;
  // The next record would fit once theoretical_ - tolerance_ms_ <= now.
  if (theoretical_ - tolerance_ms_ <= now) return 0;
  // Out of tokens: wait until the bucket is half full again (ceil(B / 2) records), then send
  // what it holds. Not one token: one wake-up per record would cost a loop of the stream
  // thread each. Not a full bucket: a full bucket stops filling, so every millisecond the
  // wake-up comes late (timer granularity, a commit in progress) would be lost for good;
  // from half full, a wake-up up to B / 2 tokens late loses nothing.
  return static_cast<std::int64_t>(std::ceil(theoretical_ - half_full_ms_));
}

}  // namespace pace_detail
}  // namespace sluice::topologies
