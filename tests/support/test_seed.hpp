// The seed of a randomized test: SLUICE_TEST_SEED when set (to reproduce a failing run), a
// fresh one otherwise; printed with the test's work directory so a failure can be replayed.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>

namespace sluice::test {

/// Seeds `rng` as above, prints "seed N (SLUICE_TEST_SEED reproduces it), work dir W" and
/// returns the seed.
inline unsigned seed_test_rng(std::mt19937& rng, const std::filesystem::path& work) {
  auto seed = std::random_device{}();
  if (const char* s = std::getenv("SLUICE_TEST_SEED"); s && *s) seed = static_cast<unsigned>(std::stoul(s));
  rng.seed(seed);
  std::cout << "seed " << seed << " (SLUICE_TEST_SEED reproduces it), work dir " << work << "\n";
  return seed;
}

}  // namespace sluice::test
