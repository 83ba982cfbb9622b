// The fault suite's overflow-buffer job: sluice-overflow-buffer (a queue store of buffered
// records and a store of per-customer token buckets, each with its changelog; rates from a
// global table; expired records to a topic of their own, malformed ones to the dead-letter
// topic). Fed records with unique ids over 1,000 customers (half of them on 50 hot customers
// that buffer), 3 % scheduled 1 to 8 s ahead, 2 % with a 1 ms TTL (expired on arrival),
// 0.1 % malformed. Rates (50 to 400 per second) let every backlog drain within seconds, so a
// run ends. Verified from the output, expired and dead-letter topics read read_committed:
//   - every id is in exactly one of them (none lost, none duplicated), and in the one the
//     record's kind decides (the model): malformed -> dead letter, 1 ms TTL -> expired,
//     any other -> output;
//   - per customer, unscheduled records come out in input order; no scheduled record comes
//     out before its deliver_at_ms;
//   - the token-bucket bound on every customer's output timestamps
//     (tests/support/token_bucket_bound.hpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "fault_job.hpp"
#include "token_bucket_bound.hpp"

using namespace std::chrono_literals;

namespace sluice::test::faults {
namespace {

constexpr int customers = 1000;
constexpr double default_rate = 100;

std::string customer_name(int c) { return "cust-" + std::to_string(c); }

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class overflow_buffer_job final : public fault_job {
 public:
  std::string name() const override { return "overflow_buffer"; }
  std::string binary() const override { return SLUICE_OVERFLOW_BUFFER_BIN; }
  long records(profile p) const override { return p == profile::soak ? 1'000'000 : 40'000; }

  void prepare(const sluice::config& cfg, std::mt19937& rng, long total) override {
    rng_ = &rng;
    input_ = sluice::test::unique_name("faults-ovf-in");
    output_ = sluice::test::unique_name("faults-ovf-out");
    expired_ = sluice::test::unique_name("faults-ovf-expired");
    rates_ = sluice::test::unique_name("faults-ovf-rates");
    dlq_ = sluice::test::unique_name("faults-ovf-dlq");
    sluice::topic_admin admin(cfg);
    admin.create_topic(input_, topic_partitions);
    admin.create_topic(output_, topic_partitions);
    admin.create_topic(expired_, topic_partitions);
    admin.create_topic(rates_, 1, sluice::cleanup_policy::compact);
    admin.create_topic(dlq_, 1);
    write_rates(cfg, rng);
    generate(rng, total);
  }

  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"input.topic", input_},
            {"output.topic", output_},
            {"expired.topic", expired_},
            {"rates.topic", rates_},
            {"dead.letter.topic", dlq_},
            {"overflow.default.rate.per.second", "100"},
            {"overflow.drain.interval.ms", "50"}};
  }
  std::vector<std::string> data_topics() const override { return {input_, output_}; }
  std::vector<std::string> output_topics() const override { return {output_, expired_, dlq_}; }

  void feed(sluice::topic_writer& writer, long n) override {
    const auto end = std::min(records_.size(), fed_ + static_cast<std::size_t>(n));
    const std::int64_t now = now_ms();
    std::uniform_int_distribution<int> ahead(1000, 8000);
    for (; fed_ < end; ++fed_) {
      auto& r = records_[fed_];
      nlohmann::json v = {{"id", fed_}, {"body", "hello"}};
      if (r.type == kind::scheduled) {
        r.deliver_at = now + ahead(*rng_);
        v["deliver_at_ms"] = r.deliver_at;
      }
      if (r.type == kind::expiring) v["ttl_ms"] = 1;
      if (r.type == kind::malformed) v["ttl_ms"] = "soon";
      // Input timestamps a little in the past, so the 1 ms TTLs have surely run out.
      writer.send_raw(input_, customer_name(r.customer), v.dump(), now - 10);
    }
    writer.flush(120s);
  }

  bool observe(const std::vector<sluice::raw_message>& batch) override {
    for (const auto& m : batch)
      if (auto id = id_of(m); id >= 0 && static_cast<std::size_t>(id) < records_.size() && !observed_[id]) {
        observed_[static_cast<std::size_t>(id)] = true;
        ++observed_count_;
      }
    return observed_count_ >= fed_;
  }

  verdict verify(const sluice::config& cfg) override {
    struct copies {
      int emitted = 0, expired = 0, dead = 0;
      std::int64_t emitted_at = 0;
      std::string places;  // where each copy was read
    };
    std::vector<copies> seen(records_.size());
    std::map<int, std::vector<std::pair<std::int64_t, std::size_t>>> emissions;  // customer -> (timestamp, id)
    sluice::topic_reader reader(cfg, {output_, expired_, dlq_}, sluice::isolation::read_committed);
    std::size_t read = 0;
    long reported = 0;
    verdict v;
    for (const auto& m : reader.read_to_end(300s)) {
      ++read;
      const auto id = id_of(m);
      if (id < 0 || static_cast<std::size_t>(id) >= fed_) {
        ++v.wrong;
        if (++reported <= 10)
          ADD_FAILURE() << "a record in " << m.topic << " that was never fed: " << m.value.value_or("<null>");
        continue;
      }
      auto& c = seen[static_cast<std::size_t>(id)];
      c.places += " " + place_of(m);
      if (m.topic == output_) {
        ++c.emitted;
        c.emitted_at = m.timestamp;
        emissions[records_[static_cast<std::size_t>(id)].customer].push_back(
            {m.timestamp, static_cast<std::size_t>(id)});
      } else if (m.topic == expired_) {
        ++c.expired;
      } else {
        ++c.dead;
      }
    }
    std::size_t emitted = 0, expired = 0, dead = 0;
    for (std::size_t id = 0; id < fed_; ++id) {
      const auto& c = seen[id];
      const auto& r = records_[id];
      const int copies_read = c.emitted + c.expired + c.dead;
      if (copies_read == 0) {
        ++v.losses;
        if (++reported <= 10) ADD_FAILURE() << "record " << id << " is in none of the outputs";
        continue;
      }
      if (copies_read > 1) {
        v.duplicates += copies_read - 1;
        if (++reported <= 10)
          ADD_FAILURE() << "record " << id << ": " << c.emitted << " emitted, " << c.expired << " expired, " << c.dead
                        << " dead-lettered copies, at" << c.places;
        continue;
      }
      emitted += static_cast<std::size_t>(c.emitted);
      expired += static_cast<std::size_t>(c.expired);
      dead += static_cast<std::size_t>(c.dead);
      const bool right_place = r.type == kind::malformed  ? c.dead == 1
                               : r.type == kind::expiring ? c.expired == 1
                                                          : c.emitted == 1;
      if (!right_place) {
        ++v.wrong;
        if (++reported <= 10)
          ADD_FAILURE() << "record " << id << " (" << describe(r.type) << ") went to the "
                        << (c.emitted   ? "output"
                            : c.expired ? "expired topic"
                                        : "dead-letter topic");
      }
      if (c.emitted == 1 && r.type == kind::scheduled && c.emitted_at < r.deliver_at) {
        ++v.wrong;
        if (++reported <= 10)
          ADD_FAILURE() << "record " << id << " emitted at " << c.emitted_at << ", before its deliver_at_ms "
                        << r.deliver_at;
      }
    }
    long out_of_order = 0, over_rate = 0;
    for (auto& [customer, list] : emissions) {
      std::size_t last_id = 0;
      bool any = false;
      for (const auto& [ts, id] : list) {  // in output order
        if (records_[id].type == kind::scheduled) continue;
        if (any && id < last_id) {
          ++out_of_order;
          if (++reported <= 10)
            ADD_FAILURE() << customer_name(customer) << ": record " << id << " emitted after record " << last_id;
        }
        last_id = std::max(last_id, id);
        any = true;
      }
      std::vector<std::int64_t> ts;
      for (const auto& e : list) ts.push_back(e.first);
      const double rate = rate_.at(customer);
      if (auto over = token_bucket_excess(ts, rate)) {
        ++over_rate;
        if (++reported <= 10)
          ADD_FAILURE() << customer_name(customer) << " (rate " << rate << "): " << (over->second - over->first + 1)
                        << " emissions in a window the token bucket allows fewer";
      }
    }
    v.wrong += out_of_order + over_rate;
    v.text = std::to_string(fed_) + " input records over " + std::to_string(customers) + " customers, " +
             std::to_string(read) + " records read read_committed (" + std::to_string(emitted) + " emitted, " +
             std::to_string(expired) + " expired, " + std::to_string(dead) + " dead-lettered), duplicates " +
             std::to_string(v.duplicates) + ", losses " + std::to_string(v.losses) +
             ", records in the wrong place or before their time " + std::to_string(v.wrong - out_of_order - over_rate) +
             ", customers out of input order " + std::to_string(out_of_order) + ", customers over their token bucket " +
             std::to_string(over_rate);
    return v;
  }

 private:
  enum class kind { plain, scheduled, expiring, malformed };
  static const char* describe(kind k) {
    switch (k) {
      case kind::plain: return "plain";
      case kind::scheduled: return "scheduled";
      case kind::expiring: return "1 ms TTL";
      case kind::malformed: return "malformed";
    }
    return "?";
  }
  struct input_record {
    int customer;
    kind type;
    std::int64_t deliver_at = 0;  // set when fed
  };

  static long id_of(const sluice::raw_message& m) {
    auto j = nlohmann::json::parse(m.value.value_or(""), nullptr, /*allow_exceptions=*/false);
    return j.is_object() && j.contains("id") && j["id"].is_number_integer() ? j["id"].get<long>() : -1;
  }

  /// A fifth of the customers (the 50 hot ones among them) use the default rate, the others
  /// 50 .. 400 per second from the rates table.
  void write_rates(const sluice::config& cfg, std::mt19937& rng) {
    const double rates[] = {50, 100, 200, 400};
    std::uniform_int_distribution<int> pick(0, 3);
    sluice::topic_writer writer(cfg);
    for (int c = 0; c < customers; ++c) {
      double r = default_rate;
      if (c % 5 != 0) {
        r = rates[pick(rng)];
        writer.send_raw(rates_, customer_name(c), nlohmann::json{{"rate_per_second", r}}.dump());
      }
      rate_[c] = r;
    }
    writer.flush(120s);
  }

  void generate(std::mt19937& rng, long n) {
    std::uniform_int_distribution<int> any(0, customers - 1), hot(0, 49), per_mille(0, 999);
    records_.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      const int customer = per_mille(rng) < 500 ? hot(rng) * 20 : any(rng);
      const int p = per_mille(rng);
      const kind k = p < 30 ? kind::scheduled : p < 50 ? kind::expiring : p < 51 ? kind::malformed : kind::plain;
      records_.push_back({customer, k});
    }
    observed_.assign(records_.size(), false);
  }

  std::mt19937* rng_ = nullptr;
  std::string input_, output_, expired_, rates_, dlq_;
  std::map<int, double> rate_;
  std::vector<input_record> records_;  // index = id
  std::vector<bool> observed_;
  std::size_t observed_count_ = 0;
  std::size_t fed_ = 0;
};

}  // namespace

std::unique_ptr<fault_job> make_overflow_buffer_job() { return std::make_unique<overflow_buffer_job>(); }

}  // namespace sluice::test::faults
