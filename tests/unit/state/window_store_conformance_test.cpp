// One behaviour suite for window_store over both kv_store backends (RocksDB and in-memory):
// fetch by key and time range, retention by observed stream time, whole segments dropped
// by one range delete (no per-entry deletes), writes held until commit, and restore from
// its own changelog.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sluice/state/kv_store.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "sluice/state/window_store.hpp"
#include "forwarding_store.hpp"
#include "rocksdb_internals.hpp"
#include "recording_changelog.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

using namespace std::chrono_literals;
using test::temp_dir;

rocksdb_environment& shared_environment() {
  static rocksdb_environment env({.memory_budget_bytes = std::size_t{32} << 20});
  return env;
}

struct backend {
  std::string name;
  std::function<std::unique_ptr<kv_store>(const store_options&)> open;
  bool persistent;
};
void PrintTo(const backend& b, std::ostream* os) { *os << b.name; }

/// Forwards to another kv_store and counts deletes: evidence of how retention removes.
class delete_counting_store final : public test::forwarding_store {
 public:
  using forwarding_store::forwarding_store;
  void remove(std::string_view key) override {
    ++point_deletes;
    forwarding_store::remove(key);
  }
  void remove_range(std::string_view from, std::string_view to) override {
    ++range_deletes;
    forwarding_store::remove_range(from, to);
  }
  int point_deletes = 0;
  int range_deletes = 0;
};

std::vector<std::pair<std::int64_t, std::string>> windows(window_store& s, std::string_view key, std::int64_t from,
                                                          std::int64_t to) {
  std::vector<window_entry> out;
  s.fetch(key, from, to, out);
  std::vector<std::pair<std::int64_t, std::string>> v;
  for (auto& e : out) v.emplace_back(e.start, e.value);
  return v;
}

/// The windows underneath: every key but the store's layout record (the one key shorter
/// than a segment id).
std::size_t keys_in(kv_store& s) {
  std::size_t n = 0;
  for (auto it = s.all(); it.valid(); it.next()) n += it.key().size() > 8 ? 1 : 0;
  return n;
}

using W = std::vector<std::pair<std::int64_t, std::string>>;

/// 200 keys in each of segments 0 (starts 0..49) and 1 (50..99) of a store with segments of
/// 50 ms, at observed time 0, committed at changelog offset 1.
void fill_segments_0_and_1(window_store& s) {
  for (int k = 0; k < 200; ++k) {
    s.put("k" + std::to_string(k), k % 50, "x", 0);
    s.put("k" + std::to_string(k), 50 + k % 50, "x", 0);
  }
  s.commit(changelog_offset(1));
}

class window_store_conformance : public ::testing::TestWithParam<backend> {
 protected:
  std::unique_ptr<kv_store> open_kv(const std::string& name = "windows") {
    store_options so;
    so.name = name;
    so.directory = dir_.path();
    return GetParam().open(so);
  }
  /// Retention 100 ms in segments of 50 ms: a window is live while start > observed - 100.
  std::unique_ptr<window_store> open(changelog_sink* sink = nullptr, const std::string& name = "windows") {
    return std::make_unique<window_store>(open_kv(name), sink,
                                          window_store_options{.retention = 100ms, .segment_interval = 50ms});
  }
  temp_dir dir_;
};

TEST_P(window_store_conformance, fetch_returns_a_keys_windows_in_the_time_range_ordered_by_start_across_segments) {
  auto s = open();
  for (std::int64_t t : {0, 10, 49, 50, 60, 99}) s->put("page", t, "v" + std::to_string(t), t);
  s->put("pag", 10, "other key", 10);    // a prefix of "page": never mixed in
  s->put("pages", 10, "other key", 10);  // and one that "page" is a prefix of
  s->commit(changelog_offset(1));
  EXPECT_EQ(windows(*s, "page", 10, 60), (W{{10, "v10"}, {49, "v49"}, {50, "v50"}, {60, "v60"}}));
  EXPECT_EQ(windows(*s, "page", 0, 1000),
            (W{{0, "v0"}, {10, "v10"}, {49, "v49"}, {50, "v50"}, {60, "v60"}, {99, "v99"}}));
  EXPECT_EQ(windows(*s, "pag", 0, 1000), (W{{10, "other key"}}));
  EXPECT_EQ(s->fetch("page", 49), std::optional<std::string>("v49"));
  EXPECT_EQ(s->fetch("page", 48), std::nullopt);
  EXPECT_TRUE(windows(*s, "page", 61, 98).empty());
}

TEST_P(window_store_conformance, a_put_overwrites_and_remove_deletes_one_window) {
  auto s = open();
  s->put("k", 20, "a", 20);
  s->put("k", 20, "b", 21);
  s->put("k", 30, "c", 30);
  s->remove("k", 20, 31);
  s->commit(changelog_offset(1));
  EXPECT_EQ(windows(*s, "k", 0, 100), (W{{30, "c"}}));
}

TEST_P(window_store_conformance, windows_at_or_below_observed_time_minus_retention_are_expired) {
  auto s = open();
  s->put("k", 100, "a", 100);
  s->put("k", 101, "b", 101);
  s->put("k", 200, "c", 200);  // observed 200: live starts are > 100
  EXPECT_EQ(s->observed_stream_time(), 200);
  EXPECT_EQ(windows(*s, "k", 0, 1000), (W{{101, "b"}, {200, "c"}}));
  EXPECT_EQ(s->fetch("k", 100), std::nullopt);
  EXPECT_FALSE(s->put("k", 100, "late", 201));  // an expired window is not written
  EXPECT_FALSE(s->put("other", 50, "late", 201));
  s->commit(changelog_offset(1));
  EXPECT_EQ(windows(*s, "k", 0, 1000), (W{{101, "b"}, {200, "c"}}));
  EXPECT_TRUE(windows(*s, "other", 0, 1000).empty());
}

TEST_P(window_store_conformance, retention_drops_whole_segments_with_one_range_delete_and_no_per_entry_delete) {
  auto counting = std::make_unique<delete_counting_store>(open_kv());
  auto* kv = counting.get();
  window_store s(std::move(counting), nullptr, {.retention = 100ms, .segment_interval = 50ms});
  fill_segments_0_and_1(s);
  EXPECT_EQ(keys_in(*kv), 400u);
  // Observed 160: live starts are > 60, so segment 0 is wholly expired; segment 1 holds
  // live windows (61..99) and stays whole.
  s.put("k0", 160, "x", 160);
  s.commit(changelog_offset(2));
  EXPECT_EQ(kv->point_deletes, 0);
  EXPECT_EQ(kv->range_deletes, 1);
  EXPECT_EQ(keys_in(*kv), 201u);  // segment 1's 200 + the new one; segment 0 is gone
  // Observed 260: segments 1 and 2 (50..149) leave; still one range delete more, none per entry.
  s.put("k1", 260, "x", 260);
  s.commit(changelog_offset(3));
  EXPECT_EQ(kv->point_deletes, 0);
  EXPECT_EQ(kv->range_deletes, 2);
  EXPECT_EQ(keys_in(*kv), 2u);  // windows 160 (segment 3) and 260 (segment 5)
}

TEST_P(window_store_conformance, writes_wait_for_the_commit_and_abort_drops_them_with_the_time_they_advanced) {
  auto s = open();
  s->put("k", 10, "committed", 10);
  s->commit(changelog_offset(1));
  s->put("k", 20, "pending", 20);
  s->put("k", 500, "pending", 500);  // would expire window 10
  EXPECT_EQ(windows(*s, "k", 0, 1000), (W{{500, "pending"}}));
  s->abort();
  EXPECT_EQ(s->observed_stream_time(), 10);
  EXPECT_EQ(windows(*s, "k", 0, 1000), (W{{10, "committed"}}));
  EXPECT_EQ(s->committed_offset(), changelog_offset(1));
}

TEST_P(window_store_conformance, restore_from_its_changelog_rebuilds_live_windows_and_skips_expired_ones) {
  test::recording_changelog sink;
  {
    auto s = open(&sink);
    s->put("a", 10, "a10", 10);
    s->put("a", 60, "a60", 60);
    s->put("b", 60, "b60", 60);
    s->remove("b", 60, 61);
    s->put("a", 140, "a140", 140);  // observed 140: window 10 expires (segment 0 dropped)
    s->commit(changelog_offset(5));
  }
  ASSERT_EQ(sink.records().size(), 6u);  // the layout record, then the five writes
  EXPECT_EQ(sink.records()[0].key, std::string(4, '\0'));
  EXPECT_EQ(sink.records()[1].key, window_entry_key("a", 10, 50ms));
  EXPECT_EQ(sink.records()[4].value, std::nullopt);  // the remove is a tombstone
  EXPECT_EQ(sink.records()[5].timestamp, 140);

  auto r = open(nullptr, "restored");
  r->restore(sink.restore_batch(), changelog_offset(5));
  EXPECT_EQ(r->committed_offset(), changelog_offset(5));
  EXPECT_EQ(r->observed_stream_time(), 140);
  EXPECT_EQ(windows(*r, "a", 0, 1000), (W{{60, "a60"}, {140, "a140"}}));
  EXPECT_TRUE(windows(*r, "b", 0, 1000).empty());
  EXPECT_EQ(keys_in(r->storage()), 2u);  // the expired window was never written
}

TEST_P(window_store_conformance, a_reopened_store_keeps_committed_windows_and_its_observed_time) {
  if (!GetParam().persistent)
    GTEST_SKIP() << "the in-memory store starts empty on every open (restored from its changelog)";
  {
    auto s = open();
    s->put("k", 30, "a", 30);
    s->put("k", 120, "b", 120);
    s->commit(changelog_offset(7));
    s->put("k", 125, "never committed", 125);
  }  // closed with a pending write: dropped
  auto s = open();
  EXPECT_EQ(s->committed_offset(), changelog_offset(7));
  EXPECT_EQ(s->observed_stream_time(), 120);
  EXPECT_EQ(windows(*s, "k", 0, 1000), (W{{30, "a"}, {120, "b"}}));
}

// The segment interval is part of every window's key. A store keeps the one it was first
// written with, so a topology that now asks for another retention (a longer grace) finds the
// windows it holds, whether the store is reopened or restored from its changelog.
TEST_P(window_store_conformance, a_store_keeps_its_segment_interval_when_the_options_would_give_another) {
  test::recording_changelog sink;
  const window_store_options longer{.retention = 300ms};  // alone: segments of 60 s
  {
    auto s = open(&sink);
    s->put("a", 120, "a120", 120);
    s->put("b", 130, "b130", 130);
    s->commit(changelog_offset(3));
  }
  auto restored = std::make_unique<window_store>(open_kv("restored"), nullptr, longer);
  EXPECT_EQ(restored->segment_interval(), 60s);  // new and empty: the options decide
  restored->restore(sink.restore_batch(), changelog_offset(3));
  EXPECT_EQ(restored->segment_interval(), 50ms);
  EXPECT_EQ(restored->fetch("a", 120), std::optional<std::string>("a120"));
  EXPECT_EQ(windows(*restored, "b", 0, 1000), (W{{130, "b130"}}));
  restored->put("a", 120, "a120 again", 140);  // overwrites the window, no second copy
  restored->commit(changelog_offset(4));
  EXPECT_EQ(windows(*restored, "a", 0, 1000), (W{{120, "a120 again"}}));
  EXPECT_EQ(keys_in(restored->storage()), 2u);

  if (!GetParam().persistent) return;  // the in-memory store starts empty on every open
  auto reopened = std::make_unique<window_store>(open_kv(), nullptr, longer);
  EXPECT_EQ(reopened->segment_interval(), 50ms);
  EXPECT_EQ(reopened->fetch("a", 120), std::optional<std::string>("a120"));
  EXPECT_EQ(reopened->observed_stream_time(), 130);
}

TEST_P(window_store_conformance, an_aborted_first_write_takes_the_layout_record_with_it_and_the_next_writes_it) {
  test::recording_changelog sink(test::logged::at_commit);  // as under exactly-once
  auto s = open(&sink);
  s->put("a", 10, "aborted", 10);
  s->abort();
  sink.abort();
  s->put("a", 20, "kept", 20);
  s->commit(changelog_offset(2));
  sink.commit();
  ASSERT_EQ(sink.records().size(), 2u);
  EXPECT_EQ(sink.records()[0].key, std::string(4, '\0'));
  auto restored = std::make_unique<window_store>(open_kv("restored"), nullptr, window_store_options{.retention = 1h});
  restored->restore(sink.restore_batch(), changelog_offset(2));
  EXPECT_EQ(restored->segment_interval(), 50ms);
  EXPECT_EQ(restored->fetch("a", 20), std::optional<std::string>("kept"));
}

// A windowed aggregation keeps the highest record timestamp it has seen in its store, once a
// commit, so that after a restart a window that had closed stays closed. The time goes with
// the layout record: committed with the store, logged, restored, and dropped by an abort.
TEST_P(window_store_conformance, a_kept_record_time_survives_reopen_and_restore_and_goes_with_an_abort) {
  test::recording_changelog sink(test::logged::at_commit);  // as under exactly-once
  {
    auto s = open(&sink);
    EXPECT_EQ(s->kept_record_time(), -1);
    s->put("a", 10, "a10", 10);
    s->keep_record_time(95, 95);
    s->keep_record_time(90, 95);  // never goes back
    EXPECT_EQ(s->kept_record_time(), 95);
    s->commit(changelog_offset(3));
    sink.commit();
    s->keep_record_time(500, 500);  // pending, then aborted
    s->abort();
    sink.abort();
    EXPECT_EQ(s->kept_record_time(), 95);
    EXPECT_EQ(s->observed_stream_time(), 10);  // the window starts decide expiry, not this
  }
  auto restored = std::make_unique<window_store>(open_kv("restored"), nullptr, window_store_options{.retention = 1h});
  restored->restore(sink.restore_batch(), changelog_offset(3));
  EXPECT_EQ(restored->kept_record_time(), 95);
  EXPECT_EQ(restored->segment_interval(), 50ms);
  EXPECT_EQ(restored->fetch("a", 10), std::optional<std::string>("a10"));

  if (!GetParam().persistent) return;  // the in-memory store starts empty on every open
  auto reopened = open();
  EXPECT_EQ(reopened->kept_record_time(), 95);
}

// A store written before record times were kept has an 8-byte layout record: it opens and
// restores with no kept time, and the next kept time rewrites the record whole.
TEST_P(window_store_conformance, a_layout_record_without_a_record_time_reads_as_none_kept) {
  const std::string layout_key(4, '\0'), layout("\0\0\0\0\0\0\0\x32", 8);  // 50 ms, no time
  const std::string window_key = window_entry_key("a", 10, 50ms);
  const std::vector<restore_record> old_changelog{{layout_key, layout}, {window_key, "a10"}};
  auto s = std::make_unique<window_store>(open_kv(), nullptr, window_store_options{.retention = 1h});
  s->restore(old_changelog, changelog_offset(2));
  EXPECT_EQ(s->segment_interval(), 50ms);
  EXPECT_EQ(s->kept_record_time(), -1);
  EXPECT_EQ(s->fetch("a", 10), std::optional<std::string>("a10"));
  s->keep_record_time(70, 70);
  s->commit(changelog_offset(3));
  if (!GetParam().persistent) return;
  s.reset();
  auto reopened = std::make_unique<window_store>(open_kv(), nullptr, window_store_options{.retention = 1h});
  EXPECT_EQ(reopened->segment_interval(), 50ms);
  EXPECT_EQ(reopened->kept_record_time(), 70);
}

TEST_P(window_store_conformance, invalid_options_and_negative_starts_are_refused_with_the_store_name) {
  try {
    window_store s(open_kv(), nullptr, {.retention = 0ms});
    FAIL() << "expected a refusal";
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_config);
    EXPECT_NE(std::string(e.what()).find("'windows'"), std::string::npos) << e.what();
  }
  auto s = open(nullptr, "w2");
  EXPECT_THROW(s->put("k", -1, "x", 0), sluice::error);
}

TEST(window_store_on_rocksdb, retention_drops_segments_so_rocksdb_holds_fewer_keys_and_no_delete_tombstones) {
  temp_dir dir;
  store_options so;
  so.name = "windows";
  so.directory = dir.path();
  auto kv = open_rocksdb_store(so, shared_environment());
  kv_store* rocks = kv.get();
  window_store s(std::move(kv), nullptr, {.retention = 100ms, .segment_interval = 50ms});
  fill_segments_0_and_1(s);
  s.flush();
  rocksdb_compact_now(*rocks);
  EXPECT_EQ(rocksdb_int_property(*rocks, "rocksdb.estimate-num-keys"), 401u);  // and the layout record
  // Observed 160: segment 0 leaves retention.
  s.put("k0", 160, "x", 160);
  s.commit(changelog_offset(2));
  // RocksDB's own count of point deletes in the memtable the commit wrote: none.
  EXPECT_EQ(rocksdb_int_property(*rocks, "rocksdb.num-deletes-active-mem-table"), 0u);
  s.flush();
  rocksdb_compact_now(*rocks);
  // RocksDB's own key count: segment 1's 200, the new window and the layout record; segment
  // 0's 200 are gone.
  EXPECT_EQ(rocksdb_int_property(*rocks, "rocksdb.estimate-num-keys"), 202u);
}

TEST(window_store, default_segment_interval_is_kafka_streams_max_of_half_the_retention_and_a_minute) {
  store_options so;
  so.name = "w";
  EXPECT_EQ(window_store(open_memory_store(so), nullptr, {.retention = 24h}).segment_interval(), 12h);
  EXPECT_EQ(window_store(open_memory_store(so), nullptr, {.retention = 10s}).segment_interval(), 60s);
}

INSTANTIATE_TEST_SUITE_P(
    backends, window_store_conformance,
    ::testing::Values(backend{"rocksdb",
                              [](const store_options& o) { return open_rocksdb_store(o, shared_environment()); }, true},
                      backend{"memory", [](const store_options& o) { return open_memory_store(o); }, false}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sluice::state
