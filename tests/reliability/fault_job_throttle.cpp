// The fault suite's throttle job: sluice-throttle with the throttle key from the JSON fields
// workflow,recipient (a repartition topic by the throttle key, a RocksDB store of passed
// times with its changelog), per-workflow rules from a global table, throttled records
// forwarded to a topic of their own. Fed records with unique ids over 1,000 throttle keys
// (half of them on 50 hot keys, a fifth up to 8 s late); the record key is the throttle key's
// text, so one key's records keep their order through the input and the repartition topic,
// as the model sees them. The reference model is tests/support/throttle_model.hpp. Verified:
// every id is in exactly one of the output and the throttled topic (none lost, none
// duplicated), there iff the model passes or throttles it, and a throttled copy's
// sluice-throttle-reason header names its key and the rule the model used.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "fault_job.hpp"
#include "throttle_model.hpp"

using namespace std::chrono_literals;

namespace sluice::test::faults {
namespace {

constexpr std::int64_t default_window_ms = 5000;
constexpr std::int64_t default_limit = 3;
constexpr int workflows = 20;
constexpr int recipients = 50;  // 20 x 50 = 1,000 throttle keys

std::string workflow_name(int w) { return "wf" + std::to_string(w); }
std::string recipient_name(int r) { return "user" + std::to_string(r); }

class throttle_job final : public fault_job {
 public:
  std::string name() const override { return "throttle"; }
  std::string binary() const override { return SLUICE_THROTTLE_BIN; }
  long records(profile p) const override { return p == profile::soak ? 1'000'000 : 60'000; }

  void prepare(const sluice::config& cfg, std::mt19937& rng, long total) override {
    input_ = sluice::test::unique_name("faults-thr-in");
    output_ = sluice::test::unique_name("faults-thr-out");
    throttled_ = sluice::test::unique_name("faults-thr-throttled");
    rules_topic_ = sluice::test::unique_name("faults-thr-rules");
    sluice::topic_admin admin(cfg);
    admin.create_topic(input_, topic_partitions);
    admin.create_topic(output_, topic_partitions);
    admin.create_topic(throttled_, topic_partitions);
    admin.create_topic(rules_topic_, 1, sluice::cleanup_policy::compact);
    write_rules(cfg, rng);
    generate(rng, total);
  }

  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"input.topic", input_},
            {"output.topic", output_},
            {"throttled.topic", throttled_},
            {"throttle.window.ms", std::to_string(default_window_ms)},
            {"throttle.limit", std::to_string(default_limit)},
            {"throttle.key.fields", "workflow,recipient"},
            {"throttle.rules.topic", rules_topic_},
            {"throttle.rules.max.window.ms", "60000"}};
  }
  std::vector<std::string> data_topics() const override { return {input_, output_}; }
  std::vector<std::string> output_topics() const override { return {output_, throttled_}; }

  void feed(sluice::topic_writer& writer, long n) override {
    const auto end = std::min(records_.size(), fed_ + static_cast<std::size_t>(n));
    for (; fed_ < end; ++fed_) {
      const auto& r = records_[fed_];
      auto wf = workflow_name(r.workflow), rc = recipient_name(r.recipient);
      auto value = R"({"id":)" + std::to_string(fed_) + R"(,"workflow":")" + wf + R"(","recipient":")" + rc +
                   R"(","body":"hello"})";
      writer.send_raw(input_, wf + "/" + rc, value, r.timestamp);
    }
    writer.flush(120s);
  }

  bool observe(const std::vector<sluice::raw_message>& batch) override {
    for (const auto& m : batch)
      if (auto id = id_of(m); id >= 0 && static_cast<std::size_t>(id) < records_.size() && !observed_[id]) {
        observed_[id] = true;
        ++observed_count_;
      }
    return observed_count_ >= fed_;
  }

  verdict verify(const sluice::config& cfg) override {
    struct copies {
      int passed = 0, throttled = 0;
      std::string reason;
      std::string places;  // where each copy was read
    };
    std::vector<copies> seen(records_.size());
    sluice::topic_reader reader(cfg, {output_, throttled_}, sluice::isolation::read_committed);
    std::size_t read = 0;
    verdict v;
    for (const auto& m : reader.read_to_end(300s)) {
      ++read;
      auto id = id_of(m);
      if (id < 0 || static_cast<std::size_t>(id) >= fed_) {
        if (++v.wrong <= 5)
          ADD_FAILURE() << "a record in " << m.topic << " that was never fed: " << m.value.value_or("<null>");
        continue;
      }
      auto& c = seen[static_cast<std::size_t>(id)];
      c.places += " " + place_of(m);
      if (m.topic == throttled_) {
        ++c.throttled;
        if (const auto* h = m.headers.last("sluice-throttle-reason")) c.reason = h->value_or("");
      } else {
        ++c.passed;
      }
    }
    long passed = 0, reported = 0;
    for (std::size_t id = 0; id < fed_; ++id) {
      const auto& c = seen[id];
      const auto& r = records_[id];
      if (c.passed + c.throttled == 0) {
        ++v.losses;
        if (++reported <= 10) ADD_FAILURE() << "record " << id << " is in neither output";
        continue;
      }
      if (c.passed + c.throttled > 1) {
        v.duplicates += c.passed + c.throttled - 1;
        if (++reported <= 10)
          ADD_FAILURE() << "record " << id << ": " << c.passed << " passed and " << c.throttled
                        << " throttled copies, at" << c.places;
        continue;
      }
      passed += c.passed;
      if ((c.passed == 1) != expected_pass_[id]) {
        ++v.wrong;
        if (++reported <= 10)
          ADD_FAILURE() << "record " << id << " (" << workflow_name(r.workflow) << "," << recipient_name(r.recipient)
                        << ", ts " << r.timestamp << "): the job " << (c.passed ? "passed" : "throttled")
                        << " it, the model " << (expected_pass_[id] ? "passes" : "throttles") << " it";
        continue;
      }
      if (c.throttled == 1) {
        const auto& rule = rules_.at(r.workflow);
        auto h = nlohmann::json::parse(c.reason, nullptr, false);
        const bool ok = h.is_object() &&
                        h.value("key", "") == workflow_name(r.workflow) + "," + recipient_name(r.recipient) &&
                        h.value("limit", std::int64_t{-1}) == rule.limit &&
                        h.value("window_ms", std::int64_t{-1}) == rule.window_ms;
        if (!ok) {
          ++v.wrong;
          if (++reported <= 10) ADD_FAILURE() << "record " << id << ": sluice-throttle-reason '" << c.reason << "'";
        }
      }
    }
    const auto model_passes =
        std::count(expected_pass_.begin(), expected_pass_.begin() + static_cast<long>(fed_), true);
    v.text = std::to_string(fed_) + " input records over " + std::to_string(workflows * recipients) +
             " throttle keys, " + std::to_string(read) + " decisions read read_committed (" + std::to_string(passed) +
             " passed, " + std::to_string(read - static_cast<std::size_t>(passed)) +
             " throttled; the model: " + std::to_string(model_passes) + " pass), duplicates " +
             std::to_string(v.duplicates) + ", losses " + std::to_string(v.losses) + ", decisions " +
             (v.wrong == 0 ? "equal to" : "NOT equal to") + " the reference model's (" + std::to_string(v.wrong) +
             " differ)";
    return v;
  }

 private:
  struct input_record {
    int workflow;
    int recipient;
    std::int64_t timestamp;
  };

  /// The record's "id" field, or -1 when it has none.
  static long id_of(const sluice::raw_message& m) {
    auto j = nlohmann::json::parse(m.value.value_or(""), nullptr, /*allow_exceptions=*/false);
    return j.is_object() && j.contains("id") && j["id"].is_number_integer() ? j["id"].get<long>() : -1;
  }

  /// Rules for most workflows (windows 1 s .. 60 s, limits 1 .. 20), none for every fifth
  /// (the job's defaults apply).
  void write_rules(const sluice::config& cfg, std::mt19937& rng) {
    const std::int64_t windows[] = {1000, 2000, 5000, 10000, 30000, 60000};
    const std::int64_t limits[] = {1, 2, 3, 5, 10, 20};
    std::uniform_int_distribution<int> pick(0, 5);
    sluice::topic_writer writer(cfg);
    for (int w = 0; w < workflows; ++w) {
      throttle_rule r{default_window_ms, default_limit};
      if (w % 5 != 4) {
        r = {windows[pick(rng)], limits[pick(rng)]};
        writer.send_raw(rules_topic_, workflow_name(w),
                        nlohmann::json{{"window_ms", r.window_ms}, {"limit", r.limit}}.dump());
      }
      rules_[w] = r;
    }
    writer.flush(120s);
  }

  /// `n` records, about 2,000 per second of record time ending at the wall clock, and the
  /// model's decision for each.
  void generate(std::mt19937& rng, long n) {
    const auto now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const std::int64_t span_ms = std::max<std::int64_t>(1000, n / 2), base = now_ms - span_ms;
    std::uniform_int_distribution<int> any_key(0, workflows * recipients - 1), hot_key(0, 49), coin(0, 9),
        late(0, 8000);
    throttle_model<int> model;
    records_.reserve(static_cast<std::size_t>(n));
    expected_pass_.reserve(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      int key = coin(rng) < 5 ? any_key(rng) : hot_key(rng) * 19;  // 50 hot keys, over every workflow
      std::int64_t ts = base + span_ms * i / n;
      if (coin(rng) < 2) ts -= late(rng);
      records_.push_back({key % workflows, key / workflows, ts});
      expected_pass_.push_back(model.offer(key, ts, rules_.at(key % workflows)));
    }
    observed_.assign(records_.size(), false);
  }

  std::string input_, output_, throttled_, rules_topic_;
  std::map<int, throttle_rule> rules_;
  std::vector<input_record> records_;  // index = id
  std::vector<bool> expected_pass_;    // the model's decision per id
  std::vector<bool> observed_;         // ids read while waiting
  std::size_t observed_count_ = 0;
  std::size_t fed_ = 0;
};

}  // namespace

std::unique_ptr<fault_job> make_throttle_job() { return std::make_unique<throttle_job>(); }

}  // namespace sluice::test::faults
