// A job the fault suite (fault_suite_test.cpp) runs under faults: its topics, its settings,
// the records it is fed and the verifier that checks its committed output against an
// independent reference model. The suite owns the cluster, the instances and the fault
// schedule; a job only knows its own data. One class per shipped job:
//   count            sluice-word-count         fault_job_count.cpp
//   throttle         sluice-throttle           fault_job_throttle.cpp
//   leaderboard      sluice-leaderboard        fault_job_leaderboard.cpp
//   overflow_buffer  sluice-overflow-buffer    fault_job_overflow_buffer.cpp
//
// Lifecycle: made by make_fault_job(name); prepare() once (topics, tables, the records to
// feed); feed() between faults; observe() with what the suite reads read_committed while it
// waits for the job to catch up; verify() once at the end, after the instances stopped.
// Threading: the test's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice::test::faults {

/// Partitions of every input and output topic of the suite's jobs.
inline constexpr std::int32_t topic_partitions = 6;

/// The size of a run.
enum class profile { short_ci, soak };

/// What a job's verifier found; `text` is the report's "verified:" line after the colon.
struct verdict {
  std::string text;
  long duplicates = 0;  // output records that appear more than once
  long losses = 0;      // input records whose effect is missing
  long wrong = 0;       // results that differ from the reference model
};

/// Where a verifier read a record, "topic[partition]@offset": a report of copies names each
/// one, so the brokers' segments can be read at the right place.
inline std::string place_of(const sluice::raw_message& m) {
  return m.topic + "[" + std::to_string(m.partition) + "]@" + std::to_string(m.offset);
}

class fault_job {
 public:
  virtual ~fault_job() = default;

  /// The job's name in the report and the test's name ("count").
  virtual std::string name() const = 0;
  /// The job's binary (a path).
  virtual std::string binary() const = 0;
  /// Input records a run of `p` feeds (a soak feeds at least this many).
  virtual long records(profile p) const = 0;
  /// Creates the job's topics and tables on the cluster at `cfg` and prepares `total`
  /// records (drawn from `rng`) for feed().
  virtual void prepare(const sluice::config& cfg, std::mt19937& rng, long total) = 0;
  /// The job's own settings (topics, tables, options), added to the suite's common ones
  /// (bootstrap, application.id, state.dir, instance.id, exactly_once, timeouts).
  virtual std::vector<std::pair<std::string, std::string>> settings() const = 0;
  /// The input and output topics whose partition leaders the suite may kill.
  virtual std::vector<std::string> data_topics() const = 0;
  /// The topics the verifier reads read_committed.
  virtual std::vector<std::string> output_topics() const = 0;
  /// Sends the next `n` prepared records through `writer` and flushes.
  virtual void feed(sluice::topic_writer& writer, long n) = 0;
  /// Takes committed output read while the suite waits; true once the output reflects every
  /// record fed so far (the evidence that the job caught up; no timing).
  virtual bool observe(const std::vector<sluice::raw_message>& batch) = 0;
  /// Reads every output topic read_committed from its start to its end and checks it
  /// against the reference model; reports each difference with ADD_FAILURE (up to a few).
  virtual verdict verify(const sluice::config& cfg) = 0;
};

// The jobs, each with topic names of its own (sluice::test::unique_name).
std::unique_ptr<fault_job> make_count_job();
std::unique_ptr<fault_job> make_throttle_job();
std::unique_ptr<fault_job> make_leaderboard_job();
std::unique_ptr<fault_job> make_overflow_buffer_job();

}  // namespace sluice::test::faults
