// The generic read path against the real broker: a ranked index (a store kind that is not a
// key-value store) read from C++ through app::queries() with HTTP off, and from a topology's
// HTTP endpoint through request::stores(), on committed state under exactly-once; a handle
// of the wrong kind answers a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "broker_env.hpp"
#include "http_client.hpp"
#include "scratch_dir.hpp"
#include "sluice/queue_store.hpp"
#include "sluice/ranked_index_store.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;

namespace {

constexpr int groups = 4;
constexpr int words = 2000;

/// Upserts each word into the ranked index of its group (the record key), scored by itself.
class ranking : public sluice::processor<std::string, std::string, std::string, std::string> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    ranks_.emplace(ctx.state_store<sluice::ranked_index_store>("word-ranks"));
  }
  void process(const sluice::record<std::string, std::string>& r) override { ranks_->upsert(r.key, r.value, r.value); }

 private:
  std::optional<sluice::ranked_index_store> ranks_;
};

sluice::streams_builder ranking_builder(const std::string& in) {
  sluice::streams_builder b;
  b.add_state_store(sluice::ranked_index_materialized("word-ranks"));
  b.stream<std::string, std::string>(in).process([] { return std::make_unique<ranking>(); }, "word-ranks");
  return b;
}

sluice::config ranking_config(const std::string& app_id) {
  sluice::config c;
  c.set("bootstrap.servers", sluice::test::broker_bootstrap());
  c.set("application.id", app_id);
  c.set("state.dir", sluice::test::scratch_path("sluice-state").string());
  c.set("commit.interval.ms", "200");
  c.set("poll.ms", "10");
  c.set("processing.guarantee", "exactly_once");
  return c;
}

/// Words w0000..w1999, word i in group g(i % 4).
void feed(const sluice::config& cfg, const std::string& topic) {
  sluice::topic_writer w(cfg);
  for (int i = 0; i < words; ++i) {
    char word[8];
    std::snprintf(word, sizeof word, "w%04d", i);
    w.send_raw(topic, "g" + std::to_string(i % groups), std::string(word));
  }
  w.flush();
}

std::uint64_t group_size(sluice::interactive_queries& q, const std::string& group) {
  auto p = q.partition_of("word-ranks", group);
  if (!p) return 0;
  std::uint64_t n = 0;
  if (q.run<sluice::ranked_index_store>("word-ranks", *p, [&](sluice::ranked_index_store& s) { n = s.count(group); }) !=
      sluice::query_outcome::done)
    return 0;
  return n;
}

/// Waits until every group's committed index holds all its words (the evidence that the
/// input was processed and committed).
void wait_until_ranked(sluice::interactive_queries& q) {
  auto deadline = std::chrono::steady_clock::now() + 90s;
  for (;;) {
    bool all = true;
    for (int g = 0; g < groups; ++g) all = all && group_size(q, "g" + std::to_string(g)) == words / groups;
    if (all) return;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the indexes never held every word";
    std::this_thread::sleep_for(100ms);
  }
}

}  // namespace

TEST(store_kind_queries, app_queries_read_a_ranked_index_from_cpp_with_http_off) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("sk-in");
  auto cfg = ranking_config(sluice::test::unique_name("sk"));
  sluice::topic_admin(cfg).create_topic(in, 4);
  feed(cfg, in);
  sluice::app app(ranking_builder(in).build(), cfg);
  auto& q = app.queries();
  EXPECT_EQ(q.run<sluice::ranked_index_store>("word-ranks", 0, [](sluice::ranked_index_store&) {}),
            sluice::query_outcome::unavailable)
      << "before start()";
  app.start();
  wait_until_ranked(q);
  // w0005 is the second word of g1 (w0001, w0005, ...); its neighbours are w0001 and w0009.
  const auto p = *q.partition_of("word-ranks", "g1");
  EXPECT_EQ(q.read<sluice::ranked_index_store>("word-ranks", p,
                                               [](sluice::ranked_index_store& s) { return s.position("g1", "w0005"); }),
            std::optional<std::uint64_t>(1));
  auto around = q.read<sluice::ranked_index_store>(
      "word-ranks", p, [](sluice::ranked_index_store& s) { return s.around("g1", "w0005", 1); });
  ASSERT_EQ(around.size(), 3u);
  EXPECT_EQ(around[0].member, "w0001");
  EXPECT_EQ(around[2].member, "w0009");
  // The other partitions run here too (one instance), but not a partition the job lacks.
  EXPECT_EQ(q.run<sluice::ranked_index_store>("word-ranks", 9, [](sluice::ranked_index_store&) {}),
            sluice::query_outcome::not_local);
  std::string failure;
  EXPECT_EQ(
      q.run<sluice::queue_store_handle>(
          "word-ranks", p, [](sluice::queue_store_handle&) {}, sluice::interactive_queries::default_timeout, &failure),
      sluice::query_outcome::wrong_kind);
  EXPECT_NE(failure.find("store 'word-ranks' is not a queue store"), std::string::npos) << failure;
  std::string refused;
  EXPECT_EQ(q.run<sluice::ranked_index_store>(
                "word-ranks", p, [](sluice::ranked_index_store& s) { s.remove("g1", "w0005"); },
                sluice::interactive_queries::default_timeout, &refused),
            sluice::query_outcome::failed);
  EXPECT_NE(refused.find("a store query may only read"), std::string::npos) << refused;
  EXPECT_EQ(group_size(q, "g1"), static_cast<std::uint64_t>(words / groups)) << "the refused write changed nothing";
  app.close();
  EXPECT_EQ(q.run<sluice::ranked_index_store>("word-ranks", p, [](sluice::ranked_index_store&) {}),
            sluice::query_outcome::unavailable)
      << "after close()";
}

TEST(store_kind_queries, an_endpoint_reads_a_ranked_index_through_its_handle_and_a_wrong_kind_answers_500) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("sk-in");
  const auto port = sluice::test::free_port();
  auto cfg = ranking_config(sluice::test::unique_name("sk"));
  cfg.set("application.server", "127.0.0.1:" + std::to_string(port));
  sluice::topic_admin(cfg).create_topic(in, 4);
  feed(cfg, in);
  auto b = ranking_builder(in);
  b.add_endpoint("/ranks/{group}/{word}", [](const sluice::http::request& req) {
    auto& stores = req.stores();
    const std::string group(req.path_param("group")), word(req.path_param("word"));
    auto p = stores.partition_of("word-ranks", group);
    if (!p) return sluice::http::store_access::refusal(sluice::query_outcome::unavailable, "word-ranks", -1);
    std::optional<std::uint64_t> position;
    std::uint64_t total = 0;
    std::string failure;
    auto outcome = stores.run<sluice::ranked_index_store>(
        "word-ranks", *p,
        [&](sluice::ranked_index_store& s) {
          position = s.position(group, word);
          total = s.count(group);
        },
        sluice::interactive_queries::default_timeout, &failure);
    if (outcome != sluice::query_outcome::done)
      return sluice::http::store_access::refusal(outcome, "word-ranks", *p, failure);
    if (!position) return sluice::http::response::error(sluice::http::status::not_found, "not ranked");
    return sluice::http::response::json(
        200, "{\"position\": " + std::to_string(*position) + ", \"total\": " + std::to_string(total) + "}");
  });
  b.add_endpoint("/as-queue/{group}", [](const sluice::http::request& req) {
    auto& stores = req.stores();
    auto p = stores.partition_of("word-ranks", req.path_param("group"));
    std::string failure;
    auto outcome = stores.run<sluice::queue_store_handle>(
        "word-ranks", *p, [](sluice::queue_store_handle&) {}, sluice::interactive_queries::default_timeout, &failure);
    return sluice::http::store_access::refusal(outcome, "word-ranks", *p, failure);
  });
  sluice::app app(b.build(), cfg);
  app.start();
  wait_until_ranked(app.queries());
  for (int i : {0, 5, 1234, 1999}) {
    char word[8];
    std::snprintf(word, sizeof word, "w%04d", i);
    auto r = sluice::test::http_get(port, "/ranks/g" + std::to_string(i % groups) + "/" + word);
    ASSERT_EQ(r.status, 200) << word << ": " << r.body;
    auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["position"], i / groups) << word;
    EXPECT_EQ(j["total"], words / groups);
  }
  EXPECT_EQ(sluice::test::http_get(port, "/ranks/g1/w0000").status, 404);
  auto wrong = sluice::test::http_get(port, "/as-queue/g1");
  EXPECT_EQ(wrong.status, 500);
  EXPECT_NE(wrong.body.find("store 'word-ranks' is not a queue store"), std::string::npos) << wrong.body;
  // The built-in key-value paths refuse another kind as the client's mistake, naming the way.
  for (const std::string path : {"/stores/word-ranks/keys/g1", "/stores/word-ranks/range"}) {
    auto kv = sluice::test::http_get(port, path);
    EXPECT_EQ(kv.status, 400) << path << ": " << kv.body;
    EXPECT_NE(kv.body.find("is not a key-value store"), std::string::npos) << path << ": " << kv.body;
  }
  // Where a key lives is answered for a store of any kind (Kafka Streams' queryMetadataForKey).
  auto where = sluice::test::http_get(port, "/metadata/stores/word-ranks/keys/g1");
  ASSERT_EQ(where.status, 200) << where.body;
  EXPECT_EQ(nlohmann::json::parse(where.body)["store"], "word-ranks") << where.body;
  EXPECT_TRUE(nlohmann::json::parse(where.body)["partition"].is_number_integer()) << where.body;
  app.close();
}
