// A team's first topology and its first test, built against the installed sluice package.
#include <gtest/gtest.h>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"

namespace {
struct page_view {
  BOOST_HANA_DEFINE_STRUCT(page_view, (std::string, page), (std::string, user_agent));
};
}  // namespace

TEST(consumer, counts_views_per_page_without_bots) {
  sluice::streams_builder b;
  b.stream<std::string, page_view>("views")
      .filter_not([](const std::string&, const page_view& v) { return v.user_agent.find("bot") != std::string::npos; })
      .group_by([](const std::string&, const page_view& v) { return v.page; })
      .count("views-per-page")
      .to_stream()
      .to("page-counts");
  sluice::testing::topology_test_driver driver(b.build());
  auto in = driver.input_topic<std::string, page_view>("views");
  in.pipe("u1", {"/home", "firefox"});
  in.pipe("u2", {"/home", "googlebot"});
  in.pipe("u3", {"/home", "chrome"});
  auto counts = driver.output_topic<std::string, std::int64_t>("page-counts").read_key_values_to_map();
  EXPECT_EQ(counts["/home"], 2);
}
