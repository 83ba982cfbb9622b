// Fuzzes json_serde<order> (a struct with every supported member kind) with arbitrary bytes.
// Properties: deserialize either returns a value or throws serialization_error (nothing
// else, no crash, no sanitizer report); a decoded value serializes without throwing and
// decodes back to an equal value; its binary encoding round-trips too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "sluice/serde/binary.hpp"
#include "sluice/serde/json.hpp"
#include "test_types.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using sluice::testing::order;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  order decoded;
  try {
    decoded = sluice::json_serde<order>::deserialize(bytes);
  } catch (const sluice::serialization_error&) {
    return 0;
  }
  std::string json;
  sluice::json_serde<order>::serialize(decoded, json);
  SLUICE_FUZZ_CHECK(sluice::json_serde<order>::deserialize(json) == decoded);
  std::string binary;
  sluice::binary_serde<order>::serialize(decoded, binary);
  SLUICE_FUZZ_CHECK(sluice::binary_serde<order>::deserialize(binary) == decoded);
  return 0;
}
