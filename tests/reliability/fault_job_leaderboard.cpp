// The fault suite's leaderboard job: sluice-leaderboard with boards overall and gender=<value>
// (RocksDB stores of versions, per-user efforts and a ranked index, each with its
// changelog). Fed effort events over 200 segments and 2,000 users, several versions of each
// effort out of order, duplicates and deletes (tests/support/leaderboard_model.hpp, which
// also holds the reference model). Verified from the updates topic read read_committed:
//   - per (segment, board, user) the updates form one chain: each one's `previous` is the
//     `current` of the one before (null first). An update written twice breaks the chain (a
//     duplicate), so does one missing (a loss);
//   - the last `current` of every (segment, board, user) equals the model's entry, and the
//     job has no entry the model lacks (final state equal to the model).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "broker_env.hpp"
#include "fault_job.hpp"
#include "leaderboard_model.hpp"

using namespace std::chrono_literals;
using json = nlohmann::json;

namespace sluice::test::faults {
namespace {

using entry_key = std::tuple<std::string, std::string, std::string>;      // segment, board, user
using entry_value = std::tuple<std::string, std::int64_t, std::int64_t>;  // effort, elapsed, started

/// One update record as read, or nullopt when it is not one.
struct update {
  entry_key key;
  std::optional<entry_value> previous, current;
};

std::optional<entry_value> entry_of(const json& j) {
  if (!j.is_object()) return std::nullopt;
  return entry_value{j.value("effort_id", ""), j.value("elapsed_ms", std::int64_t{-1}),
                     j.value("started_at_ms", std::int64_t{-1})};
}

std::optional<update> parse_update(const sluice::raw_message& m) {
  auto j = json::parse(m.value.value_or(""), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("current") || !j.contains("previous") || !j["segment_id"].is_string() ||
      !j["board"].is_string() || !j["user_id"].is_string())
    return std::nullopt;
  return update{{j["segment_id"].get<std::string>(), j["board"].get<std::string>(), j["user_id"].get<std::string>()},
                entry_of(j["previous"]),
                entry_of(j["current"])};
}

std::string describe(const entry_key& k) { return std::get<0>(k) + "/" + std::get<1>(k) + "/" + std::get<2>(k); }
std::string describe(const std::optional<entry_value>& v) {
  return v ? std::get<0>(*v) + " (" + std::to_string(std::get<1>(*v)) + " ms)" : std::string("null");
}

class leaderboard_job final : public fault_job {
 public:
  std::string name() const override { return "leaderboard"; }
  std::string binary() const override { return SLUICE_LEADERBOARD_BIN; }
  long records(profile p) const override { return p == profile::soak ? 1'000'000 : 60'000; }

  void prepare(const sluice::config& cfg, std::mt19937& rng, long total) override {
    input_ = sluice::test::unique_name("faults-lb-efforts");
    updates_ = sluice::test::unique_name("faults-lb-updates");
    sluice::topic_admin admin(cfg);
    admin.create_topic(input_, topic_partitions);
    admin.create_topic(updates_, topic_partitions);
    events_ = leaderboard_events(static_cast<std::size_t>(total), rng, {.segments = 200, .users = 2000});
    events_.resize(static_cast<std::size_t>(total));  // the generator may make a few more
  }

  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"input.topic", input_}, {"updates.topic", updates_}, {"leaderboard.boards", "gender"}};
  }
  std::vector<std::string> data_topics() const override { return {input_, updates_}; }
  std::vector<std::string> output_topics() const override { return {updates_}; }

  void feed(sluice::topic_writer& writer, long n) override {
    const auto end = std::min(events_.size(), fed_ + static_cast<std::size_t>(n));
    for (; fed_ < end; ++fed_) {
      const auto& e = events_[fed_];
      json j = {{"effort_id", e.effort},   {"segment_id", e.segment},    {"user_id", e.user},
                {"elapsed_ms", e.elapsed}, {"started_at_ms", e.started}, {"version", e.version}};
      if (e.deleted) j["deleted"] = true;
      if (!e.gender.empty()) j["attributes"] = {{"gender", e.gender}};
      writer.send_raw(input_, e.segment, j.dump());
    }
    writer.flush(120s);
  }

  bool observe(const std::vector<sluice::raw_message>& batch) override {
    for (const auto& m : batch)
      if (auto u = parse_update(m)) {
        if (u->current)
          boards_[u->key] = *u->current;
        else
          boards_.erase(u->key);
      }
    return boards_ == expected();
  }

  verdict verify(const sluice::config& cfg) override {
    sluice::topic_reader reader(cfg, {updates_}, sluice::isolation::read_committed);
    std::map<entry_key, std::optional<entry_value>> last;  // per key: the current of its last update
    std::map<entry_key, update> last_update;
    std::size_t read = 0;
    long reported = 0;
    verdict v;
    for (const auto& m : reader.read_to_end(300s)) {
      ++read;
      auto u = parse_update(m);
      if (!u) {
        ++v.wrong;
        if (++reported <= 10) ADD_FAILURE() << "not an update: " << m.value.value_or("<null>");
        continue;
      }
      auto& before = last[u->key];
      if (u->previous != before) {
        auto it = last_update.find(u->key);
        const bool repeated =
            it != last_update.end() && it->second.previous == u->previous && it->second.current == u->current;
        if (repeated)
          ++v.duplicates;
        else
          ++v.losses;
        if (++reported <= 10)
          ADD_FAILURE() << describe(u->key) << ": an update from " << describe(u->previous) << " to "
                        << describe(u->current) << " after one to " << describe(before)
                        << (repeated ? " (the same update twice)" : " (an update is missing)") << ", at "
                        << place_of(m);
      }
      before = u->current;
      last_update[u->key] = *u;
    }
    const auto& want = expected();
    leaderboard_entries got;
    for (const auto& [key, current] : last)
      if (current) got[key] = *current;
    for (const auto& [key, w] : want) {
      auto it = got.find(key);
      if (it == got.end() || it->second != w) {
        ++v.wrong;
        if (++reported <= 10)
          ADD_FAILURE() << describe(key) << ": the job has "
                        << (it == got.end() ? std::string("no entry") : describe(it->second)) << ", the model "
                        << describe(w);
      }
    }
    for (const auto& [key, g] : got)
      if (!want.contains(key)) {
        ++v.wrong;
        if (++reported <= 10) ADD_FAILURE() << describe(key) << ": the job has an entry the model does not";
      }
    v.text = std::to_string(fed_) + " input events, " + std::to_string(read) +
             " updates read read_committed, every (segment, board, user) chain of updates " +
             (v.duplicates == 0 && v.losses == 0 ? "unbroken" : "BROKEN") + " (duplicates " +
             std::to_string(v.duplicates) + ", losses " + std::to_string(v.losses) + "), final boards " +
             (v.wrong == 0 ? "equal to" : "NOT equal to") + " the reference model's " + std::to_string(want.size()) +
             " entries (" + std::to_string(v.wrong) + " differ)";
    return v;
  }

 private:
  /// The model's boards for the events fed so far (recomputed only when more were fed).
  const leaderboard_entries& expected() {
    if (expected_for_ != fed_) {
      expected_ = leaderboard_reference({events_.begin(), events_.begin() + static_cast<long>(fed_)});
      expected_for_ = fed_;
    }
    return expected_;
  }

  std::string input_, updates_;
  std::vector<leaderboard_event> events_;
  std::size_t fed_ = 0;
  leaderboard_entries boards_;  // from the updates read while waiting
  leaderboard_entries expected_;
  std::size_t expected_for_ = static_cast<std::size_t>(-1);
};

}  // namespace

std::unique_ptr<fault_job> make_leaderboard_job() { return std::make_unique<leaderboard_job>(); }

}  // namespace sluice::test::faults
