// The window store as a store kind through the TopologyTestDriver: a processor keeps
// per-window counts with window_store_handle; the store logs its writes, retention follows
// the windows' stream time, and a test inspects it like any store.
#include <gtest/gtest.h>

#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "sluice/window_store.hpp"

using sluice::testing::topology_test_driver;
using namespace std::chrono_literals;

namespace {

using counts_handle = sluice::window_store_handle<std::string, std::int64_t>;

/// Counts records per key in 10 ms windows aligned to the epoch; emits each new count.
class window_counting : public sluice::processor<std::string, std::string, std::string, std::int64_t> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    counts_.emplace(ctx.state_store<counts_handle>("counts"));
  }
  void process(const sluice::record<std::string, std::string>& r) override {
    const std::int64_t start = r.timestamp - r.timestamp % 10;
    const std::int64_t n = counts_->fetch(r.key, start).value_or(0) + 1;
    if (counts_->put(r.key, start, n)) context().forward({r.key, n, r.timestamp, {}});
  }

 private:
  std::optional<counts_handle> counts_;
};

sluice::topology counting_topology() {
  sluice::streams_builder b;
  b.add_state_store(sluice::window_store_materialized("counts", {.retention = 30ms, .segment_interval = 10ms}));
  b.stream<std::string, std::string>("clicks")
      .process([] { return std::make_unique<window_counting>(); }, "counts")
      .to("counted");
  return b.build();
}

}  // namespace

TEST(window_store, a_processor_counts_per_window_and_the_driver_inspects_the_windows) {
  for (bool rocksdb : {false, true}) {
    SCOPED_TRACE(rocksdb ? "rocksdb" : "memory");
    topology_test_driver d(counting_topology(), {}, {.rocksdb_stores = rocksdb});
    auto in = d.input_topic<std::string, std::string>("clicks");
    for (std::int64_t t : {1, 5, 12, 19, 25}) in.pipe("page", "", t);
    in.pipe("other", "", 26);
    auto counts = d.state_store<counts_handle>("counts");
    EXPECT_EQ(counts.fetch("page", 0, 100),
              (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}, {10, 2}, {20, 1}}));
    EXPECT_EQ(counts.fetch("other", 20), std::optional<std::int64_t>(1));
    // Six window writes, after the store's layout record (its segment interval).
    EXPECT_EQ(d.records(d.application_id() + "-counts-changelog").size(), 7u);
    // Window 40 moves observed time to 40: windows starting at or below 10 have left the
    // 30 ms retention, and a late record for window 0 is refused by the store.
    in.pipe("page", "", 41);
    in.pipe("page", "", 3);
    EXPECT_EQ(counts.fetch("page", 0, 100), (std::vector<std::pair<std::int64_t, std::int64_t>>{{20, 1}, {40, 1}}));
    EXPECT_EQ((d.output_topic<std::string, std::int64_t>("counted").size()), 7u);
  }
}

TEST(window_store, asking_for_a_key_value_store_as_a_window_store_names_the_store) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("words").group_by_key().count("counts");
  topology_test_driver d(b.build());
  try {
    d.state_store<counts_handle>("counts");
    FAIL() << "expected a refusal";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("store 'counts' is not a window store"), std::string::npos) << e.what();
  }
}
