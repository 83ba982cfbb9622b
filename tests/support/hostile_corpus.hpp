// A corpus of hostile records for tests that feed a shipped job what real producers get
// wrong: not JSON, JSON of the wrong shape, invalid UTF-8, null and empty keys and values,
// ~1 MB values, huge numbers and deep nesting. Each job's test knows its own schema, so the
// corpus is built from the fields the job reads (`fields`: name -> an ordinary JSON value
// text) and says for each record whether a job that reads those fields from a JSON object
// can take it. Header-only, no broker: reuse it for every JSON-reading topology.
//
//   auto corpus = sluice::test::hostile_corpus({{"workflow", R"("wf1")"}, {"recipient", R"("x")"}});
//   for (const auto& r : corpus) writer.send_raw(topic, r.key, r.value, ts, {{"corpus.item", r.name}});
//
// Threading: plain values.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::test {

/// One record of the corpus. key / value nullopt = a Kafka null.
struct hostile_record {
  std::string name;  ///< unique within the corpus, e.g. "not JSON", "80,000 levels"
  std::optional<std::string> key;
  std::optional<std::string> value;
  /// True when the value is a JSON object of ordinary depth (at most 1,000 levels, numbers
  /// within a double's range) that has every field, none null:
  /// a job reading those fields must take it (output); otherwise it must fail the record
  /// (dead letter, skip and count, or stop under `fail`).
  bool readable = false;
};

/// Near 1 MB but within the default message.max.bytes (1,000,000) of a producer, with room
/// for a short key and record overhead: a job's dead-letter copy with error headers is not.
inline constexpr std::size_t near_one_megabyte = 999'800;

/// An object with `fields` (name, JSON value text) and the members in `extra` ("" = none).
inline std::string json_object(const std::vector<std::pair<std::string, std::string>>& fields,
                               const std::string& extra = {}) {
  std::string out = "{";
  for (const auto& [name, value] : fields) {
    if (out.size() > 1) out += ',';
    out += '"' + name + "\":" + value;
  }
  if (!extra.empty()) out += (out.size() > 1 ? "," : "") + extra;
  return out + "}";
}

/// The corpus for a job reading `fields` (at least one) from JSON object values; `distinct`
/// is mixed into the first field's value of every readable record so that no two share a
/// key (pass an empty string to keep the given values).
inline std::vector<hostile_record> hostile_corpus(std::vector<std::pair<std::string, std::string>> fields) {
  std::vector<hostile_record> out;
  int unique = 0;
  // A readable record: the fields, the first one made unique (so a per-key job keeps each).
  auto readable = [&](std::string name, std::optional<std::string> key, const std::string& extra) {
    auto f = fields;
    f.front().second = "\"hostile-" + std::to_string(unique++) + "\"";
    out.push_back({std::move(name), std::move(key), json_object(f, extra), true});
  };
  auto unreadable = [&](std::string name, std::optional<std::string> key, std::optional<std::string> value) {
    out.push_back({std::move(name), std::move(key), std::move(value), false});
  };
  const std::string nested(80'000, '[');
  const std::string closing(80'000, ']');

  // Records a JSON-reading job must refuse.
  unreadable("not JSON", "k", std::string("hello, not json"));
  unreadable("JSON array (wrong shape)", "k", std::string("[1,2,3]"));
  unreadable("first field missing", "k", json_object({fields.begin() + 1, fields.end()}, R"("other":1)"));
  {
    auto f = fields;
    f.front().second = "null";
    unreadable("first field null", "k", json_object(f));
  }
  unreadable("invalid UTF-8 inside a JSON string", "k", json_object(fields, "\"bad\":\"\xff\xfe\xc3\x28\""));
  // Valid JSON text, but beyond a double: sluice's JSON reading refuses it rather than
  // turning it into infinity.
  unreadable("a number beyond double range", "k", json_object(fields, R"("huge":1e400)"));
  unreadable("null value", "k", std::nullopt);
  unreadable("empty value", "k", std::string());
  unreadable("~1 MB of not JSON", "k", std::string(near_one_megabyte, 'x'));
  {
    auto f = fields;
    f.front().second = nested + closing;
    unreadable("80,000 levels of nesting in a field", "k", json_object(f));
  }

  // Records a JSON-reading job must take, however odd.
  readable("null record key", std::nullopt, {});
  readable("empty record key", std::string(), {});
  readable("huge numbers", "k", R"("big":123456789012345678901234567890,"tiny":-1e-400,"max":1.7976931348623157e308)");
  readable("brackets inside a string", "k", "\"text\":\"" + nested + "\"");
  readable("escapes and non-ASCII text", "k", R"("text":"tab\t quote\" \u00e9 \ud83d\ude00 √")");
  readable("a ~900 KB string member", "k", "\"body\":\"" + std::string(900'000, 'b') + "\"");
  readable("duplicate member", "k", R"("dup":1,"dup":2)");
  return out;
}

}  // namespace sluice::test
