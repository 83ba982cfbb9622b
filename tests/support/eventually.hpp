// Waiting for a condition a test expects to hold soon: an app reaching a state, a counter
// moving. The deadline is generous and only bounds a test that would otherwise hang; it is
// not a timing assertion (the machines are shared and slow at times).
#pragma once

#include <chrono>
#include <thread>

namespace sluice::test {

/// Polls `done()` every `interval` until it holds (true) or `deadline_after` has passed
/// (then false, after one last look).
template <class F>
bool eventually(F&& done, std::chrono::milliseconds deadline_after = std::chrono::seconds(60),
                std::chrono::milliseconds interval = std::chrono::milliseconds(20)) {
  for (const auto deadline = std::chrono::steady_clock::now() + deadline_after;
       std::chrono::steady_clock::now() < deadline;) {
    if (done()) return true;
    std::this_thread::sleep_for(interval);
  }
  return done();
}

}  // namespace sluice::test
