// An independent reference model of the throttle's definition (topologies/throttle/README.md),
// written from the definition alone with no sluice code in it, for the tests that check the
// job's decisions record by record (the integration test, the fault suite):
//   effective time t = max(record timestamp, effective time of the key's previous record);
//   a record passes iff fewer than `limit` records of its key passed with effective time in
//   (t - window, t].
// Feed it the records of each key in the order the job sees them (one partition per key).
//
//   sluice::test::throttle_model<int> model;
//   bool passes = model.offer(key, timestamp, {.window_ms = 5000, .limit = 3});
//
// Threading: a plain value; one thread at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

namespace sluice::test {

/// A key's window and limit, as the job's defaults or a rule set them.
struct throttle_rule {
  std::int64_t window_ms = 0;
  std::int64_t limit = 0;
};

/// The definition, per key, with the passed effective times in a list.
template <class Key>
class throttle_model {
 public:
  /// Whether the next record of `key`, with `timestamp`, passes under `rule`.
  bool offer(const Key& key, std::int64_t timestamp, const throttle_rule& rule) {
    auto& k = keys_[key];
    const std::int64_t t = k.seen ? std::max(timestamp, k.last_effective) : timestamp;
    k.seen = true;
    k.last_effective = t;
    std::int64_t in_window = 0;
    for (auto p : k.passed)
      if (p > t - rule.window_ms && p <= t) ++in_window;
    if (in_window >= rule.limit) return false;
    k.passed.push_back(t);
    // Times at or before t - window can never count again (later t are larger), unless a
    // later rule widens the window; the tests keep a key's rule fixed, so forget them.
    std::erase_if(k.passed, [&](std::int64_t p) { return p <= t - rule.window_ms; });
    return true;
  }

 private:
  struct key_state {
    bool seen = false;
    std::int64_t last_effective = 0;
    std::vector<std::int64_t> passed;
  };
  std::map<Key, key_state> keys_;
};

}  // namespace sluice::test
