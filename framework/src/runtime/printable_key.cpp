// How error messages and log lines show a record key (sluice/error.hpp).
#include "sluice/error.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice {
namespace {

constexpr std::size_t shown_bytes = 100;

bool shown_as_is(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '\\'; }

}  // namespace

bool printable_as_is(std::string_view key) {
  return key.size() <= shown_bytes &&
         std::all_of(key.begin(), key.end(), [](char c) { return shown_as_is(static_cast<unsigned char>(c)); });
}

std::string printable_key(const std::optional<std::string_view>& key) {
  if (!key) return "null";
  std::string out = "'";
  for (std::size_t i = 0; i < key->size() && i < shown_bytes; ++i) {
    const auto c = static_cast<unsigned char>((*key)[i]);
    if (shown_as_is(c)) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (key->size() > shown_bytes) out += "...";
  return out + "'";
}

}  // namespace sluice
