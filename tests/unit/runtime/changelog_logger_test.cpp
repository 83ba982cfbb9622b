// changelog_logger on its own, over a sender that records what it is given: the last write
// per key since the last commit (value or tombstone, with its timestamp), sent in first-write
// order; every write in write order (every_write_per_commit); the task-wide byte bound that
// sends early; drop() after an abort; the counts the early-commit policy reads.
#include "runtime/state_manager.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace sluice::runtime {
namespace {

struct sent_record {
  std::string topic;
  std::int32_t partition = -1;
  std::string key;
  std::optional<std::string> value;
  std::int64_t timestamp = 0;
  bool operator==(const sent_record&) const = default;
};

class recording_sender final : public record_sender {
 public:
  std::vector<sent_record> sent;
  void send(std::string_view topic, std::int32_t partition, const std::optional<std::string_view>& key,
            const std::optional<std::string_view>& value, std::int64_t timestamp, const sluice::headers&) override {
    sent.push_back({std::string(topic), partition, std::string(key.value_or("")),
                    value ? std::optional<std::string>(*value) : std::nullopt, timestamp});
  }
};

struct logger_fixture {
  recording_sender sender;
  changelog_buffer_budget budget{.bound = 1 << 20};
  changelog_logger logger{"cl", 3, sender, changelog_batching::last_write_per_commit, &budget};
};

TEST(changelog_logger, sends_the_last_write_per_key_at_send_in_first_write_order) {
  logger_fixture f;
  f.logger.log("a", "1", 10);
  f.logger.log("b", "1", 11);
  f.logger.log("a", "2", 12);
  f.logger.log("a", "3", 13);
  EXPECT_TRUE(f.sender.sent.empty());
  EXPECT_EQ(f.logger.buffered(), 2u);
  f.logger.send();
  EXPECT_EQ(f.sender.sent, (std::vector<sent_record>{{"cl", 3, "a", "3", 13}, {"cl", 3, "b", "1", 11}}));
  EXPECT_EQ(f.logger.buffered(), 0u);
  EXPECT_EQ(f.budget.used, 0);
}

TEST(changelog_logger, the_next_commit_starts_empty_whatever_the_entries_kept_from_the_last) {
  // send() and drop() keep the buffer's entries for reuse: what they held must not show.
  logger_fixture f;
  f.logger.log("a-long-key-beyond-small-strings", std::string(100, 'x'), 1);
  f.logger.log("b", "1", 2);
  f.logger.log("c", std::nullopt, 3);
  f.logger.send();
  f.sender.sent.clear();
  f.logger.log("d", std::nullopt, 4);  // into the entry that held "a...": now a tombstone
  f.logger.log("b", "2", 5);
  EXPECT_EQ(f.logger.buffered(), 2u);
  EXPECT_EQ(f.logger.buffered_bytes(), 3);
  f.logger.send();
  EXPECT_EQ(f.sender.sent, (std::vector<sent_record>{{"cl", 3, "d", std::nullopt, 4}, {"cl", 3, "b", "2", 5}}));
  f.sender.sent.clear();
  f.logger.log("e", "3", 6);
  f.logger.drop();
  f.logger.log("f", "4", 7);
  f.logger.send();
  EXPECT_EQ(f.sender.sent, (std::vector<sent_record>{{"cl", 3, "f", "4", 7}}));
  EXPECT_EQ(f.budget.used, 0);
}

TEST(changelog_logger, a_bursts_entries_go_with_the_next_smaller_send) {
  // The entries kept for reuse are as many as the last send emptied: a burst of 10,000 keys
  // in one commit does not keep 10,000 entries for the life of the task.
  logger_fixture f;
  for (int i = 0; i < 10000; ++i) f.logger.log("key-" + std::to_string(i), "v", i);
  f.logger.send();
  EXPECT_EQ(f.logger.kept_entries(), 10000u);
  for (int i = 0; i < 10; ++i) f.logger.log("key-" + std::to_string(i), "w", i);
  f.logger.send();
  EXPECT_EQ(f.logger.kept_entries(), 10u);
  EXPECT_EQ(f.sender.sent.size(), 10010u);
  EXPECT_EQ(f.sender.sent.back(), (sent_record{"cl", 3, "key-9", "w", 9}));
  f.logger.send();  // nothing buffered: nothing kept
  EXPECT_EQ(f.logger.kept_entries(), 0u);
}

TEST(changelog_logger, a_tombstone_replaces_a_value_and_a_value_a_tombstone) {
  logger_fixture f;
  f.logger.log("a", "1", 1);
  f.logger.log("a", std::nullopt, 2);
  f.logger.log("b", std::nullopt, 3);
  f.logger.log("b", "back", 4);
  f.logger.send();
  EXPECT_EQ(f.sender.sent, (std::vector<sent_record>{{"cl", 3, "a", std::nullopt, 2}, {"cl", 3, "b", "back", 4}}));
}

TEST(changelog_logger, passing_the_task_bound_sends_early) {
  recording_sender sender;
  changelog_buffer_budget budget{.bound = 10};
  changelog_logger one{"one", 0, sender, changelog_batching::last_write_per_commit, &budget};
  changelog_logger two{"two", 0, sender, changelog_batching::last_write_per_commit, &budget};
  one.log("k1", "12345", 0);  // 7 bytes of the task's 10
  EXPECT_EQ(budget.used, 7);
  one.log("k1", "1234", 0);  // overwritten: 6, not 13
  EXPECT_EQ(budget.used, 6);
  EXPECT_TRUE(sender.sent.empty());
  two.log("k2", "123", 0);  // 11 > 10: the logger whose write passed the bound sends
  ASSERT_EQ(sender.sent.size(), 1u);
  EXPECT_EQ(sender.sent[0].topic, "two");
  EXPECT_EQ(budget.used, 6);
  EXPECT_EQ(two.sent(), 1);
  EXPECT_EQ(one.buffered(), 1u);
}

TEST(changelog_logger, drop_forgets_the_buffer_and_the_count) {
  logger_fixture f;
  f.logger.log("a", "1", 0);
  f.logger.send();
  f.logger.log("b", "1", 0);
  EXPECT_EQ(f.logger.uncommitted(), 2);
  f.logger.drop();
  EXPECT_EQ(f.logger.uncommitted(), 0);
  EXPECT_EQ(f.budget.used, 0);
  f.logger.send();
  EXPECT_EQ(f.sender.sent.size(), 1u);  // only "a", sent before the abort
}

TEST(changelog_logger, uncommitted_counts_records_sent_and_buffered_not_writes) {
  logger_fixture f;
  for (int i = 0; i < 5; ++i) f.logger.log("a", "v", i);
  f.logger.log("b", "v", 0);
  EXPECT_EQ(f.logger.uncommitted(), 2);  // the commit will add two records to the changelog
  f.logger.send();
  f.logger.log("a", "w", 9);
  EXPECT_EQ(f.logger.uncommitted(), 3);
  f.logger.send();
  f.logger.reset();
  EXPECT_EQ(f.logger.uncommitted(), 0);
}

TEST(changelog_logger, per_write_and_a_zero_bound_send_every_write_at_once) {
  recording_sender sender;
  changelog_buffer_budget off{.bound = 0};
  changelog_logger per_write{"p", 0, sender, changelog_batching::per_write, nullptr};
  changelog_logger unbuffered{"u", 0, sender, changelog_batching::last_write_per_commit, &off};
  per_write.log("a", "1", -5);  // a negative timestamp goes out as 0
  per_write.log("a", "2", 1);
  unbuffered.log("a", "1", 2);
  EXPECT_EQ(sender.sent,
            (std::vector<sent_record>{{"p", 0, "a", "1", 0}, {"p", 0, "a", "2", 1}, {"u", 0, "a", "1", 2}}));
  EXPECT_EQ(per_write.uncommitted(), 2);
}

TEST(changelog_logger, every_write_per_commit_keeps_every_write_in_write_order_until_send) {
  // What queue, window and custom store kinds get under at-least-once: each write, held so
  // that its changelog record waits for the outputs once per commit, not once per write.
  recording_sender sender;
  changelog_buffer_budget budget{.bound = 1 << 20};
  changelog_logger logger{"q", 2, sender, changelog_batching::every_write_per_commit, &budget};
  logger.log("m", "1", 1);
  logger.log("e1", "x", 2);
  logger.log("m", "2", 3);
  logger.log("e1", std::nullopt, 4);
  EXPECT_TRUE(sender.sent.empty());
  EXPECT_EQ(logger.buffered(), 4u);
  EXPECT_EQ(logger.uncommitted(), 4);
  logger.send();
  EXPECT_EQ(
      sender.sent,
      (std::vector<sent_record>{
          {"q", 2, "m", "1", 1}, {"q", 2, "e1", "x", 2}, {"q", 2, "m", "2", 3}, {"q", 2, "e1", std::nullopt, 4}}));
  EXPECT_EQ(budget.used, 0);
  sender.sent.clear();
  logger.log("m", "3", 5);  // into an entry kept from the last commit
  logger.drop();
  logger.log("m", "4", 6);
  logger.send();
  EXPECT_EQ(sender.sent, (std::vector<sent_record>{{"q", 2, "m", "4", 6}}));
}

TEST(changelog_logger, every_write_per_commit_sends_early_past_the_task_bound_in_write_order) {
  recording_sender sender;
  changelog_buffer_budget budget{.bound = 10};
  changelog_logger logger{"q", 0, sender, changelog_batching::every_write_per_commit, &budget};
  logger.log("k", "1234", 0);  // 5 bytes
  logger.log("k", "1234", 1);  // 10: not past the bound
  EXPECT_TRUE(sender.sent.empty());
  logger.log("j", "1", 2);  // 12 > 10: all three go, in order
  EXPECT_EQ(sender.sent,
            (std::vector<sent_record>{{"q", 0, "k", "1234", 0}, {"q", 0, "k", "1234", 1}, {"q", 0, "j", "1", 2}}));
  EXPECT_EQ(budget.used, 0);
  EXPECT_EQ(logger.sent(), 3);
}

}  // namespace
}  // namespace sluice::runtime
