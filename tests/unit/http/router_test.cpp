// Routing of the instance HTTP server: patterns, placeholders, precedence, decoding.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "http/router.hpp"
#include "sluice/error.hpp"

using sluice::http::router;

namespace {

sluice::http::handler answering(std::string body) {
  return [body](const sluice::http::request&) { return sluice::http::response::json(200, body); };
}

std::string answer_of(const router& r, std::string_view path) {
  auto m = r.find(path);
  if (!m) return "<none>";
  return (*m->fn)(sluice::http::request(m->path, m->path_params, {})).body;
}

}  // namespace

TEST(http_router, placeholders_match_one_decoded_segment) {
  router r;
  r.add("/stores/{store}/keys/{key}", answering("key"));
  auto m = r.find("/stores/word-counts/keys/a%20b%2Fc");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->path_params.size(), 2u);
  EXPECT_EQ(m->path_params[0], (std::pair<std::string, std::string>{"store", "word-counts"}));
  EXPECT_EQ(m->path_params[1], (std::pair<std::string, std::string>{"key", "a b/c"}));
  EXPECT_EQ(m->path, "/stores/word-counts/keys/a b/c");
}

TEST(http_router, literal_segments_win_over_placeholders_whatever_the_order_added) {
  router r;
  r.add("/metadata/{x}", answering("placeholder"));
  r.add("/metadata/stores", answering("literal"));
  EXPECT_EQ(answer_of(r, "/metadata/stores"), "literal");
  EXPECT_EQ(answer_of(r, "/metadata/other"), "placeholder");
}

TEST(http_router, unknown_paths_empty_segments_and_extra_segments_do_not_match) {
  router r;
  r.add("/metrics", answering("m"));
  r.add("/stores/{store}/keys/{key}", answering("k"));
  EXPECT_FALSE(r.find("/metric"));
  EXPECT_FALSE(r.find("/metrics/"));
  EXPECT_FALSE(r.find("/metrics/x"));
  EXPECT_FALSE(r.find("/stores//keys/a"));
  EXPECT_FALSE(r.find("/stores/s/keys/"));
  EXPECT_EQ(answer_of(r, "/metrics"), "m");
}

TEST(http_router, a_malformed_escape_is_reported_as_bad_encoding) {
  router r;
  r.add("/stores/{store}", answering("s"));
  router::miss why{};
  EXPECT_FALSE(r.find("/stores/a%2", &why));
  EXPECT_EQ(why, router::miss::bad_encoding);
  EXPECT_FALSE(r.find("/stores/a%zz", &why));
  EXPECT_EQ(why, router::miss::bad_encoding);
  EXPECT_FALSE(r.find("/nothing", &why));
  EXPECT_EQ(why, router::miss::not_found);
}

TEST(http_router, malformed_and_clashing_patterns_are_refused_with_the_pattern_named) {
  router r;
  r.add("/stores/{store}/keys/{key}", answering("k"));
  auto clash =
      sluice::test::error_of([&] { r.add("/stores/{name}/keys/{id}", answering("x")); }, sluice::errc::invalid_config);
  EXPECT_NE(clash.find("already served by '/stores/{store}/keys/{key}'"), std::string::npos) << clash;
  for (const char* bad : {"metrics", "/a//b", "/a/{}", "/a/{b", "/a/x{b}", "/a/"}) {
    auto e = sluice::test::error_of([&] { r.add(bad, answering("x")); }, sluice::errc::invalid_config);
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << e;
  }
}

TEST(http_query, parameters_are_split_and_decoded_with_plus_as_space) {
  auto q = sluice::http::parse_query("from=a%20b&to=c+d&limit=10&&flag");
  ASSERT_TRUE(q);
  sluice::http::request req("/x", {}, *q);
  EXPECT_EQ(req.query("from"), "a b");
  EXPECT_EQ(req.query("to"), "c d");
  EXPECT_EQ(req.query("limit"), "10");
  EXPECT_EQ(req.query("flag"), "");
  EXPECT_FALSE(req.query("missing"));
  EXPECT_FALSE(sluice::http::parse_query("a=%G1"));
}

// ?limit= and the like: absent gives the fallback; anything but digits within the range is a
// 400 naming the parameter, the value and the bound.
TEST(http_query, a_whole_number_parameter_is_read_or_refused_naming_it) {
  auto q = sluice::http::parse_query("limit=25&zero=0&big=1001&neg=-1&plus=%2B5&empty=&huge=99999999999999999999");
  ASSERT_TRUE(q);
  sluice::http::request req("/x", {}, *q);
  sluice::http::response refusal;
  EXPECT_EQ(req.whole_number_query("limit", 10, 1, 1000, refusal), 25u);
  EXPECT_EQ(req.whole_number_query("missing", 10, 1, 1000, refusal), 10u);
  EXPECT_EQ(req.whole_number_query("zero", 10, 0, 1000, refusal), 0u);
  auto refused = [&](std::string_view name, std::uint64_t min, std::string_view hint = {}) {
    refusal = {};
    EXPECT_FALSE(req.whole_number_query(name, 10, min, 1000, refusal, hint)) << name;
    EXPECT_EQ(refusal.status, 400) << name;
    return refusal.body;
  };
  EXPECT_NE(refused("zero", 1).find("zero 0 is below the minimum 1"), std::string::npos);
  EXPECT_NE(refused("big", 1, "; page instead").find("big 1001 is above the maximum 1000; page instead"),
            std::string::npos);
  // Digits past 2^64 are a whole number above any maximum, not a malformed one.
  EXPECT_NE(refused("huge", 0).find("huge 99999999999999999999 is above the maximum 1000"), std::string::npos);
  for (const char* bad : {"neg", "plus", "empty"})
    EXPECT_NE(refused(bad, 0).find(std::string(bad) + " '"), std::string::npos) << refusal.body;
  EXPECT_NE(refused("neg", 0).find("neg '-1' is not a whole number"), std::string::npos);
}

TEST(http_headers, requests_and_responses_find_a_header_by_name_whatever_its_case) {
  sluice::http::request req("/x", {}, {}, nullptr, "/x", {{"X-Sluice-Forwarded", "a:1"}});
  EXPECT_EQ(req.header("x-sluice-forwarded"), "a:1");
  EXPECT_FALSE(req.header("X-Sluice-Served-By"));
  auto r = sluice::http::response::json(200, "{}");
  r.headers.emplace_back("Retry-After", "1");
  r.headers.emplace_back("x-sluice-served-by", "b:2");  // as another client may spell it
  EXPECT_EQ(r.header("X-Sluice-Served-By"), "b:2");
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_FALSE(r.header("Authorization"));
}

TEST(http_json, escape_keeps_json_valid_for_quotes_backslashes_and_control_bytes) {
  EXPECT_EQ(sluice::http::json_escape("a\"b\\c\nd\x01"), "a\\\"b\\\\c\\nd\\u0001");
  // UTF-8 passes; a byte that is not (a %FF decoded from a path) becomes U+FFFD.
  EXPECT_EQ(sluice::http::json_escape("caf\xC3\xA9 \xFF\xC3"), "caf\xC3\xA9 \xEF\xBF\xBD\xEF\xBF\xBD");
  auto r = sluice::http::response::error(sluice::http::status::not_found, "no \"x\"");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "{\"error\": \"no \\\"x\\\"\"}");
}
