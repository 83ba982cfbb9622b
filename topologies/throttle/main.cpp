// sluice-throttle: exact per-key sliding-window limits as a job. Reads `input.topic`, writes
// passed records unchanged to `output.topic` and throttled ones to `throttled.topic` (with
// the sluice-throttle-reason header) or drops and counts them. See README.md.
//
//   sluice-throttle --config throttle.properties [--set key=value]...
#include <utility>
#include <iostream>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/topologies/throttle.hpp"

int main(int argc, char** argv) {
  using namespace sluice::topologies;
  static constexpr sluice::config_key keys[] = {
      {"application.id", "sluice-throttle",
       "Names the job: the consumer group, the prefix of internal topics and the state folder."},
      {"input.topic", "throttle-in", "Topic of records to throttle (keys and values are passed through as bytes)."},
      {"output.topic", "throttle-out", "Topic passed records go to, unchanged."},
      {"throttled.topic", "",
       "Topic throttled records go to with the sluice-throttle-reason header; empty = drop "
       "and count them (sluice_throttle_throttled_total)."},
      {"throttle.window.ms", "60000", "The sliding window, 1000 (1 s) .. 2678400000 (31 days)."},
      {"throttle.limit", "1", "Records of one throttle key that may pass per window, 1 .. 1000000."},
      {"throttle.key.fields", "",
       "Comma-separated JSON fields of the value forming the throttle key, in order; "
       "empty = the record key."},
      {"throttle.rules.topic", "",
       "Global table of per-key rules: key = first key field's value (or the record "
       "key), value = {\"window_ms\": W, \"limit\": N}; empty = no rules."},
      {"throttle.rules.max.window.ms", "2678400000", "Largest window a rule may set; sizes the store TTL."},
      {"throttle.retention.grace.ms", "86400000",
       "How far processing may lag behind record timestamps while "
       "decisions stay exact (the store keeps entries window + grace)."},
      {"pace.records.per.second", "0",
       "Pace passed output to this many records per second for the whole job, "
       "split over partitions (input pauses while over); 0 = off."},
  };
  try {
    sluice::config::declare_keys(keys);
    auto args = sluice::config::from_args(argc, argv, "Throttle: exact per-key sliding-window limits.");
    if (args.action == sluice::command_line::request::print_help) {
      std::cout << args.help;
      return 0;
    }
    auto cfg = std::move(args.settings);
    cfg.validate_numbers();  // poll.ms, commit.interval.ms, ...: refused before anything connects
    auto pace_rate = cfg.get_int("pace.records.per.second", 0, 1'000'000'000);

    throttle_options o;
    o.window = std::chrono::milliseconds(
        cfg.get_int("throttle.window.ms", min_throttle_window.count(), max_throttle_window.count()));
    o.limit = cfg.get_int("throttle.limit", min_throttle_limit, max_throttle_limit);
    o.key_fields =
        cfg.get_list("throttle.key.fields",
                     "use a comma-separated list of JSON field names, or leave it empty to throttle by the record key");
    o.rules_topic = cfg.get("throttle.rules.topic").value_or("");
    o.max_rule_window = std::chrono::milliseconds(
        cfg.get_int("throttle.rules.max.window.ms", min_throttle_window.count(), max_throttle_window.count()));
    o.retention_grace =
        std::chrono::milliseconds(cfg.get_int("throttle.retention.grace.ms", 0, max_throttle_window.count()));

    sluice::app app(throttle_job_topology(cfg.get("input.topic").value_or(""), cfg.get("output.topic").value_or(""),
                                          cfg.get("throttled.topic").value_or(""), o, static_cast<double>(pace_rate)),
                    cfg);
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice-throttle: {}", e.what());
    return 1;
  }
}
