// The getting-started example's topology (docs/getting-started.md): page views in, bot
// traffic dropped, views counted per page into a RocksDB store, and the latest count of
// each changed page reported once per interval by a Processor API step with a punctuator.
// Shared by the job (main.cpp) and its test (tests/driver/getting_started_driver_test.cpp).
#pragma once

#include <boost/hana/define_struct.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/sluice.hpp"

namespace getting_started {

/// One page view, as the web tier writes it to `page-views` (JSON, key: the user id).
struct page_view {
  BOOST_HANA_DEFINE_STRUCT(page_view, (std::string, page), (std::string, user_agent), (std::int64_t, duration_ms));
};

/// Crawlers announce themselves in their user agent ("Googlebot/2.1", "AhrefsBot", ...).
inline bool is_bot(const page_view& v) {
  std::string agent = v.user_agent;
  std::transform(agent.begin(), agent.end(), agent.begin(), [](unsigned char c) { return std::tolower(c); });
  return agent.find("bot") != std::string::npos || agent.find("crawl") != std::string::npos ||
         agent.find("spider") != std::string::npos;
}

/// Keeps the latest count of each page that changed and forwards them every `interval` of
/// wall-clock time, so downstream sees at most one update per page per interval.
class report_every : public sluice::processor<std::string, std::int64_t> {
 public:
  explicit report_every(std::chrono::milliseconds interval) : interval_(interval) {}

  void init(context_type& ctx) override {
    pending_.emplace(ctx.store<std::string, std::int64_t>("pending-reports"));
    ctx.schedule(interval_, sluice::punctuation_type::wall_clock, [this](std::int64_t now) { report(now); });
  }

  void process(const sluice::record<std::string, std::int64_t>& r) override { pending_->put(r.key, r.value); }

 private:
  void report(std::int64_t now) {
    std::vector<std::pair<std::string, std::int64_t>> due;
    for (auto it = pending_->all(); it.valid(); it.next()) due.emplace_back(it.key(), it.value());
    for (const auto& [page, views] : due) {
      context().forward(sluice::record<std::string, std::int64_t>{page, views, now, {}});
      pending_->remove(page);
    }
  }

  std::chrono::milliseconds interval_;
  std::optional<sluice::key_value_store<std::string, std::int64_t>> pending_;
};

/// page-views -> filter_not(bot) -> group_by(page) -> count("views-per-page")
///            -> process(report_every, "pending-reports") -> page-view-counts
inline sluice::topology page_views_topology(std::chrono::milliseconds report_interval = std::chrono::seconds(10)) {
  sluice::streams_builder b;
  b.stream<std::string, page_view>("page-views")
      .filter_not([](const std::string&, const page_view& v) { return is_bot(v); })
      .group_by([](const std::string&, const page_view& v) { return v.page; })
      .count("views-per-page")
      .to_stream()
      .process([report_interval] { return std::make_unique<report_every>(report_interval); },
               sluice::materialized{.name = "pending-reports"})
      .to("page-view-counts");
  return b.build();
}

}  // namespace getting_started
