// fuzz_check: a property a fuzz target asserts. A violated property aborts, which libFuzzer
// reports as a crash with the input that caused it (saved as crash-<hash>).
#pragma once

#include <cstdio>
#include <cstdlib>

#define SLUICE_FUZZ_CHECK(condition)                                                                \
  do {                                                                                              \
    if (!(condition)) {                                                                             \
      std::fprintf(stderr, "fuzz property violated: %s (%s:%d)\n", #condition, __FILE__, __LINE__); \
      std::abort();                                                                                 \
    }                                                                                               \
  } while (0)
