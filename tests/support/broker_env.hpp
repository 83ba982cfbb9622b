// Where integration tests find the real broker, and a unique-name helper so tests that
// share one broker never share topics or groups.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace sluice::test {

/// The bootstrap address of the real broker, from SLUICE_BOOTSTRAP. Outside CI a missing
/// broker skips the test with a hint; in CI (CI set) it fails: integration tests never skip there.
inline std::string broker_bootstrap() {
  if (const char* b = std::getenv("SLUICE_BOOTSTRAP"); b && *b) return b;
  return {};
}

#define SLUICE_REQUIRE_BROKER()                                                               \
  do {                                                                                        \
    if (::sluice::test::broker_bootstrap().empty()) {                                         \
      if (std::getenv("CI")) FAIL() << "SLUICE_BOOTSTRAP is not set in CI; run scripts/test"; \
      GTEST_SKIP() << "no broker: set SLUICE_BOOTSTRAP or run scripts/test";                  \
    }                                                                                         \
  } while (0)

/// A name no other test run on this broker has used: prefix + pid + time + counter.
inline std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(now % 1000000007) + "-" +
         std::to_string(counter++);
}

}  // namespace sluice::test
