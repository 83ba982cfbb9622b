// The small pieces of the public sluice::http API: request lookups, JSON error bodies.
#include "sluice/http.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

#include "sluice/error.hpp"
#include "sluice/serde/json.hpp"

namespace sluice::http {

namespace {
/// The value of header `name` among `headers` (names compared case-insensitively).
std::optional<std::string_view> find_header(const std::vector<std::pair<std::string, std::string>>& headers,
                                            std::string_view name) noexcept {
  for (const auto& [n, v] : headers)
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        }))
      return std::string_view(v);
  return std::nullopt;
}
}  // namespace

std::string_view request::path_param(std::string_view name) const noexcept {
  for (const auto& [n, v] : path_params_)
    if (n == name) return v;
  return {};
}

std::optional<std::string_view> request::query(std::string_view name) const noexcept {
  for (const auto& [n, v] : query_)
    if (n == name) return std::string_view(v);
  return std::nullopt;
}

std::optional<std::uint64_t> request::whole_number_query(std::string_view name, std::uint64_t fallback,
                                                         std::uint64_t min, std::uint64_t max, response& refusal,
                                                         std::string_view past_max_hint) const {
  const auto text = query(name);
  if (!text) return fallback;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  std::string problem;
  if (text->empty() || (ec != std::errc{} && ec != std::errc::result_out_of_range) ||
      end != text->data() + text->size())
    problem = "'" + std::string(*text) + "' is not a whole number";
  else if (ec == std::errc::result_out_of_range || v > max)  // digits past 2^64: above any maximum
    problem = std::string(*text) + " is above the maximum " + std::to_string(max) + std::string(past_max_hint);
  else if (v < min)
    problem = std::string(*text) + " is below the minimum " + std::to_string(min);
  else
    return v;
  refusal = response::error(status::bad_request, std::string(name) + " " + problem);
  return std::nullopt;
}

std::optional<std::string_view> request::header(std::string_view name) const noexcept {
  return find_header(headers_, name);
}

std::optional<std::string_view> response::header(std::string_view name) const noexcept {
  return find_header(headers, name);
}

store_access& request::stores() const {
  if (!stores_)
    throw error(errc::invalid_config,
                "this request carries no store access: it is only available to handlers run by "
                "an app's HTTP server");
  return *stores_;
}

response store_access::refusal(outcome o, std::string_view store, std::int32_t partition, std::string_view failure) {
  const auto message = describe(o, store, partition, failure);
  switch (o) {
    case outcome::done: return response::json(status::ok, "{}");
    case outcome::unknown_store: return response::error(status::not_found, message);
    case outcome::not_local:
      return response::error(status::not_found, "partition " + std::to_string(partition) + " of store '" +
                                                    std::string(store) +
                                                    "' is not hosted by this instance; ask /metadata/stores/" +
                                                    std::string(store) + "/keys/{key} which instance owns it");
    case outcome::unavailable:
    case outcome::timed_out: {
      auto r =
          response::error(o == outcome::unavailable ? status::service_unavailable : status::gateway_timeout, message);
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    case outcome::wrong_kind:
    case outcome::failed: return response::error(status::internal_server_error, message);
  }
  return response::error(status::internal_server_error, "unknown outcome");
}

response store_access::forward(const request&, std::string_view store, std::int32_t partition) {
  return refusal(outcome::unavailable, store, partition);
}

response response::error(http::status code, std::string_view message) {
  return json(code, "{\"error\": \"" + json_escape(message) + "\"}");
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  const auto* const end = reinterpret_cast<const unsigned char*>(s.data() + s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // JSON is UTF-8: a well-formed sequence goes as it is; a byte that starts none (a
      // percent-decoded %FF in a path) becomes U+FFFD, as the bodies' nlohmann dumps do.
      const auto n =
          serde_detail::json::utf8_sequence_length(reinterpret_cast<const unsigned char*>(s.data() + i), end);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
      } else {
        out.append(s.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

}  // namespace sluice::http
