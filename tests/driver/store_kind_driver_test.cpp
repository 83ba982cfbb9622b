// Store kinds: a topology's own kind of store plugs in through materialized::make_store,
// built over the key-value storage the runtime opens, logging its own writes.
#include <gtest/gtest.h>

#include "sluice/queue_store.hpp"
#include "sluice/ranked_index_store.hpp"
#include "sluice/sluice.hpp"
#include "sluice/test_driver.hpp"
#include "error_of.hpp"

using sluice::testing::topology_test_driver;

namespace {

/// A minimal store kind: per-key tallies kept as decimal text in the storage. It forwards the
/// lifecycle to the storage and counts what the runtime asked of it.
class tally_store final : public sluice::state::state_store {
 public:
  tally_store(std::unique_ptr<sluice::state::kv_store> storage, sluice::state::changelog_sink* changelog)
      : storage_(std::move(storage)), changelog_(changelog) {}

  void add(std::string_view key, std::int64_t n, std::int64_t timestamp) {
    std::string text;
    std::int64_t total = storage_->get(key, text) ? std::stoll(text) + n : n;
    text = std::to_string(total);
    storage_->put(key, text);
    if (changelog_) changelog_->log(key, std::string_view(text), timestamp);
  }
  std::int64_t get(std::string_view key) {
    std::string text;
    return storage_->get(key, text) ? std::stoll(text) : 0;
  }
  bool logged() const noexcept { return changelog_ != nullptr; }

  const std::string& name() const noexcept override { return storage_->name(); }
  std::optional<sluice::state::changelog_offset> committed_offset() const noexcept override {
    return storage_->committed_offset();
  }
  void commit(sluice::state::changelog_offset next) override {
    ++commits;
    storage_->commit(next);
  }
  void abort() override { storage_->abort(); }
  void restore(std::span<const sluice::state::restore_record> batch, sluice::state::changelog_offset next) override {
    storage_->restore(batch, next);
  }
  void flush() override { storage_->flush(); }
  std::size_t pending_bytes() const noexcept override { return storage_->pending_bytes(); }
  void close() override { storage_->close(); }

  int commits = 0;

 private:
  std::unique_ptr<sluice::state::kv_store> storage_;
  sluice::state::changelog_sink* changelog_;
};

/// The typed handle processors and tests use.
class tally_handle {
 public:
  tally_handle(sluice::detail::store_binding binding, sluice::detail::task_context* task)
      : store_(sluice::detail::store_of_kind<tally_store>(binding, "tally")), task_(task) {}
  void add(std::string_view key, std::int64_t n) { store_->add(key, n, task_->stream_time()); }
  std::int64_t get(std::string_view key) { return store_->get(key); }
  tally_store& store() { return *store_; }

 private:
  tally_store* store_;
  sluice::detail::task_context* task_;
};

sluice::materialized tallies(std::string name, bool logged = true) {
  return {.name = std::move(name),
          .logged = logged,
          .make_store = [](std::unique_ptr<sluice::state::kv_store> storage, sluice::state::changelog_sink* changelog) {
            return std::make_unique<tally_store>(std::move(storage), changelog);
          }};
}

class tallying : public sluice::processor<std::string, std::string, std::string, std::int64_t> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    tallies_.emplace(ctx.state_store<tally_handle>("tallies"));
  }
  void process(const sluice::record<std::string, std::string>& r) override {
    tallies_->add(r.key, 1);
    context().forward({r.key, tallies_->get(r.key), r.timestamp, {}});
  }

 private:
  std::optional<tally_handle> tallies_;
};

sluice::topology tally_topology(bool logged = true) {
  sluice::streams_builder b;
  b.add_state_store(tallies("tallies", logged));
  b.stream<std::string, std::string>("words")
      .process([] { return std::make_unique<tallying>(); }, "tallies")
      .to("tallied");
  return b.build();
}

}  // namespace

TEST(store_kind, a_processor_uses_its_own_store_kind_and_the_kind_logs_its_writes) {
  topology_test_driver d(tally_topology());
  auto in = d.input_topic<std::string, std::string>("words");
  auto out = d.output_topic<std::string, std::int64_t>("tallied");
  in.pipe("a", "x", 1);
  in.pipe("a", "y", 2);
  in.pipe("b", "z", 3);
  auto results = out.read_all();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[1].value, 2);
  EXPECT_EQ(d.state_store<tally_handle>("tallies").get("a"), 2);
  EXPECT_GT(d.state_store<tally_handle>("tallies").store().commits, 0);
  auto& changelog = d.records(d.application_id() + "-tallies-changelog");
  ASSERT_EQ(changelog.size(), 3u);
  EXPECT_EQ(changelog.back().key, "b");
  EXPECT_EQ(changelog.back().value, "1");
}

TEST(store_kind, an_unlogged_kind_gets_no_changelog) {
  topology_test_driver d(tally_topology(/*logged=*/false));
  d.input_topic<std::string, std::string>("words").pipe("a", "x", 1);
  EXPECT_FALSE(d.state_store<tally_handle>("tallies").store().logged());
  EXPECT_EQ(d.state_store<tally_handle>("tallies").get("a"), 1);
}

TEST(store_kind, asking_for_a_store_as_another_kind_names_the_store) {
  topology_test_driver d(tally_topology());
  auto wrong =
      sluice::test::error_of([&] { d.store<std::string, std::int64_t>("tallies"); }, sluice::errc::invalid_topology);
  EXPECT_NE(wrong.find("store 'tallies' is not a key-value store"), std::string::npos) << wrong;
}

TEST(store_kind, a_key_value_store_asked_for_as_another_kind_names_the_store) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("words").group_by_key().count("counts");
  topology_test_driver d(b.build());
  auto wrong = sluice::test::error_of([&] { d.state_store<tally_handle>("counts"); }, sluice::errc::invalid_topology);
  EXPECT_NE(wrong.find("store 'counts' is not a tally store"), std::string::npos) << wrong;
}

namespace {

/// Remembers each key's last value in a TTL store and emits what the store still holds for
/// the key named in the record's value.
class remembering : public sluice::processor<std::string, std::string, std::string, std::string> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    seen_.emplace(ctx.store<std::string, std::string>("seen"));
  }
  void process(const sluice::record<std::string, std::string>& r) override {
    context().forward({r.value, seen_->get(r.value).value_or("(expired)"), r.timestamp, {}});
    seen_->put(r.key, r.value);
  }

 private:
  std::optional<sluice::key_value_store<std::string, std::string>> seen_;
};

}  // namespace

TEST(store_ttl, entries_expire_on_stream_time_not_on_the_wall_clock) {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  b.add_state_store({.name = "seen", .ttl = 1s});
  b.stream<std::string, std::string>("in").process([] { return std::make_unique<remembering>(); }, "seen").to("out");
  // Two-year-old timestamps, as in a backfill: what counts is how far the records advance.
  const std::int64_t t0 = 1'600'000'000'000;
  topology_test_driver d(b.build(), {}, {.start_wall_clock_ms = t0 + 2LL * 365 * 24 * 3600 * 1000});
  auto in = d.input_topic<std::string, std::string>("in");
  auto out = d.output_topic<std::string, std::string>("out");
  in.pipe("a", "x", t0);
  in.pipe("b", "a", t0 + 999);   // stream time moved 999 ms: a is still there
  in.pipe("c", "a", t0 + 1000);  // 1 s of stream time after a was written: a expired
  d.advance_wall_clock(24h);     // the wall clock expires nothing
  in.pipe("d", "c", t0 + 1001);
  auto results = out.read_all();
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[1].value, "x");
  EXPECT_EQ(results[2].value, "(expired)");
  EXPECT_EQ(results[3].value, "a");
}

// The generic read path (sluice/queries.hpp) as the driver serves it: the code an app's
// queries() runs, against stores of any kind.

TEST(store_queries, a_store_of_any_kind_is_read_through_its_typed_handle) {
  sluice::testing::driver_options o;
  o.partitions = 2;
  topology_test_driver d(tally_topology(), {}, o);
  auto in = d.input_topic<std::string, std::string>("words");
  for (int i = 0; i < 3; ++i) in.pipe("a", "x");
  in.pipe("b", "x");
  auto& q = d.queries();
  const auto p = q.partition_of("tallies", "a");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(q.partitions("tallies"), 2);
  EXPECT_EQ(q.read<tally_handle>("tallies", *p, [](tally_handle& h) { return h.get("a"); }), 3);
  std::int64_t b = -1;
  EXPECT_EQ(q.run<tally_handle>("tallies", *q.partition_of("tallies", "b"), [&](tally_handle& h) { b = h.get("b"); }),
            sluice::query_outcome::done);
  EXPECT_EQ(b, 1);
}

TEST(store_queries, a_store_asked_for_as_another_kind_answers_wrong_kind_naming_the_store) {
  topology_test_driver d(tally_topology());
  auto& q = d.queries();
  std::string failure;
  bool ran = false;
  auto as_queue = q.run<sluice::queue_store_handle>(
      "tallies", 0, [&](sluice::queue_store_handle&) { ran = true; }, sluice::interactive_queries::default_timeout,
      &failure);
  EXPECT_EQ(as_queue, sluice::query_outcome::wrong_kind);
  EXPECT_FALSE(ran);
  EXPECT_NE(failure.find("store 'tallies' is not a queue store"), std::string::npos) << failure;
  auto as_kv = q.run(
      "tallies", 0, [&](sluice::state::kv_store&) { ran = true; }, sluice::interactive_queries::default_timeout,
      &failure);
  EXPECT_EQ(as_kv, sluice::query_outcome::wrong_kind);
  EXPECT_FALSE(ran);
  EXPECT_NE(failure.find("store 'tallies' is not a key-value store"), std::string::npos) << failure;
  try {
    q.read<sluice::ranked_index_store>("tallies", 0, [](sluice::ranked_index_store& s) { return s.count("x"); });
    ADD_FAILURE() << "read of the wrong kind did not throw";
  } catch (const sluice::query_error& e) {
    EXPECT_EQ(e.outcome(), sluice::query_outcome::wrong_kind);
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("store 'tallies' is not a ranked index store"), std::string::npos) << e.what();
  }
}

TEST(store_queries, a_write_through_a_handle_in_a_query_is_refused_before_the_store_changes) {
  topology_test_driver d(tally_topology());
  d.input_topic<std::string, std::string>("words").pipe("a", "x", 1, {}, 0);
  auto& q = d.queries();
  std::string failure;
  auto o = q.run<tally_handle>(
      "tallies", 0, [](tally_handle& h) { h.add("a", 100); }, sluice::interactive_queries::default_timeout, &failure);
  EXPECT_EQ(o, sluice::query_outcome::failed);
  EXPECT_NE(failure.find("a store query may only read"), std::string::npos) << failure;
  EXPECT_EQ(d.state_store<tally_handle>("tallies").get("a"), 1);
}

TEST(store_queries, unknown_stores_and_partitions_without_a_task_are_told_apart) {
  topology_test_driver d(tally_topology());
  auto& q = d.queries();
  EXPECT_EQ(q.run<tally_handle>("no-such-store", 0, [](tally_handle&) {}), sluice::query_outcome::unknown_store);
  EXPECT_FALSE(q.partition_of("no-such-store", "a").has_value());
  EXPECT_EQ(q.partitions("no-such-store"), 0);
  EXPECT_EQ(q.run<tally_handle>("tallies", 7, [](tally_handle&) {}), sluice::query_outcome::not_local);
  try {
    q.read<tally_handle>("tallies", 7, [](tally_handle& h) { return h.get("a"); });
    ADD_FAILURE() << "read of a partition without a task did not throw";
  } catch (const sluice::query_error& e) {
    EXPECT_EQ(e.outcome(), sluice::query_outcome::not_local);
    EXPECT_NE(std::string(e.what()).find("partition 7 of store 'tallies' is not hosted by this instance"),
              std::string::npos)
        << e.what();
  }
}
