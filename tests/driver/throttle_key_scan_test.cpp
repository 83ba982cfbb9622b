// The throttle key's fast path (scan_key_fields, used by key_builder before any JSON parse)
// against the definition: the key nlohmann's document gives (a string field by its text, any
// other value by its compact JSON), or a processing error where the document has none. Every
// record of a corpus of ordinary, unusual and randomly damaged values must build the same key
// or fail the same way as through the document, so no decision can change.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/serde/json.hpp"
#include "sluice/topologies/throttle.hpp"
#include "hostile_corpus.hpp"

namespace {

using sluice::topologies::throttle_detail::key_builder;
using sluice::topologies::throttle_detail::scan_key_fields;

const std::vector<std::string> fields = {"workflow", "recipient"};

struct built {
  std::string key, display, rule;
};

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// The definition, through nlohmann's document; nullopt where the record is a processing error
// (values nested deeper than max_json_nesting are refused before any parse).
std::optional<built> by_document(const std::string& text) {
  if (sluice::json_nesting_depth(text) > sluice::max_json_nesting) return std::nullopt;
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  built b;
  bool first = true;
  for (const auto& f : fields) {
    auto it = doc.find(f);
    if (it == doc.end() || it->is_null()) return std::nullopt;
    std::string part = it->is_string() ? it->get<std::string>() : it->dump();
    put_varint(b.key, part.size());
    b.key += part;
    if (!first) b.display += ',';
    b.display += part;
    if (first) b.rule = part;
    first = false;
  }
  return b;
}

std::optional<built> by_key_builder(const std::string& text) {
  key_builder keys(fields, /*rules_on=*/true);
  try {
    keys.build({}, std::string_view(text));
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::processing) << text;
    return std::nullopt;
  }
  return built{keys.key(), keys.display_key(), keys.rule_key()};
}

void expect_same_key(const std::string& text) {
  auto want = by_document(text);
  auto got = by_key_builder(text);
  ASSERT_EQ(got.has_value(), want.has_value()) << "value: " << text;
  if (!want) return;
  EXPECT_EQ(got->key, want->key) << "value: " << text;
  EXPECT_EQ(got->display, want->display) << "value: " << text;
  EXPECT_EQ(got->rule, want->rule) << "value: " << text;
}

bool scanned(const std::string& text) {
  std::vector<std::string_view> values;
  return scan_key_fields(text, fields, values);
}

const std::vector<std::string> ordinary = {
    R"({"id":1,"workflow":"wf1","recipient":"user1","tenant":"t1","channel":"email","body":"aaaa"})",
    R"( { "workflow" : "wf1" , "recipient" : "" , "n" : -0.5 , "a" : [1, [2, {}], true, false, null] } )",
    "{\"workflow\":\"caf\xc3\xa9\",\"recipient\":\"\xe2\x82\xac\xf0\x9f\x98\x80\",\"x\":{\"y\":[]}}",
    R"({"workflow":"wf1","recipient":"a","recipient":"b"})",   // repeated: the last counts
    R"({"workflow":"wf1","recipient":null,"recipient":"b"})",  // null, then a string
    "{\"workflow\":\"wf\",\t\"recipient\":\"r\"\r\n}",
    R"({"big":123456789012345678,"workflow":"w","recipient":"r"})",
    R"({"workflow":"w","recipient":"r","n":-0,"m":0.25,"o":-12.0})",  // numbers that are not key fields
};

const std::vector<std::string> decided_by_the_document = {
    R"({"workflow":7,"recipient":true})",                    // non-string fields: their JSON text
    R"({"workflow":{"b":1,"a":[1.50,2]},"recipient":"r"})",  // an object, dumped with sorted members
    R"({"workflow":"w\"q","recipient":"r\u00e9"})",          // escapes
    R"({"workflow":"w","recipient":"a","recipient":null})",  // null last: missing
    R"({"workflow":"w","recipient":"a","recipient":5})",     // a number last
    R"({"workflow":"w"})",                                   // missing
    R"({"workflow":"w","recipient":"r","n":1e999})",         // overflow: an error
    R"({"workflow":"w","recipient":"r","n":12345678901234567890123})",
    R"({"workflow":"w","recipient":"r",})",   // trailing comma
    R"({"workflow":"w","recipient":"r"} x)",  // trailing bytes
    R"({"workflow":"w","recipient":"r"}{})",
    R"({"workflow":"w","recipient":"r","n":01})",
    R"({"workflow":"w","recipient":"r","n":1.})",
    R"({"workflow":"w","recipient":"r","n":tru})",
    R"(["workflow","recipient"])",
    R"("workflow")",
    "\xef\xbb\xbf{\"workflow\":\"w\",\"recipient\":\"r\"}",  // a byte order mark
    "{\"workflow\":\"w\xc3\",\"recipient\":\"r\"}",          // truncated UTF-8
    "{\"workflow\":\"w\xed\xa0\x80\",\"recipient\":\"r\"}",  // an encoded surrogate
    "{\"workflow\":\"w\x01\",\"recipient\":\"r\"}",          // a control byte
    "",
    "{",
};

TEST(throttle_key_scan, ordinary_objects_are_scanned_without_a_document_and_give_its_key) {
  for (const auto& text : ordinary) {
    EXPECT_TRUE(scanned(text)) << text;
    expect_same_key(text);
  }
}

TEST(throttle_key_scan, values_outside_the_scanned_subset_get_the_documents_key_or_error) {
  for (const auto& text : decided_by_the_document) {
    EXPECT_FALSE(scanned(text)) << text;
    expect_same_key(text);
  }
}

TEST(throttle_key_scan, hostile_corpus_builds_the_same_key_or_error_as_the_document) {
  for (const auto& r : sluice::test::hostile_corpus({{"workflow", R"("wf1")"}, {"recipient", R"("x")"}}))
    if (r.value) expect_same_key(*r.value);
}

TEST(throttle_key_scan, randomly_damaged_values_build_the_same_key_or_error_as_the_document) {
  // Byte flips, insertions of JSON's punctuation and deletions of ordinary values: most of the
  // results are malformed, some still valid in unusual ways; the key builder must agree with
  // the document on every one.
  std::mt19937 rng(20261123);
  const std::string alphabet = "{}[]\",:\\ 0123456789.-+eEtrufalsn\x01\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f";
  std::size_t taken_by_scan = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = ordinary[static_cast<std::size_t>(rng()) % ordinary.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const std::size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(at, 1, c); break;
        default: text.erase(at, 1); break;
      }
    }
    if (scanned(text)) ++taken_by_scan;
    expect_same_key(text);
    if (HasFailure()) return;
  }
  EXPECT_GT(taken_by_scan, 0u);  // some damaged values stay well-formed and are scanned
}

TEST(throttle_key_scan, a_byte_that_ends_a_plain_run_is_found_at_every_position_of_long_strings) {
  // The scanner skips plain string bytes 16 at a time where it can: every byte that ends such
  // a run (quote, backslash, control bytes, DEL's neighbours, UTF-8 lead and stray bytes), at
  // every position of strings up to 48 bytes, in a key field and in another member, and in a
  // string the value ends inside of, must give the document's key or error.
  const std::vector<std::string> stops = {"\"",   "\\",   "\\n",  "\x01",     "\x1f",         " ",
                                          "\x7f", "\x80", "\xc3", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                          "\xff"};
  std::size_t cases = 0;
  for (std::size_t length = 1; length <= 48; ++length)
    for (std::size_t at = 0; at < length; ++at)
      for (const auto& stop : stops) {
        std::string body(length, 'a');
        body.replace(at, 1, stop);
        for (const std::string& text : {"{\"workflow\":\"" + body + "\",\"recipient\":\"r\"}",
                                        "{\"workflow\":\"w\",\"body\":\"" + body + "\",\"recipient\":\"" + body + "\"}",
                                        "{\"workflow\":\"w\",\"recipient\":\"r\",\"body\":\"" + body}) {
          expect_same_key(text);
          ++cases;
          if (HasFailure()) return;
        }
      }
  EXPECT_EQ(cases, 3u * 13u * (48u * 49u / 2u));
}

TEST(throttle_key_scan, reason_header_is_the_json_nlohmann_writes) {
  // engine::reason's text for printable keys is written by hand; it must be nlohmann's.
  using namespace sluice::topologies;
  throttle_options o;
  o.window = std::chrono::milliseconds(90'000);
  o.limit = 7;
  o.key_fields = fields;
  throttle_detail::engine engine(o);
  for (const std::string text :
       {R"({"workflow":"wf 1","recipient":"a/b{}"})", R"({"workflow":"w","recipient":"q\"x"})",
        R"({"workflow":"w","recipient":"tab\tx"})", "{\"workflow\":\"\xc3\xa9\",\"recipient\":\"r\"}"}) {
    engine.extract_key({}, std::string_view(text));
    auto key = by_document(text);
    ASSERT_TRUE(key.has_value()) << text;
    nlohmann::json j = {{"key", key->display}, {"limit", 7}, {"window_ms", 90'000}};
    EXPECT_EQ(engine.reason({90'000, 7}), j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) << text;
  }
}

}  // namespace
