// The Java producer's partitioner for keyed records, for nodes that pick a partition
// themselves (repartition_by) and for the test driver.
#include <cstdint>
#include <string_view>

#include "sluice/detail/dsl_nodes.hpp"

namespace sluice::detail {

std::uint32_t murmur2(std::string_view data) noexcept {
  const std::uint32_t m = 0x5bd1e995;
  const int r = 24;
  std::uint32_t h = 0x9747b28c ^ static_cast<std::uint32_t>(data.size());
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t blocks = data.size() / 4;
  for (std::size_t i = 0; i < blocks; ++i) {
    std::uint32_t k = bytes[i * 4] | (bytes[i * 4 + 1] << 8) | (bytes[i * 4 + 2] << 16) |
                      (static_cast<std::uint32_t>(bytes[i * 4 + 3]) << 24);
    k *= m;
    k ^= k >> r;
    k *= m;
    h *= m;
    h ^= k;
  }
  const std::size_t tail = blocks * 4;
  switch (data.size() % 4) {
    case 3: h ^= static_cast<std::uint32_t>(bytes[tail + 2]) << 16; [[fallthrough]];
    case 2: h ^= static_cast<std::uint32_t>(bytes[tail + 1]) << 8; [[fallthrough]];
    case 1: h ^= bytes[tail]; h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return h;
}

std::int32_t murmur2_partition(std::string_view key, std::int32_t partitions) noexcept {
  if (partitions <= 1) return 0;
  return static_cast<std::int32_t>((murmur2(key) & 0x7fffffff) % static_cast<std::uint32_t>(partitions));
}

}  // namespace sluice::detail
