// Big-endian fixed-width unsigned integers, the byte order of the store layouts built over a
// kv_store (the queue store's keys, a suppression buffer's entries): written most significant
// byte first, they sort as the numbers do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::state {

/// Appends `v` as 8 bytes, most significant first.
inline void append_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

/// The 8 bytes of `in` from `at` as a number; `in` must hold them.
inline std::uint64_t read_u64(std::string_view in, std::size_t at = 0) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = at; i < at + 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

/// Appends `v` as 4 bytes, most significant first.
inline void append_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

/// The 4 bytes of `in` from `at` as a number; `in` must hold them.
inline std::uint32_t read_u32(std::string_view in, std::size_t at = 0) noexcept {
  std::uint32_t v = 0;
  for (std::size_t i = at; i < at + 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

}  // namespace sluice::state
