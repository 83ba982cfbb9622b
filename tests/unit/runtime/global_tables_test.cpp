// The global-table thread of a running app, on the embedded mock cluster: a table record
// that does not decode is handled when the table's topic is read (naming the table topic,
// partition, offset and key), and a fatal error of the thread puts the app in its error
// state with the reason and sluice_global_table_failed = 1, instead of leaving it running on
// tables that stopped moving.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>

#include "error_of.hpp"
#include "eventually.hpp"
#include "sluice/app.hpp"
#include "sluice/builder.hpp"
#include "sluice/client.hpp"
#include "sluice/error.hpp"
#include "sluice/processor.hpp"

using namespace std::chrono_literals;

namespace {

struct item {
  BOOST_HANA_DEFINE_STRUCT(item, (std::string, name), (std::int64_t, qty));
};

/// An embedded-cluster job: orders left-joined with the global table `items_topic`.
struct global_job {
  std::string items_topic, orders_topic, out_topic;
  sluice::config cfg;
  std::filesystem::path state_dir;

  explicit global_job(const std::string& name) {
    static std::atomic<int> counter{0};
    const auto unique = name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    items_topic = unique + "-items";
    orders_topic = unique + "-orders";
    out_topic = unique + "-out";
    state_dir = std::filesystem::temp_directory_path() / ("sluice-global-" + unique);
    cfg.set("bootstrap.servers", "embedded").set("application.id", unique).set("state.dir", state_dir.string());
    sluice::topic_admin admin(cfg);
    admin.create_topic(items_topic, 1, sluice::cleanup_policy::compact);
    admin.create_topic(orders_topic, 1);
    admin.create_topic(out_topic, 1);
  }
  ~global_job() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);
  }

  sluice::topology topology() const {
    sluice::streams_builder b;
    auto items = b.global_table<std::string, item>(items_topic, "items");
    b.stream<std::string, std::string>(orders_topic)
        .left_join(
            items, [](const std::string&, const std::string& id) { return id; },
            [](const std::string& id, const std::optional<item>& i) {
              return id + ":" + (i ? std::to_string(i->qty) : std::string("none"));
            })
        .to(out_topic);
    return b.build();
  }

  void write_item(const std::string& key, std::string_view value_bytes) {
    sluice::topic_writer w(cfg);
    w.send_raw(items_topic, std::string_view(key), value_bytes);
    w.flush();
  }
};

}  // namespace

TEST(global_tables, record_that_does_not_decode_at_start_stops_the_start_naming_topic_partition_offset_and_key) {
  global_job job("global-start");
  job.write_item("i1", R"({"name":"bolt","qty":3})");
  job.write_item("i2", "{not json");  // offset 1
  sluice::app app(job.topology(), job.cfg);
  auto msg = sluice::test::error_of([&] { app.start(); }, sluice::errc::serialization);
  EXPECT_NE(msg.find("global table 'items' at " + job.items_topic + "[0]@1 with key 'i2'"), std::string::npos) << msg;
  app.close(30s);
}

TEST(global_tables, fatal_error_of_the_following_thread_puts_the_app_in_error_with_the_reason) {
  global_job job("global-follow");
  job.write_item("i1", R"({"name":"bolt","qty":3})");
  sluice::app app(job.topology(), job.cfg);
  app.start();
  ASSERT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::running; }))
      << sluice::to_string(app.state());
  EXPECT_EQ(app.metrics().total("sluice_global_table_failed"), 0);
  job.write_item("i2", "{not json");  // offset 1, read by the following thread under fail
  ASSERT_TRUE(sluice::test::eventually([&] { return app.state() == sluice::app_state::error; }))
      << sluice::to_string(app.state());
  const auto reason = app.error_message();
  EXPECT_NE(reason.find("the global table thread stopped"), std::string::npos) << reason;
  EXPECT_NE(reason.find(job.items_topic + "[0]@1 with key 'i2'"), std::string::npos) << reason;
  EXPECT_EQ(app.metrics().total("sluice_global_table_failed"), 1);
  app.close(30s);
}

TEST(global_tables, record_that_does_not_decode_under_log_and_continue_is_skipped_and_counted_when_read) {
  global_job job("global-skip");
  job.cfg.set("deserialization.error.handler", "log_and_continue");
  job.write_item("i1", R"({"name":"bolt","qty":3})");
  job.write_item("i1", "{not json");
  job.write_item("end", R"({"name":"marker","qty":0})");  // read after the bad one
  sluice::app app(job.topology(), job.cfg);
  app.start();  // catch-up reads all three before start() returns
  EXPECT_EQ(app.metrics().total("sluice_records_skipped_total"), 1);
  EXPECT_EQ(app.metrics().total("sluice_global_records_applied_total"), 2);
  // The scan's fetch wakes have their own series beside each stream thread's two.
  const auto text = app.metrics().prometheus_text();
  EXPECT_NE(text.find("sluice_fetch_wakes_total{consumer=\"global\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_fetch_wakes_total{thread=\"0\",consumer=\"group\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("sluice_fetch_wakes_total{thread=\"0\",consumer=\"restore\"}"), std::string::npos) << text;
  app.close(30s);
}

TEST(global_tables, record_that_does_not_decode_under_dead_letter_is_skipped_and_counted_and_not_dead_lettered) {
  global_job job("global-dead-letter");
  job.cfg.set("deserialization.error.handler", "dead_letter");
  job.write_item("i1", R"({"name":"bolt","qty":3})");
  job.write_item("i1", "{not json");
  job.write_item("end", R"({"name":"marker","qty":0})");  // read after the bad one
  sluice::app app(job.topology(), job.cfg);
  app.start();  // creates the dead-letter topic; catch-up reads all three before start() returns
  EXPECT_EQ(app.metrics().total("sluice_records_skipped_total"), 1);
  EXPECT_EQ(app.metrics().total("sluice_global_records_applied_total"), 2);
  EXPECT_EQ(app.metrics().total("sluice_records_dead_lettered_total"), 0);
  // The global tables' thread has no producer: the dead-letter topic, read to its end, is empty.
  sluice::topic_reader dead_letters(job.cfg, {job.cfg.dead_letter_topic()});
  EXPECT_TRUE(dead_letters.read_to_end(30s).empty());
  app.close(30s);
}

namespace {

/// Blocks in process() until the test releases it: a stream thread provably still busy.
std::promise<void>* entered = nullptr;
std::shared_future<void>* release = nullptr;

class blocking : public sluice::processor<std::string, std::string> {
 public:
  void process(const sluice::record<std::string, std::string>&) override {
    if (entered) std::exchange(entered, nullptr)->set_value();
    release->wait();
  }
};

}  // namespace

// app::close(timeout) waits for its threads with stream_thread::join_until; a thread still
// inside a record when the timeout passes is left to finish, and close returns.
TEST(app_close, close_returns_at_its_timeout_while_a_thread_is_busy_and_the_app_stays_pending_shutdown) {
  global_job job("close-timeout");
  sluice::streams_builder b;
  b.stream<std::string, std::string>(job.orders_topic).process([] { return std::make_unique<blocking>(); });
  std::promise<void> in_process, go;
  std::shared_future<void> go_future = go.get_future().share();
  entered = &in_process;
  release = &go_future;
  {
    sluice::app app(b.build(), job.cfg);
    app.start();
    sluice::topic_writer w(job.cfg);
    w.send_raw(job.orders_topic, std::string_view("k"), std::string_view("v"));
    w.flush();
    in_process.get_future().wait();  // the thread is inside process() until go is set
    app.close(10ms);
    EXPECT_EQ(app.state(), sluice::app_state::pending_shutdown);
    go.set_value();
  }  // the destructor waits for the thread that was released
  release = nullptr;
}
