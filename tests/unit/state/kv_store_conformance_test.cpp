// One behaviour suite for every kv_store implementation: RocksDB and in-memory must agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sluice/state/kv_store.hpp"
#include "sluice/state/rocksdb_store.hpp"
#include "state_test_util.hpp"

namespace sluice::state {
namespace {

using test::manual_clock;
using test::temp_dir;
using entries = std::vector<std::pair<std::string, std::string>>;

rocksdb_environment& shared_environment() {
  static rocksdb_environment env({.memory_budget_bytes = std::size_t{32} << 20});
  return env;
}

struct store_factory {
  std::string name;
  std::function<std::unique_ptr<kv_store>(const store_options&)> open;
};

void PrintTo(const store_factory& f, std::ostream* os) { *os << f.name; }

store_factory rocksdb_factory() {
  return {"rocksdb", [](const store_options& o) { return open_rocksdb_store(o, shared_environment()); }};
}
store_factory memory_factory() {
  return {"memory", [](const store_options& o) { return open_memory_store(o); }};
}

entries drain(kv_iterator it) {
  entries out;
  for (; it.valid(); it.next()) {
    out.emplace_back(std::string(it.key()), std::string(it.value()));
  }
  return out;
}

class kv_store_conformance : public ::testing::TestWithParam<store_factory> {
 protected:
  std::unique_ptr<kv_store> open(store_options o = {}) {
    if (o.name.empty()) o.name = "store";
    o.directory = dir_.path();
    if (!o.now_ms) o.now_ms = clock_.fn();
    return GetParam().open(o);
  }

  void put_all(kv_store& s, const entries& kvs) {
    for (const auto& [k, v] : kvs) s.put(k, v);
  }

  temp_dir dir_;
  manual_clock clock_;
};

TEST_P(kv_store_conformance, get_put_remove_round_trip) {
  auto s = open();
  EXPECT_EQ(s->get("a"), std::nullopt);
  s->put("a", "1");
  EXPECT_EQ(s->get("a"), "1");
  std::string buffer = "stale contents";
  ASSERT_TRUE(s->get("a", buffer));
  EXPECT_EQ(buffer, "1");
  s->put("a", "2");
  EXPECT_EQ(s->get("a"), "2");
  s->remove("a");
  EXPECT_EQ(s->get("a"), std::nullopt);
  EXPECT_FALSE(s->get("a", buffer));
  s->remove("never-written");  // no-op
  s->put(std::string("k\0ey", 4), std::string("v\0al", 4));
  EXPECT_EQ(s->get(std::string("k\0ey", 4)), std::string("v\0al", 4));
  s->put("empty", "");
  EXPECT_EQ(s->get("empty"), "");
  EXPECT_EQ(s->name(), "store");
}

TEST_P(kv_store_conformance, put_if_absent_writes_only_absent_keys) {
  auto s = open();
  EXPECT_TRUE(s->put_if_absent("a", "1"));
  EXPECT_FALSE(s->put_if_absent("a", "2"));
  EXPECT_EQ(s->get("a"), "1");
  s->commit(changelog_offset(1));
  EXPECT_FALSE(s->put_if_absent("a", "3"));
  s->remove("a");
  EXPECT_TRUE(s->put_if_absent("a", "4"));
  EXPECT_EQ(s->get("a"), "4");
}

TEST_P(kv_store_conformance, range_includes_both_bounds_forward_and_reverse) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}, {"e", "5"}});
  s->commit(changelog_offset(5));
  EXPECT_EQ(drain(s->range("b", "d")), (entries{{"b", "2"}, {"c", "3"}, {"d", "4"}}));
  EXPECT_EQ(drain(s->range("b", "d", direction::reverse)), (entries{{"d", "4"}, {"c", "3"}, {"b", "2"}}));
  EXPECT_EQ(drain(s->range("bb", "dd")), (entries{{"c", "3"}, {"d", "4"}}));
  EXPECT_EQ(drain(s->range("bb", "dd", direction::reverse)), (entries{{"d", "4"}, {"c", "3"}}));
  EXPECT_EQ(drain(s->range("c", "c")), (entries{{"c", "3"}}));
  EXPECT_TRUE(drain(s->range("d", "b")).empty());
  EXPECT_TRUE(drain(s->range("d", "b", direction::reverse)).empty());
  EXPECT_EQ(drain(s->all(direction::reverse)).front().first, "e");
  EXPECT_EQ(drain(s->all()).size(), 5u);
}

TEST_P(kv_store_conformance, keys_order_bytewise_as_unsigned) {
  auto s = open();
  put_all(*s, {{"\xff", "ff"}, {"\x01", "01"}, {"\x7f", "7f"}, {"\x80", "80"}});
  EXPECT_EQ(drain(s->all()), (entries{{"\x01", "01"}, {"\x7f", "7f"}, {"\x80", "80"}, {"\xff", "ff"}}));
}

TEST_P(kv_store_conformance, prefix_scan_handles_0xff_bytes) {
  auto s = open();
  put_all(*s, {{"\xfe\xff", "1"},
               {"\xff", "2"},
               {std::string("\xff\x00", 2), "3"},
               {"\xff\xff", "4"},
               {"\xff\xff\xff", "5"},
               {"a\xff", "6"},
               {"a\xff\x01", "7"},
               {"b", "8"}});
  s->commit(changelog_offset(1));
  s->put("\xff\xfe", "9");  // pending, inside the prefix
  EXPECT_EQ(drain(s->prefix("\xff")), (entries{{"\xff", "2"},
                                               {std::string("\xff\x00", 2), "3"},
                                               {"\xff\xfe", "9"},
                                               {"\xff\xff", "4"},
                                               {"\xff\xff\xff", "5"}}));
  EXPECT_EQ(drain(s->prefix("\xff\xff", direction::reverse)), (entries{{"\xff\xff\xff", "5"}, {"\xff\xff", "4"}}));
  EXPECT_EQ(drain(s->prefix("a\xff")), (entries{{"a\xff", "6"}, {"a\xff\x01", "7"}}));
  EXPECT_EQ(drain(s->prefix("a\xff", direction::reverse)), (entries{{"a\xff\x01", "7"}, {"a\xff", "6"}}));
  EXPECT_TRUE(drain(s->prefix("c")).empty());
  EXPECT_EQ(drain(s->prefix("")).size(), 9u);
}

TEST_P(kv_store_conformance, iteration_merges_pending_writes_over_committed_data) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}, {"c", "3"}});
  s->commit(changelog_offset(3));
  s->put("b", "22");
  s->remove("c");
  s->put("d", "4");
  s->remove("zz");
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"b", "22"}, {"d", "4"}}));
  EXPECT_EQ(drain(s->all(direction::reverse)), (entries{{"d", "4"}, {"b", "22"}, {"a", "1"}}));
  EXPECT_EQ(drain(s->range("b", "c")), (entries{{"b", "22"}}));
  EXPECT_EQ(drain(s->range("b", "d", direction::reverse)), (entries{{"d", "4"}, {"b", "22"}}));
}

TEST_P(kv_store_conformance, iterator_is_a_snapshot_unaffected_by_later_writes) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}});
  s->commit(changelog_offset(2));
  s->put("c", "3");
  auto it = s->all();
  // Deleting what we visit, adding and committing must not disturb the open iterator.
  entries seen;
  for (; it.valid(); it.next()) {
    seen.emplace_back(std::string(it.key()), std::string(it.value()));
    s->remove(it.key());
    s->put("b", "changed");
    s->put("z", "new");
    s->commit(changelog_offset(10));
  }
  EXPECT_EQ(seen, (entries{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  EXPECT_EQ(s->open_iterators(), 1u);
  it = kv_iterator(nullptr, nullptr);
  EXPECT_EQ(s->open_iterators(), 0u);
  EXPECT_EQ(drain(s->all()), (entries{{"b", "changed"}, {"z", "new"}}));
}

TEST_P(kv_store_conformance, scans_see_pending_writes_made_after_an_earlier_scan) {
  auto s = open();
  s->put("b", "2");
  EXPECT_EQ(drain(s->all()), (entries{{"b", "2"}}));
  s->put("a", "1");
  s->put("c", "3");
  s->remove("b");
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"c", "3"}}));
  EXPECT_EQ(drain(s->range("b", "c", direction::reverse)), (entries{{"c", "3"}}));
  s->commit(changelog_offset(1));
  s->put("d", "4");
  EXPECT_EQ(drain(s->prefix("d")), (entries{{"d", "4"}}));
  s->abort();
  s->put("e", "5");
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"c", "3"}, {"e", "5"}}));
}

TEST_P(kv_store_conformance, approximate_count_counts_committed_and_pending_entries) {
  auto s = open();
  EXPECT_EQ(s->approximate_count(), 0u);
  put_all(*s, {{"a", "1"}, {"b", "2"}, {"c", "3"}});
  s->commit(changelog_offset(3));
  EXPECT_EQ(s->approximate_count(), 3u);
  s->put("d", "4");
  EXPECT_EQ(s->approximate_count(), 4u);
}

TEST_P(kv_store_conformance, abort_drops_every_pending_write) {
  auto s = open();
  s->put("a", "1");
  s->commit(changelog_offset(7));
  s->put("b", "2");
  s->put("a", "changed");
  s->remove("a");
  EXPECT_GT(s->pending_bytes(), 0u);
  s->abort();
  EXPECT_EQ(s->pending_bytes(), 0u);
  EXPECT_EQ(s->get("a"), "1");
  EXPECT_EQ(s->get("b"), std::nullopt);
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}}));
  EXPECT_EQ(s->committed_offset(), changelog_offset(7));
}

TEST_P(kv_store_conformance, commit_applies_pending_writes_and_records_the_offset) {
  auto s = open();
  EXPECT_EQ(s->committed_offset(), std::nullopt);
  s->put("a", "1");
  s->commit(changelog_offset(42));
  EXPECT_EQ(s->committed_offset(), changelog_offset(42));
  EXPECT_EQ(s->pending_bytes(), 0u);
  s->abort();  // nothing pending: the committed write stays
  EXPECT_EQ(s->get("a"), "1");
  s->commit(changelog_offset(43));  // an empty commit still moves the offset
  EXPECT_EQ(s->committed_offset(), changelog_offset(43));
}

TEST_P(kv_store_conformance, restore_applies_values_tombstones_and_offset) {
  auto s = open();
  std::vector<restore_record> first{{"a", "1"}, {"b", "2"}, {"c", "3"}};
  s->restore(first, changelog_offset(3));
  EXPECT_EQ(s->committed_offset(), changelog_offset(3));
  std::vector<restore_record> second{{"a", std::nullopt}, {"c", "33"}, {"d", "4"}};
  s->restore(second, changelog_offset(6));
  EXPECT_EQ(s->committed_offset(), changelog_offset(6));
  EXPECT_EQ(drain(s->all()), (entries{{"b", "2"}, {"c", "33"}, {"d", "4"}}));
  s->restore({}, changelog_offset(9));
  EXPECT_EQ(s->committed_offset(), changelog_offset(9));
}

TEST_P(kv_store_conformance, restore_replaces_values_read_before_it) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}});
  s->commit(changelog_offset(2));
  EXPECT_EQ(s->get("a"), "1");
  EXPECT_EQ(s->get("b"), "2");
  std::vector<restore_record> batch{{"a", "11"}, {"b", std::nullopt}};
  s->restore(batch, changelog_offset(4));
  EXPECT_EQ(s->get("a"), "11");
  EXPECT_EQ(s->get("b"), std::nullopt);
  EXPECT_EQ(drain(s->all()), (entries{{"a", "11"}}));
}

TEST_P(kv_store_conformance, committed_deletes_stay_deleted) {
  auto s = open();
  s->put("a", "1");
  s->commit(changelog_offset(1));
  EXPECT_EQ(s->get("a"), "1");
  s->remove("a");
  s->commit(changelog_offset(2));
  EXPECT_EQ(s->get("a"), std::nullopt);
  EXPECT_TRUE(drain(s->all()).empty());
  s->put("a", "again");
  s->abort();
  EXPECT_EQ(s->get("a"), std::nullopt);
  EXPECT_EQ(s->pending_bytes(), 0u);
}

TEST_P(kv_store_conformance, restore_with_pending_writes_is_rejected) {
  auto s = open();
  s->put("a", "1");
  std::vector<restore_record> batch{{"b", "2"}};
  auto e = test::thrown_error([&] { s->restore(batch, changelog_offset(1)); });
  EXPECT_EQ(e.code(), errc::state);
  EXPECT_NE(std::string(e.what()).find("pending writes"), std::string::npos);
}

TEST_P(kv_store_conformance, ttl_hides_entries_once_expired) {
  auto s = open({.ttl = std::chrono::milliseconds(1000)});
  s->put("a", "1");
  s->commit(changelog_offset(1));
  clock_.advance(500);
  s->put("b", "2");  // pending, expires 500 ms after a
  clock_.advance(499);
  EXPECT_EQ(s->get("a"), "1");
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"b", "2"}}));
  clock_.advance(1);  // a is exactly 1000 ms old
  EXPECT_EQ(s->get("a"), std::nullopt);
  EXPECT_EQ(drain(s->all()), (entries{{"b", "2"}}));
  EXPECT_EQ(drain(s->all(direction::reverse)), (entries{{"b", "2"}}));
  EXPECT_TRUE(s->put_if_absent("a", "new"));  // an expired key counts as absent
  s->commit(changelog_offset(2));
  clock_.advance(500);
  EXPECT_EQ(s->get("b"), std::nullopt);
  EXPECT_EQ(drain(s->prefix("")), (entries{{"a", "new"}}));
}

TEST_P(kv_store_conformance, restore_expires_records_by_their_timestamp) {
  auto s = open({.ttl = std::chrono::milliseconds(1000)});
  const std::int64_t now = *clock_.now;
  std::vector<restore_record> batch{{"old", "1", now - 1000}, {"recent", "2", now - 400}, {"untimed", "3"}};
  s->restore(batch, changelog_offset(3));
  EXPECT_EQ(drain(s->all()), (entries{{"recent", "2"}, {"untimed", "3"}}));
  clock_.advance(600);
  EXPECT_EQ(drain(s->all()), (entries{{"untimed", "3"}}));
}

TEST_P(kv_store_conformance, hold_until_commit_keeps_everything_pending) {
  auto s = open({.mode = write_mode::hold_until_commit, .write_through_threshold_bytes = 64});
  for (int i = 0; i < 20; ++i) s->put("k" + std::to_string(i), std::string(32, 'x'));
  EXPECT_GT(s->pending_bytes(), 64u);
  s->abort();
  EXPECT_TRUE(drain(s->all()).empty());
}

TEST_P(kv_store_conformance, write_through_applies_writes_early_beyond_the_threshold) {
  auto s = open({.mode = write_mode::write_through, .write_through_threshold_bytes = 256});
  for (int i = 0; i < 20; ++i) s->put("k" + std::to_string(i), std::string(32, 'x'));
  EXPECT_LE(s->pending_bytes(), 256u);
  s->abort();  // drops only what was not applied yet
  EXPECT_GE(drain(s->all()).size(), 10u);
  EXPECT_EQ(s->committed_offset(), std::nullopt);  // the offset moves only at commit
}

TEST_P(kv_store_conformance, write_through_calls_its_hook_first_and_a_throwing_hook_applies_nothing) {
  int calls = 0;
  bool fail = true;
  auto s = open({.mode = write_mode::write_through, .write_through_threshold_bytes = 256, .before_write_through = [&] {
                   ++calls;
                   if (fail) throw std::runtime_error("outputs not delivered");
                 }});
  int written = 0;
  try {
    for (; written < 20; ++written) s->put("k" + std::to_string(written), std::string(32, 'x'));
    ADD_FAILURE() << "the hook's exception did not propagate from the write";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "outputs not delivered");
  }
  EXPECT_EQ(calls, 1);
  EXPECT_LT(written, 20);
  EXPECT_GT(s->pending_bytes(), 256u);  // the write that passed the bound is pending, as are those before it
  s->abort();
  EXPECT_TRUE(drain(s->all()).empty()) << "writes reached storage although the hook threw";
  fail = false;
  for (int i = 0; i < 20; ++i) s->put("k" + std::to_string(i), std::string(32, 'x'));
  EXPECT_GE(calls, 2);
  s->abort();
  EXPECT_GE(drain(s->all()).size(), 10u);  // applied after the hook returned
}

TEST_P(kv_store_conformance, remove_range_deletes_the_half_open_range_for_every_read) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}, {"e", "5"}});
  s->commit(changelog_offset(5));
  s->remove_range("b", "d");  // b and c; d is the exclusive end
  EXPECT_EQ(s->get("b"), std::nullopt);
  EXPECT_EQ(s->get("c"), std::nullopt);
  EXPECT_EQ(s->get("d"), "4");
  EXPECT_FALSE(s->put_if_absent("a", "x"));
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"d", "4"}, {"e", "5"}}));
  EXPECT_EQ(drain(s->all(direction::reverse)), (entries{{"e", "5"}, {"d", "4"}, {"a", "1"}}));
  EXPECT_EQ(drain(s->range("b", "c")), entries{});
  EXPECT_EQ(drain(s->range("b", "d", direction::reverse)), (entries{{"d", "4"}}));
  EXPECT_EQ(drain(s->prefix("c")), entries{});
  s->commit(changelog_offset(6));
  EXPECT_EQ(s->committed_offset(), changelog_offset(6));
  EXPECT_EQ(s->get("b"), std::nullopt);
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"d", "4"}, {"e", "5"}}));
  EXPECT_TRUE(s->put_if_absent("c", "33"));
  s->commit(changelog_offset(7));
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"c", "33"}, {"d", "4"}, {"e", "5"}}));
}

TEST_P(kv_store_conformance, remove_range_with_empty_or_inverted_bounds_does_nothing) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}});
  s->commit(changelog_offset(2));
  s->remove_range("b", "b");
  s->remove_range("b", "a");
  EXPECT_EQ(s->pending_bytes(), 0u);
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"b", "2"}}));
}

TEST_P(kv_store_conformance, a_put_after_a_range_delete_survives_and_one_before_does_not) {
  auto s = open();
  put_all(*s, {{"k1", "old"}, {"k2", "old"}, {"k3", "old"}});
  s->commit(changelog_offset(3));
  s->put("k2", "before");  // pending, then deleted by the range
  s->put("k4", "before");
  s->remove_range("k0", "k5");
  s->put("k3", "after");
  s->remove("k1");  // a point delete under the range: still absent
  EXPECT_EQ(drain(s->all()), (entries{{"k3", "after"}}));
  EXPECT_EQ(s->get("k2"), std::nullopt);
  EXPECT_EQ(s->get("k3"), "after");
  s->commit(changelog_offset(4));
  EXPECT_EQ(drain(s->all()), (entries{{"k3", "after"}}));
  EXPECT_EQ(s->get("k4"), std::nullopt);
  EXPECT_EQ(s->get("k3"), "after");
}

TEST_P(kv_store_conformance, remove_range_hides_entries_read_recently) {
  auto s = open();
  put_all(*s, {{"q1", "1"}, {"q2", "2"}, {"r1", "3"}});
  s->commit(changelog_offset(3));
  // Read them, so the RocksDB store holds them in its read cache.
  EXPECT_EQ(s->get("q1"), "1");
  EXPECT_EQ(s->get("q2"), "2");
  s->remove_range("q", "r");
  EXPECT_EQ(s->get("q1"), std::nullopt);
  EXPECT_EQ(s->get("q2"), std::nullopt);
  EXPECT_EQ(s->get("r1"), "3");
  s->commit(changelog_offset(4));
  EXPECT_EQ(s->get("q1"), std::nullopt);
  EXPECT_EQ(s->get("q2"), std::nullopt);
  EXPECT_EQ(s->get("r1"), "3");
}

TEST_P(kv_store_conformance, abort_drops_a_pending_range_delete) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}, {"c", "3"}});
  s->commit(changelog_offset(3));
  EXPECT_EQ(s->get("b"), "2");
  s->remove_range("a", "c");
  s->put("b", "new");
  EXPECT_GT(s->pending_bytes(), 0u);
  s->abort();
  EXPECT_EQ(s->pending_bytes(), 0u);
  EXPECT_EQ(s->get("a"), "1");
  EXPECT_EQ(s->get("b"), "2");
  EXPECT_EQ(drain(s->all()), (entries{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  EXPECT_EQ(s->committed_offset(), changelog_offset(3));
}

TEST_P(kv_store_conformance, an_iterator_created_before_a_range_delete_still_shows_the_range) {
  auto s = open();
  put_all(*s, {{"a", "1"}, {"b", "2"}, {"c", "3"}});
  s->commit(changelog_offset(3));
  auto before = s->all();
  s->remove_range("a", "z");
  auto after = s->all();
  s->commit(changelog_offset(4));
  EXPECT_EQ(drain(std::move(before)), (entries{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  EXPECT_EQ(drain(std::move(after)), entries{});
}

TEST_P(kv_store_conformance, overlapping_range_deletes_in_one_batch_combine) {
  auto s = open();
  for (int i = 0; i < 10; ++i) s->put("k" + std::to_string(i), std::to_string(i));
  s->commit(changelog_offset(10));
  s->remove_range("k0", "k3");
  s->remove_range("k2", "k5");
  s->remove_range("k7", "k8");
  s->remove_range("k5", "k6");  // touches k2..k5: one range k0..k6
  EXPECT_EQ(drain(s->all()), (entries{{"k6", "6"}, {"k8", "8"}, {"k9", "9"}}));
  s->commit(changelog_offset(11));
  EXPECT_EQ(drain(s->all(direction::reverse)), (entries{{"k9", "9"}, {"k8", "8"}, {"k6", "6"}}));
}

TEST_P(kv_store_conformance, restore_with_a_pending_range_delete_is_rejected) {
  auto s = open();
  s->remove_range("a", "b");
  std::vector<restore_record> batch{{"c", "2"}};
  auto e = test::thrown_error([&] { s->restore(batch, changelog_offset(1)); });
  EXPECT_EQ(e.code(), errc::state);
}

TEST_P(kv_store_conformance, write_through_applies_a_range_delete_with_the_early_writes) {
  auto s = open({.mode = write_mode::write_through, .write_through_threshold_bytes = 256});
  for (int i = 0; i < 10; ++i) s->put("a" + std::to_string(i), std::string(8, 'x'));
  s->commit(changelog_offset(1));
  s->remove_range("a", "b");
  for (int i = 0; i < 20; ++i) s->put("k" + std::to_string(i), std::string(32, 'x'));
  s->abort();  // the range went out with the early writes
  EXPECT_TRUE(drain(s->prefix("a")).empty());
}

// Random puts, removes, range deletes, commits and aborts against a std::map model; every
// read (get, forward and reverse scans of random ranges) must agree with the model.
TEST_P(kv_store_conformance, randomized_range_deletes_agree_with_a_model) {
  auto s = open({.read_cache_bytes = 2048});
  std::map<std::string, std::string> committed;
  std::map<std::string, std::string> view;
  std::mt19937 rng(7);
  auto key = [&] { return "k" + std::to_string(rng() % 60 + 10); };
  std::int64_t offset = 0;
  for (int step = 0; step < 4000; ++step) {
    const auto op = rng() % 100;
    if (op < 45) {
      auto k = key();
      auto v = std::to_string(step);
      s->put(k, v);
      view[k] = v;
    } else if (op < 55) {
      auto k = key();
      s->remove(k);
      view.erase(k);
    } else if (op < 65) {
      auto a = key();
      auto b = key();
      s->remove_range(a, b);
      if (a < b) view.erase(view.lower_bound(a), view.lower_bound(b));
    } else if (op < 75) {
      auto k = key();
      auto expected = view.count(k) != 0U ? std::optional<std::string>(view[k]) : std::nullopt;
      ASSERT_EQ(s->get(k), expected) << "step " << step << " key " << k;
    } else if (op < 85) {
      auto a = key();
      auto b = key();
      entries want;
      for (auto it = view.lower_bound(a); it != view.end() && it->first <= b; ++it) {
        want.emplace_back(it->first, it->second);
      }
      const bool reverse = rng() % 2 == 0;
      if (reverse) std::reverse(want.begin(), want.end());
      ASSERT_EQ(drain(s->range(a, b, reverse ? direction::reverse : direction::forward)), want) << "step " << step;
    } else if (op < 95) {
      s->commit(changelog_offset(++offset));
      committed = view;
    } else {
      s->abort();
      view = committed;
    }
  }
  s->commit(changelog_offset(++offset));
  ASSERT_EQ(drain(s->all()), entries(view.begin(), view.end()));
}

TEST_P(kv_store_conformance, invalid_store_names_are_rejected) {
  for (const char* bad : {"", ".hidden", "a/b"}) {
    auto e = test::thrown_error([&] { GetParam().open({.name = bad, .directory = dir_.path()}); });
    EXPECT_EQ(e.code(), errc::invalid_config) << bad;
  }
}

using kv_store_conformance_death = kv_store_conformance;

TEST_P(kv_store_conformance_death, closing_a_store_with_an_open_iterator_terminates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto s = open();
        s->put("a", "1");
        auto it = s->all();
        s->close();
      },
      "state store 'store' with 1 open iterator");
}

auto factory_name = [](const ::testing::TestParamInfo<store_factory>& info) { return info.param.name; };
INSTANTIATE_TEST_SUITE_P(stores, kv_store_conformance, ::testing::Values(rocksdb_factory(), memory_factory()),
                         factory_name);
INSTANTIATE_TEST_SUITE_P(stores, kv_store_conformance_death, ::testing::Values(rocksdb_factory(), memory_factory()),
                         factory_name);

}  // namespace
}  // namespace sluice::state
