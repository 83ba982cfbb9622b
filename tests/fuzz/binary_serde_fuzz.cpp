// Fuzzes binary_serde<order> with arbitrary bytes. Properties: deserialize either returns a
// value or throws serialization_error, never reads out of bounds or allocates more than the
// input describes (ASan, libFuzzer's -rss_limit_mb/-malloc_limit_mb); a decoded value
// re-encodes to bytes that decode to an equal value, and re-encoding those is stable.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "sluice/serde/binary.hpp"
#include "test_types.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using sluice::testing::order;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  order decoded;
  try {
    decoded = sluice::binary_serde<order>::deserialize(bytes);
  } catch (const sluice::serialization_error&) {
    return 0;
  }
  std::string once;
  sluice::binary_serde<order>::serialize(decoded, once);
  // Equality of doubles read back bit for bit: NaN payloads compare unequal, so compare bytes.
  std::string twice;
  sluice::binary_serde<order>::serialize(sluice::binary_serde<order>::deserialize(once), twice);
  SLUICE_FUZZ_CHECK(once == twice);
  SLUICE_FUZZ_CHECK(once.size() <= bytes.size());
  return 0;
}
