// The type-independent part of json_serde and of the store codecs' JSON text, compiled
// once here instead of in every unit that names a JSON type: nlohmann's parser and
// serializer are the heaviest templates a topology would otherwise instantiate.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sluice/detail/store_codec.hpp"
#include "sluice/serde/json.hpp"

namespace sluice::serde_detail::json {

nlohmann::json parse_document(std::string_view bytes) {
  if (bytes.empty()) throw serialization_error("invalid JSON: empty input");
  check_json_nesting(bytes, "the JSON");
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    throw serialization_error(std::string("invalid JSON: ") + e.what());
  }
}

std::string dump(const nlohmann::json& j) { return j.dump(); }

}  // namespace sluice::serde_detail::json

namespace sluice::detail {

namespace {
std::string text_of(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::string scalar_json_text(std::string_view s) { return text_of(nlohmann::json(s)); }
std::string scalar_json_text(bool b) { return text_of(nlohmann::json(b)); }
std::string scalar_json_text(std::int64_t i) { return text_of(nlohmann::json(i)); }
std::string scalar_json_text(std::uint64_t u) { return text_of(nlohmann::json(u)); }
std::string scalar_json_text(double d) { return text_of(nlohmann::json(d)); }

}  // namespace sluice::detail
