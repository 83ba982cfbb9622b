// How error messages and log lines show a record's key: bytes a user may need to find the
// record by, made safe for a terminal and bounded in length.
//
// Stateless; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sluice::runtime {

/// A key quoted as a log line shows it: printable ASCII as is, other bytes (and '\') as \xNN,
/// at most 100 bytes then "..."; a null key as null.
std::string printable_key(const std::optional<std::string_view>& key);

}  // namespace sluice::runtime
