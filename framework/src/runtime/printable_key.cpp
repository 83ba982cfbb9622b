// How error messages and log lines show a record key (sluice/error.hpp).
#include "sluice/error.hpp"

#include <cstdio>

namespace sluice {

std::string printable_key(const std::optional<std::string_view>& key) {
  if (!key) return "null";
  constexpr std::size_t shown = 100;
  std::string out = "'";
  for (std::size_t i = 0; i < key->size() && i < shown; ++i) {
    const auto c = static_cast<unsigned char>((*key)[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (key->size() > shown) out += "...";
  return out + "'";
}

}  // namespace sluice
