// Interactive queries of a running word count's store over HTTP against the real broker:
// keys, ranges and prefixes decoded with the store's serdes, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "broker_env.hpp"
#include "http_client.hpp"
#include "kafka/producer.hpp"
#include "own_key_processors.hpp"
#include "scratch_dir.hpp"
#include "sluice/sluice.hpp"
#include "word_count/topology.hpp"

using namespace std::chrono_literals;

namespace {

sluice::config query_config(const std::string& app_id, std::uint16_t port) {
  sluice::config c;
  c.set("bootstrap.servers", sluice::test::broker_bootstrap());
  c.set("application.id", app_id);
  c.set("state.dir", sluice::test::scratch_path("sluice-state").string());
  c.set("commit.interval.ms", "200");
  c.set("poll.ms", "10");  // a query waits for the thread's next loop: keep the 1,000-key samples quick
  c.set("application.server", "127.0.0.1:" + std::to_string(port));
  return c;
}

/// Two instances of app `app_id`, "a" and "b", each with its own HTTP port.
struct instance_pair {
  std::uint16_t port_a = sluice::test::free_port(), port_b = sluice::test::free_port();
  sluice::config cfg_a, cfg_b;
  explicit instance_pair(const std::string& app_id)
      : cfg_a(query_config(app_id, port_a)), cfg_b(query_config(app_id, port_b)) {
    cfg_a.set("instance.id", "a");
    cfg_b.set("instance.id", "b");
  }
};

/// 2,000 distinct words w0000..w1999, word i counted i % 7 + 1 times.
std::map<std::string, std::int64_t> feed_words(const sluice::config& cfg, const std::string& topic) {
  std::map<std::string, std::int64_t> expected;
  sluice::topic_writer w(cfg);
  for (int i = 0; i < 2000; ++i) {
    char word[8];
    std::snprintf(word, sizeof word, "w%04d", i);
    for (int n = 0; n <= i % 7; ++n) {
      w.send_raw(topic, std::nullopt, std::string(word));
      ++expected[word];
    }
  }
  w.flush();
  return expected;
}

void wait_for_counts(const sluice::config& cfg, const std::string& topic,
                     const std::map<std::string, std::int64_t>& expected) {
  sluice::topic_reader r(cfg, {topic});
  std::map<std::string, std::int64_t> counts;
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < deadline && counts != expected)
    for (auto& m : r.poll(300ms)) counts[*m.key] = std::max(counts[*m.key], sluice::int64_serde::deserialize(*m.value));
  ASSERT_EQ(counts, expected);
}

/// Until both instances run and the group, as `port` describes it, is stable with both.
void wait_until_both_run(std::uint16_t port, const sluice::app& a, const sluice::app& b) {
  for (int i = 0; i < 600; ++i) {
    auto m = sluice::test::http_get(port, "/metadata");
    auto j = nlohmann::json::parse(m.body, nullptr, false);
    if (a.state() == sluice::app_state::running && b.state() == sluice::app_state::running && m.status == 200 &&
        j["group_state"] == "Stable" && j["instances"].size() == 2)
      return;
    std::this_thread::sleep_for(100ms);
  }
}

}  // namespace

TEST(http_queries, keys_ranges_and_prefixes_of_a_word_count_store_answer_with_the_committed_counts) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("q-in"), out = sluice::test::unique_name("q-out");
  const auto port = sluice::test::free_port();
  auto cfg = query_config(sluice::test::unique_name("q"), port);
  cfg.set("processing.guarantee", "exactly_once");
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 4);
  admin.create_topic(out, 4);
  auto expected = feed_words(cfg, in);
  sluice::app app(examples::word_count_topology(in, out), cfg);
  app.start();
  wait_for_counts(cfg, out, expected);

  // A sample of 1,000 keys, each answered with its count.
  std::mt19937 rng(1);
  std::vector<std::string> words;
  for (auto& [w, n] : expected) words.push_back(w);
  std::shuffle(words.begin(), words.end(), rng);
  words.resize(1000);
  for (const auto& w : words) {
    auto r = sluice::test::http_get(port, "/stores/word-counts/keys/" + w);
    ASSERT_EQ(r.status, 200) << w << ": " << r.body;
    auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["key"], w);
    EXPECT_EQ(j["value"], expected[w]) << w;
    EXPECT_EQ(r.header("X-Sluice-Served-By"), "127.0.0.1:" + std::to_string(port));
  }

  auto range = sluice::test::http_get(port, "/stores/word-counts/range?from=w0100&to=w0149&limit=1000");
  ASSERT_EQ(range.status, 200) << range.body;
  auto rj = nlohmann::json::parse(range.body);
  ASSERT_EQ(rj["entries"].size(), 50u) << range.body;
  for (std::size_t i = 0; i < 50; ++i) {
    char word[8];
    std::snprintf(word, sizeof word, "w%04zu", 100 + i);
    EXPECT_EQ(rj["entries"][i]["key"], word);
    EXPECT_EQ(rj["entries"][i]["value"], expected[word]);
  }
  EXPECT_TRUE(rj["partitions_not_local"].empty());

  auto prefix = sluice::test::http_get(port, "/stores/word-counts/prefix/w19?limit=1000");
  ASSERT_EQ(prefix.status, 200) << prefix.body;
  auto pj = nlohmann::json::parse(prefix.body);
  ASSERT_EQ(pj["entries"].size(), 100u);
  EXPECT_EQ(pj["entries"][0]["key"], "w1900");
  EXPECT_EQ(pj["entries"][99]["key"], "w1999");
  EXPECT_EQ(pj["entries"][99]["value"], expected["w1999"]);

  auto limited = nlohmann::json::parse(sluice::test::http_get(port, "/stores/word-counts/range").body);
  EXPECT_EQ(limited["entries"].size(), 100u) << "the default limit";
  EXPECT_EQ(limited["entries"][0]["key"], "w0000");

  auto too_many = sluice::test::http_get(port, "/stores/word-counts/range?limit=5000");
  EXPECT_EQ(too_many.status, 400);
  EXPECT_NE(too_many.body.find("above the maximum 1000"), std::string::npos) << too_many.body;
  EXPECT_EQ(sluice::test::http_get(port, "/stores/word-counts/range?limit=ten").status, 400);
  EXPECT_EQ(sluice::test::http_get(port, "/stores/word-counts/range?from=a").status, 400);
  EXPECT_EQ(sluice::test::http_get(port, "/stores/word-counts/keys/no-such-word").status, 404);
  auto unknown = sluice::test::http_get(port, "/stores/no-such-store/keys/w0001");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("no key-value store 'no-such-store'"), std::string::npos) << unknown.body;
  app.close();
}

TEST(http_queries, every_instance_answers_keys_ranges_and_prefixes_of_a_global_table_itself_and_follows_it) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("q-in"), out = sluice::test::unique_name("q-out");
  auto rates = sluice::test::unique_name("q-rates");
  const auto app_id = sluice::test::unique_name("q");
  const std::uint16_t ports[] = {sluice::test::free_port(), sluice::test::free_port()};
  auto cfg = query_config(app_id, ports[0]);
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 2);
  admin.create_topic(out, 2);
  admin.create_topic(rates, 3);
  const auto customer = [](int i) {
    char key[8];
    std::snprintf(key, sizeof key, "c%03d", i);
    return std::string(key);
  };
  {
    sluice::topic_writer w(cfg);
    for (int i = 0; i < 300; ++i) w.send(rates, customer(i), std::int64_t{i * 10});
    w.send_raw(rates, std::string_view("c007"), std::nullopt);  // a tombstone: c007 is gone
    w.flush();
  }
  auto topology = [&] {
    sluice::streams_builder b;
    b.global_table<std::string, std::int64_t>(rates, "rates");
    b.stream<std::string, std::string>(in).to(out);
    return b.build();
  };
  std::vector<std::unique_ptr<sluice::app>> apps;
  for (auto port : ports) {
    apps.push_back(std::make_unique<sluice::app>(topology(), query_config(app_id, port)));
    apps.back()->start();  // returns once the global table has caught up
  }
  for (auto port : ports) {
    const auto self = "127.0.0.1:" + std::to_string(port);
    for (int i = 0; i < 300; ++i) {
      auto r = sluice::test::http_get(port, "/stores/rates/keys/" + customer(i));
      EXPECT_EQ(r.header("X-Sluice-Served-By"), self) << "never forwarded: every instance holds the table";
      if (i == 7) {
        EXPECT_EQ(r.status, 404) << r.body;
        continue;
      }
      ASSERT_EQ(r.status, 200) << customer(i) << ": " << r.body;
      auto j = nlohmann::json::parse(r.body);
      EXPECT_EQ(j["key"], customer(i));
      EXPECT_EQ(j["value"], i * 10);
      EXPECT_GE(j["partition"].get<int>(), 0);
      EXPECT_LT(j["partition"].get<int>(), 3);
    }
    auto range = sluice::test::http_get(port, "/stores/rates/range?from=c005&to=c014&limit=1000");
    ASSERT_EQ(range.status, 200) << range.body;
    auto rj = nlohmann::json::parse(range.body);
    ASSERT_EQ(rj["entries"].size(), 9u) << "c005..c014 without the deleted c007: " << range.body;
    EXPECT_EQ(rj["entries"][0]["key"], "c005");
    EXPECT_EQ(rj["entries"][2]["key"], "c008");
    EXPECT_EQ(rj["entries"][8]["key"], "c014");
    EXPECT_EQ(rj["entries"][8]["value"], 140);
    EXPECT_TRUE(rj["partitions_not_local"].empty());
    auto prefix = nlohmann::json::parse(sluice::test::http_get(port, "/stores/rates/prefix/c29?limit=5").body);
    ASSERT_EQ(prefix["entries"].size(), 5u);
    EXPECT_EQ(prefix["entries"][0]["key"], "c290");
    EXPECT_EQ(prefix["entries"][4]["value"], 2940);
    auto all = nlohmann::json::parse(sluice::test::http_get(port, "/stores/rates/range?limit=1000").body);
    EXPECT_EQ(all["entries"].size(), 299u);
    auto meta = nlohmann::json::parse(sluice::test::http_get(port, "/metadata/stores/rates/keys/c001").body);
    EXPECT_EQ(meta["instance"], self);
    EXPECT_EQ(meta["global"], true);
    EXPECT_EQ(meta["partition"],
              nlohmann::json::parse(sluice::test::http_get(port, "/stores/rates/keys/c001").body)["partition"]);
  }
  // The table follows its topic: a new value and a new key are answered once read.
  {
    sluice::topic_writer w(cfg);
    w.send(rates, std::string("c001"), std::int64_t{-5});
    w.send(rates, std::string("c999"), std::int64_t{42});
    w.flush();
  }
  for (auto port : ports) {
    sluice::test::http_reply r;
    for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(50ms)) {
      r = sluice::test::http_get(port, "/stores/rates/keys/c999");
      if (r.status == 200) break;
    }
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(nlohmann::json::parse(r.body)["value"], 42);
    // c001 was written before c999 to the same topic; c999 may live on another partition, so
    // poll c001 too until the update shows.
    nlohmann::json c001;
    for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;
         std::this_thread::sleep_for(50ms)) {
      c001 = nlohmann::json::parse(sluice::test::http_get(port, "/stores/rates/keys/c001").body);
      if (c001["value"] == -5) break;
    }
    EXPECT_EQ(c001["value"], -5);
  }
  for (auto& a : apps) a->close();
}

TEST(http_queries, a_topology_endpoint_reads_a_store_through_the_extension_api) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("q-in"), out = sluice::test::unique_name("q-out");
  const auto port = sluice::test::free_port();
  auto cfg = query_config(sluice::test::unique_name("q"), port);
  sluice::topic_admin admin(cfg);
  admin.create_topic(in, 2);
  admin.create_topic(out, 2);
  auto expected = feed_words(cfg, in);

  sluice::streams_builder b;
  b.stream<std::optional<std::string>, std::string>(in)
      .group_by([](const std::optional<std::string>&, const std::string& w) { return w; })
      .count("word-counts")
      .to_stream()
      .to(out);
  // Sums the counts of the words given in ?words=a,b,c: one read per word, on its partition.
  b.add_endpoint("/word-totals", [](const sluice::http::request& req) {
    auto& stores = req.stores();
    std::int64_t total = 0;
    std::string list(req.query("words").value_or(""));
    for (std::size_t start = 0; start < list.size();) {
      auto comma = list.find(',', start);
      std::string word = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? list.size() : comma + 1;
      auto p = stores.partition_of("word-counts", word);
      if (!p)
        return sluice::http::store_access::refusal(sluice::http::store_access::outcome::unavailable, "word-counts", -1);
      std::optional<std::string> v;
      auto outcome = stores.run("word-counts", *p, [&](sluice::state::kv_store& s) { v = s.get(word); });
      if (outcome != sluice::http::store_access::outcome::done)
        return sluice::http::store_access::refusal(outcome, "word-counts", *p);
      // A count's store keeps each count behind its 8-byte timestamp (sluice/http.hpp).
      if (v) total += sluice::int64_serde::deserialize(std::string_view(*v).substr(8));
    }
    return sluice::http::response::json(200, "{\"total\": " + std::to_string(total) + "}");
  });
  sluice::app app(b.build(), cfg);
  app.start();
  wait_for_counts(cfg, out, expected);
  auto r = sluice::test::http_get(port, "/word-totals?words=w0001,w0013,w1999,missing");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "{\"total\": " + std::to_string(expected["w0001"] + expected["w0013"] + expected["w1999"]) + "}");
  app.close();
}

TEST(http_queries, either_instance_finds_a_processor_store_key_in_whichever_partition_and_instance_holds_it) {
  SLUICE_REQUIRE_BROKER();
  const auto in = sluice::test::unique_name("seen-in"), app_id = sluice::test::unique_name("seen");
  instance_pair pair(app_id);
  auto& [port_a, port_b, cfg_a, cfg_b] = pair;
  sluice::topic_admin(cfg_a).create_topic(in, 4);
  sluice::app a(sluice::test::keeping_under_own_keys(in), cfg_a), b(sluice::test::keeping_under_own_keys(in), cfg_b);
  a.start();
  b.start();
  wait_until_both_run(port_a, a, b);
  sluice::topic_writer writer(cfg_a);
  constexpr int users = 40;
  for (int i = 0; i < users; ++i)
    writer.send<std::string, std::string>(in, "u" + std::to_string(i), "v" + std::to_string(i));
  writer.flush();
  std::set<std::string> served_by;
  for (int i = 0; i < users; ++i)
    for (auto port : {port_a, port_b}) {
      const std::string key = "seen:u" + std::to_string(i);
      sluice::test::http_reply r;
      for (int attempt = 0;
           attempt < 300 && (r = sluice::test::http_get(port, "/stores/seen/keys/" + key)).status != 200; ++attempt)
        std::this_thread::sleep_for(100ms);  // until the record is processed and committed
      ASSERT_EQ(r.status, 200) << key << " from " << port << ": " << r.body;
      EXPECT_EQ(nlohmann::json::parse(r.body)["value"], "v" + std::to_string(i)) << key;
      served_by.insert(r.header("X-Sluice-Served-By"));
    }
  EXPECT_EQ(served_by.size(), 2u) << "keys held by both instances were asked from both";
  for (auto port : {port_a, port_b}) {
    auto missing = sluice::test::http_get(port, "/stores/seen/keys/seen:nobody");
    EXPECT_EQ(missing.status, 404) << "every partition, here and on the other instance, was asked: " << missing.body;
  }
  a.close();
  b.close();
}

TEST(http_queries, either_instance_answers_the_windows_of_every_key_of_a_windowed_count_and_a_processor_window_store) {
  SLUICE_REQUIRE_BROKER();
  const auto in = sluice::test::unique_name("clicks-in"), app_id = sluice::test::unique_name("clicks");
  instance_pair pair(app_id);
  auto& [port_a, port_b, cfg_a, cfg_b] = pair;
  sluice::topic_admin(cfg_a).create_topic(in, 4);
  auto topology = [&] {
    sluice::streams_builder b;
    auto clicks = b.stream<std::string, std::string>(in);
    clicks.group_by_key().windowed_by(sluice::time_windows::of_size_and_grace(1min, 1h)).count("clicks-per-minute");
    clicks.process([] { return std::make_unique<sluice::test::windows_under_its_own_key>(); },
                   sluice::window_store_materialized("seen-windows", {.retention = 24h}));
    return b.build();
  };
  sluice::app a(topology(), cfg_a), b(topology(), cfg_b);
  a.start();
  b.start();
  wait_until_both_run(port_a, a, b);
  // Recent times (the broker deletes records older than its retention), on a minute.
  const std::int64_t minute =
      std::chrono::duration_cast<std::chrono::minutes>(std::chrono::system_clock::now().time_since_epoch() - 10min)
          .count() *
      60'000;
  sluice::topic_writer writer(cfg_a);
  constexpr int users = 20;
  for (int i = 0; i < users; ++i)
    for (std::int64_t at : {1'000, 5'000, 65'000})
      writer.send<std::string, std::string>(in, "u" + std::to_string(i), "v" + std::to_string(at), minute + at);
  writer.flush();
  const auto windows = [](const std::string& body) { return nlohmann::json::parse(body)["windows"]; };
  const nlohmann::json counts = {{{"start", minute}, {"end", minute + 60'000}, {"value", 2}},
                                 {{"start", minute + 60'000}, {"end", minute + 120'000}, {"value", 1}}};
  const nlohmann::json seen = {{{"start", minute}, {"end", nullptr}, {"value", "v5000"}},
                               {{"start", minute + 60'000}, {"end", nullptr}, {"value", "v65000"}}};
  std::set<std::string> served_by;
  for (int i = 0; i < users; ++i)
    for (auto port : {port_a, port_b})
      for (const auto& [path, expected] : {std::pair{"/stores/clicks-per-minute/keys/u" + std::to_string(i), &counts},
                                           std::pair{"/stores/seen-windows/keys/seen:u" + std::to_string(i), &seen}}) {
        sluice::test::http_reply r;
        for (int attempt = 0; attempt < 300; ++attempt) {  // until the records are processed and committed
          r = sluice::test::http_get(port, path + "/windows");
          if (r.status == 200 && windows(r.body) == *expected) break;
          std::this_thread::sleep_for(100ms);
        }
        ASSERT_EQ(r.status, 200) << path << " from " << port << ": " << r.body;
        EXPECT_EQ(windows(r.body), *expected) << path << " from " << port;
        served_by.insert(r.header("X-Sluice-Served-By"));
      }
  EXPECT_EQ(served_by.size(), 2u) << "keys held by both instances were asked from both";

  // Every key's windows (fetchAll) from either instance: its own partitions and the other's,
  // in key order then start, whole or page by page.
  std::vector<std::string> keys;
  for (int i = 0; i < users; ++i) keys.push_back("u" + std::to_string(i));
  std::sort(keys.begin(), keys.end());
  for (const auto& [store, prefix, per_key] :
       {std::tuple{"clicks-per-minute", "", &counts}, std::tuple{"seen-windows", "seen:", &seen}}) {
    nlohmann::json every_window = nlohmann::json::array();
    for (const auto& user : keys)
      for (auto w : *per_key) {
        w["key"] = prefix + user;
        w["partition"] = sluice::kafka::murmur2_partition(user, 4);
        every_window.push_back(std::move(w));
      }
    for (auto port : {port_a, port_b}) {
      const std::string path = std::string("/stores/") + store + "/windows";
      auto r = sluice::test::http_get(port, path + "?limit=1000");
      ASSERT_EQ(r.status, 200) << path << " from " << port << ": " << r.body;
      auto j = nlohmann::json::parse(r.body);
      const auto got = j["windows"];
      EXPECT_EQ(got, every_window) << path << " from " << port;
      EXPECT_EQ(j["more"], false);
      EXPECT_FALSE(j["partitions_not_local"].empty()) << "the other instance's partitions were gathered: " << r.body;
      nlohmann::json paged = nlohmann::json::array();
      std::string next = path + "?limit=7";
      for (int page = 0; page < 20; ++page) {
        r = sluice::test::http_get(port, next);
        ASSERT_EQ(r.status, 200) << next << " from " << port << ": " << r.body;
        j = nlohmann::json::parse(r.body);
        for (const auto& w : j["windows"]) paged.push_back(w);
        if (!j["more"].get<bool>()) break;
        const auto& last = j["windows"].back();
        next = path + "?limit=7&key_from=" + last["key"].get<std::string>() +
               "&after_start=" + std::to_string(last["start"].get<std::int64_t>());
      }
      EXPECT_EQ(paged, got) << path << " from " << port << ": pages of 7 give every window once, in order";
    }
  }

  for (auto port : {port_a, port_b}) {
    auto missing = sluice::test::http_get(port, "/stores/seen-windows/keys/seen:nobody/windows");
    ASSERT_EQ(missing.status, 200) << missing.body;
    EXPECT_EQ(nlohmann::json::parse(missing.body)["partition"], nullptr) << "asked everywhere: " << missing.body;
  }
  a.close();
  b.close();
}

TEST(http_queries, two_instances_answer_every_key_from_either_and_one_answers_all_after_the_other_stops) {
  SLUICE_REQUIRE_BROKER();
  auto in = sluice::test::unique_name("q-in"), out = sluice::test::unique_name("q-out");
  instance_pair pair(sluice::test::unique_name("q"));
  auto& [port_a, port_b, cfg_a, cfg_b] = pair;
  for (auto* c : {&cfg_a, &cfg_b}) c->set("consumer.session.timeout.ms", "6000");  // B takes over soon after A stops
  sluice::topic_admin admin(cfg_a);
  admin.create_topic(in, 4);
  admin.create_topic(out, 4);
  auto expected = feed_words(cfg_a, in);
  auto a = std::make_unique<sluice::app>(examples::word_count_topology(in, out), cfg_a);
  sluice::app b(examples::word_count_topology(in, out), cfg_b);
  a->start();
  b.start();
  wait_for_counts(cfg_a, out, expected);
  wait_until_both_run(port_a, *a, b);  // and the partitions split between them
  auto meta = nlohmann::json::parse(sluice::test::http_get(port_a, "/metadata").body);
  ASSERT_EQ(meta["instances"].size(), 2u) << meta.dump();
  std::set<std::int32_t> store_partitions;
  for (auto& inst : meta["instances"]) {
    ASSERT_TRUE(inst["stores"].contains("word-counts")) << meta.dump();
    for (auto& p : inst["stores"]["word-counts"]) EXPECT_TRUE(store_partitions.insert(p.get<std::int32_t>()).second);
  }
  EXPECT_EQ(store_partitions, (std::set<std::int32_t>{0, 1, 2, 3})) << meta.dump();

  std::mt19937 rng(2);
  std::vector<std::string> words;
  for (auto& [w, n] : expected) words.push_back(w);
  std::shuffle(words.begin(), words.end(), rng);
  words.resize(1000);
  std::set<std::string> served_by;
  for (const auto& w : words)
    for (auto port : {port_a, port_b}) {
      auto r = sluice::test::http_get(port, "/stores/word-counts/keys/" + w);
      ASSERT_EQ(r.status, 200) << w << " from " << port << ": " << r.body;
      EXPECT_EQ(nlohmann::json::parse(r.body)["value"], expected[w]) << w;
      served_by.insert(r.header("X-Sluice-Served-By"));
      auto owner = nlohmann::json::parse(sluice::test::http_get(port, "/metadata/stores/word-counts/keys/" + w).body);
      EXPECT_EQ(owner["instance"], r.header("X-Sluice-Served-By")) << owner.dump();
    }
  EXPECT_EQ(served_by.size(), 2u) << "keys of both instances were asked, locally and forwarded";
  for (auto port : {port_a, port_b}) {
    auto range = nlohmann::json::parse(
        sluice::test::http_get(port, "/stores/word-counts/range?from=w0500&to=w0999&limit=1000").body);
    ASSERT_EQ(range["entries"].size(), 500u) << range.dump().substr(0, 500);
    EXPECT_EQ(range["entries"][0]["key"], "w0500");
    EXPECT_EQ(range["entries"][499]["key"], "w0999");
    EXPECT_EQ(range["entries"][499]["value"], expected["w0999"]);
    auto prefix = nlohmann::json::parse(sluice::test::http_get(port, "/stores/word-counts/prefix/w07?limit=1000").body);
    EXPECT_EQ(prefix["entries"].size(), 100u);
  }

  // A stops; once B has taken over and restored, B answers every key itself.
  a->close();
  a.reset();
  std::size_t answered = 0;
  for (const auto& w : words) {
    for (int attempt = 0; attempt < 600; ++attempt) {
      auto r = sluice::test::http_get(port_b, "/stores/word-counts/keys/" + w);
      if (r.status == 200) {
        EXPECT_EQ(nlohmann::json::parse(r.body)["value"], expected[w]) << w;
        EXPECT_EQ(r.header("X-Sluice-Served-By"), "127.0.0.1:" + std::to_string(port_b));
        ++answered;
        break;
      }
      EXPECT_TRUE(r.status == 503 || r.status == 502 || r.status == 504) << r.status << " " << r.body;
      if (r.status == 503) {
        EXPECT_FALSE(r.header("Retry-After").empty()) << r.body;
      }
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_EQ(answered, words.size());
  b.close();
}
