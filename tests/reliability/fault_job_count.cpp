// The fault suite's count job: sluice-word-count (a repartition topic, a RocksDB count store
// and its changelog). Fed lines of three words out of 300; the reference model is a tally
// kept here. Verified: every word's counts, in output order, are exactly 1, 2, ..., N with N
// its tally (a count emitted twice is a duplicate, a gap or a short final count a loss).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "broker_env.hpp"
#include "fault_job.hpp"

using namespace std::chrono_literals;

namespace sluice::test::faults {
namespace {

class count_job final : public fault_job {
 public:
  std::string name() const override { return "count"; }
  std::string binary() const override { return SLUICE_WORD_COUNT_BIN; }
  long records(profile p) const override { return p == profile::soak ? 1'000'000 : 150'000; }

  void prepare(const sluice::config& cfg, std::mt19937& rng, long) override {
    rng_ = &rng;
    input_ = sluice::test::unique_name("faults-lines");
    output_ = sluice::test::unique_name("faults-counts");
    sluice::topic_admin admin(cfg);
    admin.create_topic(input_, topic_partitions);  // replication: the cluster's default, 3
    admin.create_topic(output_, topic_partitions);
    for (int i = 0; i < 300; ++i) vocabulary_.push_back("w" + std::to_string(i));
  }

  std::vector<std::pair<std::string, std::string>> settings() const override {
    return {{"input.topic", input_}, {"output.topic", output_}};
  }
  std::vector<std::string> data_topics() const override { return {input_, output_}; }
  std::vector<std::string> output_topics() const override { return {output_}; }

  void feed(sluice::topic_writer& writer, long n) override {
    std::uniform_int_distribution<std::size_t> pick(0, vocabulary_.size() - 1);
    for (long i = 0; i < n; ++i) {
      std::string line;
      for (int k = 0; k < 3; ++k) {
        const auto& w = vocabulary_[pick(*rng_)];
        line += (k ? " " : "") + w;
        ++reference_[w];
      }
      writer.send_raw(input_, std::nullopt, line);
    }
    writer.flush(120s);
    fed_ += n;
  }

  bool observe(const std::vector<sluice::raw_message>& batch) override {
    for (const auto& m : batch)
      if (m.key && m.value) {
        auto& h = highest_[*m.key];
        h = std::max(h, sluice::int64_serde::deserialize(*m.value));
      }
    return std::all_of(reference_.begin(), reference_.end(), [&](auto& r) { return highest_[r.first] >= r.second; });
  }

  verdict verify(const sluice::config& cfg) override {
    sluice::topic_reader reader(cfg, {output_}, sluice::isolation::read_committed);
    struct count_read {
      std::int64_t count;
      std::int32_t partition;
      std::int64_t offset;
    };
    std::map<std::string, std::vector<count_read>> values;
    std::size_t records = 0;
    for (const auto& m : reader.read_to_end(300s))
      if (m.key && m.value) {
        values[*m.key].push_back({sluice::int64_serde::deserialize(*m.value), m.partition, m.offset});
        ++records;
      }
    verdict v;
    int reported = 0;
    for (const auto& [word, n] : reference_) {
      const auto& got = values[word];
      std::int64_t expect = 1;
      for (const auto& [c, partition, offset] : got) {
        if (c == expect) {
          ++expect;
        } else if (c < expect) {
          ++v.duplicates;
          if (++reported <= 10)
            ADD_FAILURE() << "word " << word << ": count " << c << " emitted twice (again at " << output_ << "["
                          << partition << "]@" << offset << ")";
        } else {
          v.losses += c - expect;
          if (++reported <= 10)
            ADD_FAILURE() << "word " << word << ": counts " << expect << ".." << c - 1 << " missing";
          expect = c + 1;
        }
      }
      if (expect - 1 != n) {
        if (expect - 1 < n)
          v.losses += n - (expect - 1);
        else
          ++v.wrong;
        if (++reported <= 10) ADD_FAILURE() << "word " << word << ": final count " << expect - 1 << ", reference " << n;
      }
    }
    for (const auto& [word, c] : values)
      if (!reference_.contains(word)) {
        ++v.wrong;
        ADD_FAILURE() << "a count for a word never fed: " << word;
      }
    v.text = std::to_string(fed_) + " input records (" + std::to_string(fed_ * 3) + " words), " +
             std::to_string(records) + " counts read read_committed, duplicates " + std::to_string(v.duplicates) +
             ", losses " + std::to_string(v.losses) + ", final counts " +
             (v.duplicates == 0 && v.losses == 0 && v.wrong == 0 ? "equal to" : "NOT equal to") +
             " the reference model for " + std::to_string(reference_.size()) + " words";
    return v;
  }

 private:
  std::mt19937* rng_ = nullptr;
  std::string input_, output_;
  std::vector<std::string> vocabulary_;
  std::map<std::string, std::int64_t> reference_;  // the model: word -> times fed
  std::map<std::string, std::int64_t> highest_;    // word -> highest count read so far
  long fed_ = 0;
};

}  // namespace

std::unique_ptr<fault_job> make_count_job() { return std::make_unique<count_job>(); }

}  // namespace sluice::test::faults
