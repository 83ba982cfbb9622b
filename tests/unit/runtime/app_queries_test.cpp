// app_queries, the app's interactive queries over the stream threads' query inboxes: a read
// of several partitions (run_bindings) queues every partition's query before it waits for
// any answer, so a stream thread answers them all in one serve. Under exactly-once a thread
// serves only between transactions: asked one after another, N partitions would wait N
// commit intervals.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <thread>

#include "runtime/app_queries.hpp"
#include "runtime/query_inbox.hpp"
#include "runtime/stream_task.hpp"
#include "sluice/builder.hpp"

using namespace std::chrono_literals;

namespace sluice::runtime {
namespace {

struct fixture {
  topology topo;
  std::unique_ptr<app_queries> queries;
  query_inbox inbox_a, inbox_b;  // two stream threads
  std::map<task_id, std::unique_ptr<stream_task>> no_tasks;

  fixture() {
    streams_builder b;
    b.stream<std::string, std::string>("in").group_by_key().count("counts").to_stream().to("out");
    topo = b.build();
    queries = std::make_unique<app_queries>(topo);
    queries->attach({&inbox_a, &inbox_b}, {{0, 3}});
  }

  /// Waits until `inbox` holds `n` queries; false if it does not within 10 s (a call that
  /// queues one partition at a time never gets there while nobody answers).
  static bool holds(const query_inbox& inbox, std::size_t n) {
    for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(1ms))
      if (inbox.queued() >= n) return true;
    return inbox.queued() >= n;
  }
};

TEST(app_queries, a_read_of_several_partitions_queues_all_of_them_before_any_answer) {
  fixture f;
  auto read = std::async(std::launch::async, [&] {
    return f.queries->run_bindings(
        "counts", {2, 0, 1}, [](std::int32_t, const auto&, auto&) {}, 30s);
  });
  ASSERT_TRUE(fixture::holds(f.inbox_a, 3)) << "only " << f.inbox_a.queued() << " of 3 partitions asked";
  ASSERT_TRUE(fixture::holds(f.inbox_b, 3));
  // One serve per thread answers every partition (neither thread runs a task: not here).
  f.inbox_a.serve(f.no_tasks);
  f.inbox_b.serve(f.no_tasks);
  ASSERT_EQ(read.wait_for(30s), std::future_status::ready);
  const auto answers = read.get();
  ASSERT_EQ(answers.size(), 3u);
  const std::int32_t asked[] = {2, 0, 1};
  for (std::size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].partition, asked[i]);
    EXPECT_EQ(answers[i].result, query_outcome::not_local);
  }
}

// The timeout bounds the whole read: with threads that never answer, every partition times
// out and the read returns.
TEST(app_queries, a_read_of_several_partitions_times_out_once_as_a_whole) {
  fixture f;
  const auto answers = f.queries->run_bindings(
      "counts", {0, 1, 2}, [](std::int32_t, const auto&, auto&) {}, 200ms);
  ASSERT_EQ(answers.size(), 3u);
  for (const auto& a : answers) EXPECT_EQ(a.result, query_outcome::timed_out);
  EXPECT_EQ(f.inbox_a.queued(), 3u);  // all asked; answers after the timeout are ignored
}

TEST(app_queries, a_read_of_an_unknown_store_answers_unknown_store_for_each_partition) {
  fixture f;
  const auto answers = f.queries->run_bindings(
      "nope", {0, 1}, [](std::int32_t, const auto&, auto&) {}, 1s);
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& a : answers) EXPECT_EQ(a.result, query_outcome::unknown_store);
  EXPECT_EQ(f.inbox_a.queued(), 0u);
}

}  // namespace
}  // namespace sluice::runtime
