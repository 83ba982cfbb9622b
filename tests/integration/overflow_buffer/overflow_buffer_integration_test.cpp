// The sluice-overflow-buffer job against a real broker: 200,000 records over 1,000
// customers with mixed rates (a rates table plus the default), bursts, scheduled and
// expiring records and a few malformed ones. Checked from the committed topics alone:
// every record is in exactly one of output, expired topic, dead-letter topic; per customer
// the unscheduled records come out in input order; no scheduled record comes out before
// its deliver_at_ms; and the token-bucket bound holds on every customer's output
// timestamps (tests/support/token_bucket_bound.hpp). Once with a clean run, once across
// SIGKILL restarts under exactly-once.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "job_fixture.hpp"
#include "job_process.hpp"
#include "token_bucket_bound.hpp"
#include "test_seed.hpp"
#include "sluice/sluice.hpp"

using namespace std::chrono_literals;
using sluice::test::job_process;

namespace {

using steady = std::chrono::steady_clock;

constexpr int customers = 1000;
constexpr double default_rate = 100;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string customer_name(int c) { return "cust-" + std::to_string(c); }

struct input_record {
  int id;
  int customer;
  std::int64_t deliver_at = 0;  // 0: not scheduled
  std::int64_t ttl_ms = 0;      // 0: none given
  bool malformed = false;
};

struct observed {
  int emitted = 0;
  int expired = 0;
  int dead = 0;
  std::int64_t emitted_at = 0;
};

class overflow_buffer_integration : public sluice::test::job_fixture {
 protected:
  void SetUp() override {
    job_fixture::SetUp();  // the work directory and cfg_'s bootstrap.servers
    if (work_.empty()) return;
    sluice::test::seed_test_rng(rng_, work_);
    app_id_ = sluice::test::unique_name("ovf-it");
    input_ = sluice::test::unique_name("ovf-in");
    output_ = sluice::test::unique_name("ovf-out");
    expired_ = sluice::test::unique_name("ovf-expired");
    rates_ = sluice::test::unique_name("ovf-rates");
    dlq_ = app_id_ + "-dlq";
    sluice::topic_admin admin(cfg_);
    admin.create_topic(input_, 4);
    admin.create_topic(output_, 4);
    admin.create_topic(expired_, 4);
    admin.create_topic(rates_, 1, sluice::cleanup_policy::compact);
    admin.create_topic(dlq_, 1);
    writer_ = std::make_unique<sluice::topic_writer>(cfg_);
    write_rates();
    generate(200'000);
  }

  /// A fifth of the customers (all 50 hot ones among them) use the default rate; the
  /// others 20 .. 400 per second.
  void write_rates() {
    const double rates[] = {20, 50, 100, 200, 400};
    std::uniform_int_distribution<int> pick(0, 4);
    for (int c = 0; c < customers; ++c) {
      double r = default_rate;
      if (c % 5 != 0) {
        r = rates[pick(rng_)];
        writer_->send_raw(rates_, customer_name(c), nlohmann::json{{"rate_per_second", r}}.dump());
      }
      rate_[c] = r;
    }
    writer_->flush();
  }

  /// Half of the records on 50 hot customers (they buffer), the rest spread; 3 % scheduled
  /// 1 .. 8 s ahead, 2 % with a 1 ms TTL (they expire), 0.1 % malformed.
  void generate(int n) {
    std::uniform_int_distribution<int> any(0, customers - 1), hot(0, 49), pct(0, 999), ahead(1000, 8000);
    for (int i = 0; i < n; ++i) {
      input_record r{i, pct(rng_) < 500 ? hot(rng_) * 20 : any(rng_)};
      const int p = pct(rng_);
      if (p < 30)
        r.deliver_at = 1;  // filled in when fed (relative to the wall clock then)
      else if (p < 50)
        r.ttl_ms = 1;
      else if (p < 51)
        r.malformed = true;
      records_.push_back(r);
    }
  }

  void feed(std::size_t n) {
    auto end = std::min(records_.size(), fed_ + n);
    const std::int64_t now = now_ms();
    std::uniform_int_distribution<int> ahead(1000, 8000);
    for (; fed_ < end; ++fed_) {
      auto& r = records_[fed_];
      nlohmann::json v = {{"id", r.id}, {"body", "hello"}};
      if (r.deliver_at != 0) {
        r.deliver_at = now + ahead(rng_);
        v["deliver_at_ms"] = r.deliver_at;
      }
      if (r.ttl_ms != 0) v["ttl_ms"] = r.ttl_ms;
      if (r.malformed) v["ttl_ms"] = "soon";
      // Input timestamps a little in the past, so the 1 ms TTLs have surely run out.
      writer_->send_raw(input_, customer_name(r.customer), v.dump(), now - 10);
    }
    writer_->flush();
  }

  job_process& start_job(const std::string& guarantee) {
    return job_fixture::start_job(SLUICE_OVERFLOW_BUFFER_BIN, {{"application.id", app_id_},
                                                               {"input.topic", input_},
                                                               {"output.topic", output_},
                                                               {"expired.topic", expired_},
                                                               {"rates.topic", rates_},
                                                               {"overflow.default.rate.per.second", "100"},
                                                               {"overflow.drain.interval.ms", "50"},
                                                               {"processing.guarantee", guarantee},
                                                               {"commit.interval.ms", "100"},
                                                               {"consumer.session.timeout.ms", "6000"},
                                                               {"instance.id", "a"}});
  }

  std::size_t collect(const std::vector<sluice::raw_message>& batch) {
    for (const auto& m : batch) {
      auto j = nlohmann::json::parse(m.value.value_or(""), nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("id")) {
        ADD_FAILURE() << "unexpected value in " << m.topic << ": " << m.value.value_or("<null>");
        continue;
      }
      const int id = j["id"].get<int>();
      auto& o = seen_[id];
      if (m.topic == output_) {
        ++o.emitted;
        o.emitted_at = m.timestamp;
        emissions_[m.key.value_or("")].push_back({m.timestamp, id});
      } else if (m.topic == expired_) {
        ++o.expired;
        const auto* h = m.headers.last("sluice-overflow-expired");
        auto hj = nlohmann::json::parse(h != nullptr ? h->value_or("") : "", nullptr, false);
        if (!hj.is_object() || hj.value("customer", "") != m.key.value_or(""))
          ADD_FAILURE() << "record " << id << ": bad sluice-overflow-expired header";
      } else {
        ++o.dead;
      }
    }
    return batch.size();
  }

  bool wait_for_all(sluice::topic_reader& reader, std::size_t& count, job_process& job, std::chrono::seconds timeout) {
    auto deadline = steady::now() + timeout;
    while (count < records_.size()) {
      if (steady::now() > deadline) {
        ADD_FAILURE() << "after " << timeout.count() << " s only " << count << " of " << records_.size()
                      << " records accounted for";
        return false;
      }
      if (!job.running()) {
        ADD_FAILURE() << job.log() << ": the job " << sluice::test::describe_exit(job.wait_exit(0ms));
        return false;
      }
      count += collect(reader.poll(200ms));
    }
    return true;
  }

  /// Reads everything committed again from the start and checks the contract.
  void expect_contract() {
    seen_.clear();
    emissions_.clear();
    sluice::topic_reader reader(cfg_, {output_, expired_, dlq_}, sluice::isolation::read_committed);
    collect(reader.read_to_end(120s));
    int missing = 0, duplicated = 0, early = 0, misplaced = 0;
    std::size_t emitted = 0, expired = 0, dead = 0;
    for (const auto& r : records_) {
      auto it = seen_.find(r.id);
      if (it == seen_.end()) {
        if (++missing <= 5) ADD_FAILURE() << "record " << r.id << " is in none of the outputs";
        continue;
      }
      const auto& o = it->second;
      if (o.emitted + o.expired + o.dead != 1) {
        if (++duplicated <= 5)
          ADD_FAILURE() << "record " << r.id << ": " << o.emitted << " emitted, " << o.expired << " expired, " << o.dead
                        << " dead-lettered copies";
        continue;
      }
      emitted += static_cast<std::size_t>(o.emitted);
      expired += static_cast<std::size_t>(o.expired);
      dead += static_cast<std::size_t>(o.dead);
      if ((o.dead == 1) != r.malformed && ++misplaced <= 5)
        ADD_FAILURE() << "record " << r.id << (r.malformed ? " is malformed but not dead-lettered" : " dead-lettered");
      if (o.emitted == 1 && r.ttl_ms == 1 && ++misplaced <= 5)
        ADD_FAILURE() << "record " << r.id << " expired on arrival but was emitted";
      if (o.emitted == 1 && r.deliver_at != 0 && o.emitted_at < r.deliver_at && ++early <= 5)
        ADD_FAILURE() << "record " << r.id << " emitted at " << o.emitted_at << " before its deliver_at "
                      << r.deliver_at;
    }
    EXPECT_EQ(missing, 0);
    EXPECT_EQ(duplicated, 0);
    EXPECT_EQ(early, 0);
    EXPECT_EQ(misplaced, 0);
    // Per customer: unscheduled records in input order; the token-bucket bound.
    int out_of_order = 0, over_rate = 0;
    for (auto& [key, list] : emissions_) {
      const int c = std::stoi(key.substr(5));
      int last_id = -1;
      for (const auto& [ts, id] : list) {
        if (records_[static_cast<std::size_t>(id)].deliver_at != 0) continue;
        if (id < last_id && ++out_of_order <= 5)
          ADD_FAILURE() << key << ": record " << id << " emitted after record " << last_id;
        last_id = std::max(last_id, id);
      }
      std::vector<std::int64_t> ts;
      for (const auto& e : list) ts.push_back(e.first);
      std::sort(ts.begin(), ts.end());
      const double r = rate_.at(c);
      if (auto over = sluice::test::token_bucket_excess(ts, r); over && ++over_rate <= 5)
        ADD_FAILURE() << key << " (rate " << r << "): " << (over->second - over->first + 1) << " emissions within "
                      << (ts[over->second] - ts[over->first]) << " ms";
    }
    EXPECT_EQ(out_of_order, 0);
    EXPECT_EQ(over_rate, 0);
    std::cout << emitted << " emitted, " << expired << " expired, " << dead << " dead-lettered\n";
  }

  std::mt19937 rng_;
  std::string app_id_, input_, output_, expired_, rates_, dlq_;
  std::unique_ptr<sluice::topic_writer> writer_;
  std::map<int, double> rate_;
  std::vector<input_record> records_;
  std::size_t fed_ = 0;
  std::map<int, observed> seen_;
  std::map<std::string, std::vector<std::pair<std::int64_t, int>>> emissions_;
};

}  // namespace

TEST_F(overflow_buffer_integration, every_record_is_accounted_once_in_order_and_within_its_rate) {
  SLUICE_REQUIRE_BROKER();
  auto& job = start_job("exactly_once");
  sluice::topic_reader progress(cfg_, {output_, expired_, dlq_}, sluice::isolation::read_committed);
  std::size_t count = 0;
  while (fed_ < records_.size()) {  // bursts of 20,000
    feed(20'000);
    count += collect(progress.poll(500ms));
  }
  ASSERT_TRUE(wait_for_all(progress, count, job, 240s));
  stop_cleanly(job);
  expect_contract();
}

// Exactly-once with SIGKILLs while the job emits and drains: each run is killed at a random
// moment after it produced committed output; the restarted job restores the buffer and the
// token state from the changelogs. The committed topics must still satisfy the contract.
TEST_F(overflow_buffer_integration, the_contract_holds_across_sigkill_restarts_under_exactly_once) {
  SLUICE_REQUIRE_BROKER();
  constexpr int kills = 3;
  feed(40'000);
  sluice::topic_reader progress(cfg_, {output_, expired_, dlq_}, sluice::isolation::read_committed);
  std::size_t count = 0;
  std::uniform_int_distribution<int> delay_ms(300, 1500);
  for (int round = 0; round < kills; ++round) {
    auto& job = start_job("exactly_once");
    auto before = count;
    auto deadline = steady::now() + 90s;
    while (count == before && job.running() && steady::now() < deadline) {
      if (fed_ < records_.size()) feed(2000);
      count += collect(progress.poll(100ms));
    }
    ASSERT_GT(count, before) << "round " << round << ": no committed output within 90 s ("
                             << sluice::test::describe_exit(job.wait_exit(0ms)) << ")";
    auto kill_at = steady::now() + std::chrono::milliseconds(delay_ms(rng_));
    while (steady::now() < kill_at) {
      if (fed_ < records_.size()) feed(2000);
      count += collect(progress.poll(50ms));
    }
    ASSERT_TRUE(job.running()) << "round " << round << ": the job " << sluice::test::describe_exit(job.wait_exit(0ms));
    job.signal(SIGKILL);
    auto st = job.wait_exit(30s);
    ASSERT_TRUE(st && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL) << sluice::test::describe_exit(st);
    std::cout << "round " << round << ": killed after " << count << " committed records, " << fed_ << " fed\n";
  }
  feed(records_.size());
  auto& last = start_job("exactly_once");
  ASSERT_TRUE(wait_for_all(progress, count, last, 240s));
  stop_cleanly(last);
  expect_contract();
}
