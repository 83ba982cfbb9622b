// Small reads the tests share: a file's whole text (a job's log), a record header's value.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "sluice/client.hpp"

namespace sluice::test {

/// The whole text of a file; empty when it cannot be read.
inline std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The value of the last header `name` of `m`; empty when it is absent or null.
inline std::string header_text(const sluice::raw_message& m, std::string_view name) {
  const auto* h = m.headers.last(name);
  return h && h->has_value() ? **h : std::string();
}

}  // namespace sluice::test
