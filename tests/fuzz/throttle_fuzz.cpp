// Fuzzes the throttle's input parsing: the throttle key taken from JSON fields of a record
// value (engine::extract_key, then the reason header built from it) and the rules table's
// values (parse_rule). The first byte picks the target, the rest is the record value or
// rule text. Properties: extract_key returns or throws sluice::error(errc::processing);
// the reason header is valid JSON; parse_rule returns nullopt or a rule within bounds.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "sluice/error.hpp"
#include "sluice/topologies/throttle.hpp"

namespace {

namespace throttle = sluice::topologies;

void fuzz_extract_key(std::string_view value) {
  static throttle::throttle_detail::engine engine([] {
    throttle::throttle_options o;
    o.key_fields = {"workflow", "recipient"};
    return o;
  }());
  try {
    engine.extract_key("record-key", value);
  } catch (const sluice::error& e) {
    SLUICE_FUZZ_CHECK(e.code() == sluice::errc::processing);
    return;
  }
  const auto reason = engine.reason(throttle::throttle_detail::rule{60000, 3});
  SLUICE_FUZZ_CHECK(nlohmann::json::accept(reason));
}

void fuzz_parse_rule(std::string_view text) {
  const throttle::throttle_detail::rule defaults{60000, 3};
  const std::chrono::milliseconds max_window = std::chrono::hours(24);
  auto r = throttle::throttle_detail::parse_rule(text, defaults, max_window);
  if (!r) return;
  SLUICE_FUZZ_CHECK(r->limit >= throttle::min_throttle_limit && r->limit <= throttle::max_throttle_limit);
  SLUICE_FUZZ_CHECK(r->window_ms >= throttle::min_throttle_window.count() && r->window_ms <= max_window.count());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    fuzz_parse_rule(rest);
  } else {
    fuzz_extract_key(rest);
  }
  return 0;
}
