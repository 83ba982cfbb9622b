// router: matches a request target ("/stores/counts/keys/a%20b?limit=5") against route
// patterns ("/stores/{store}/keys/{key}") and splits out decoded path and query parameters.
// Independent of the HTTP library, so it is unit-tested on its own.
//
// Threading: add() during setup only; match() is const and safe from any thread after.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/http.hpp"

namespace sluice::http {

/// Decodes %XX escapes (and `+` as a space when `plus_is_space`); nullopt on a malformed
/// escape.
enum class plus_decoding { keep, as_space };
std::optional<std::string> percent_decode(std::string_view s, plus_decoding plus);

/// Splits "a=1&b=x%20y" into decoded pairs; nullopt on a malformed escape.
std::optional<request::params> parse_query(std::string_view query);

class router {
 public:
  /// Adds a route. Throws sluice::error(errc::invalid_config) for a malformed pattern
  /// (not starting with '/', an empty or unclosed placeholder) or one that duplicates a
  /// pattern already added.
  void add(std::string pattern, handler fn);

  struct match {
    const handler* fn = nullptr;
    request::params path_params;
    std::string path;  ///< the decoded path
  };
  enum class miss { not_found, bad_encoding };
  /// The route that `path` (without query string, still percent-encoded) matches: literal
  /// segments first, so "/metadata/stores" wins over "/metadata/{x}".
  std::optional<match> find(std::string_view path, miss* why = nullptr) const;

 private:
  struct segment {
    std::string text;
    bool placeholder = false;
  };
  struct entry {
    std::string pattern;
    std::vector<segment> segments;
    handler fn;
  };
  std::vector<entry> routes_;
};

}  // namespace sluice::http
