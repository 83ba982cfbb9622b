// sluice-overflow-buffer: a per-customer output rate as a job. Reads `input.topic` (key =
// customer id, value = a JSON object), emits to `output.topic` at each customer's rate from
// the `rates.topic` table, parks the excess in a durable per-customer buffer and drains it
// on wall-clock time; expired records go to `expired.topic`. See README.md.
//
//   sluice-overflow-buffer --config overflow_buffer.properties [--set key=value]...
#include <iostream>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cmath>
#include <string>

#include "sluice/sluice.hpp"
#include "sluice/topologies/overflow_buffer.hpp"

namespace {

double parse_rate_property(const std::string& text) {
  double r = 0;
  const auto* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, r);
  if (ec != std::errc() || p != end || !std::isfinite(r) || r < 0)
    throw sluice::error(sluice::errc::invalid_config,
                        "overflow.default.rate.per.second '" + text +
                            "' is not a rate; use a number of records per second >= 0 (fractions allowed, e.g. 0.5)");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice::topologies;
  static constexpr sluice::config_key keys[] = {
      {"application.id", "sluice-overflow-buffer",
       "Names the job: the consumer group, the prefix of internal topics and the state folder."},
      {"processing.error.handler", "dead_letter",
       "fail, log_and_continue or dead_letter: what to do when a processor throws on a record "
       "(this job: dead_letter, so a malformed record never stops it)."},
      {"input.topic", "notifications",
       "Topic of records to rate-limit: key = customer id, value = a JSON object "
       "(optional fields ttl_ms, deliver_at_ms), passed through unchanged."},
      {"output.topic", "push-out",
       "Topic emitted records go to (timestamp = emission time, headers "
       "sluice-overflow-input-timestamp and sluice-overflow-delay-ms added)."},
      {"rates.topic", "customer-rates",
       "Compacted topic of customer rates: key = customer id, value = "
       "{\"rate_per_second\": r}; read in full as a global table."},
      {"expired.topic", "notifications-expired",
       "Topic expired records go to with the sluice-overflow-expired "
       "header; empty = drop and count them."},
      {"overflow.default.rate.per.second", "10",
       "Rate of customers absent from the rates table (>= 0, fractions "
       "allowed; 0 holds everything)."},
      {"overflow.default.ttl.ms", "21600000",
       "A record expires this long after its input timestamp (after "
       "deliver_at_ms if scheduled), or after its own ttl_ms if smaller."},
      {"overflow.drain.interval.ms", "100", "How often the buffer drains (wall clock), 1 .. 60000."},
      {"overflow.alarm.interval.ms", "300000", "A customer's backlog alarm repeats at most this often."},
      {"overflow.top.backlogs", "10", "How many of the largest backlogs get per-rank gauges, 0 .. 1000."},
  };
  try {
    sluice::config::declare_keys(keys);
    auto line = sluice::config::from_args(argc, argv,
                                          "Overflow buffer: a per-customer output rate; the excess is buffered "
                                          "durably and drained at that rate.");
    if (line.action == sluice::command_line::request::print_help) {
      std::cout << line.help;
      return 0;
    }
    auto cfg = std::move(line.settings);  // with this job's defaults above (a malformed value is dead-lettered)

    overflow_buffer_options o;
    o.default_rate_per_second = parse_rate_property(cfg.get("overflow.default.rate.per.second").value_or("10"));
    o.default_ttl = std::chrono::milliseconds(cfg.get_int("overflow.default.ttl.ms", 1, 365LL * 24 * 3600 * 1000));
    o.drain_interval = std::chrono::milliseconds(cfg.get_int("overflow.drain.interval.ms", 1, 60'000));
    o.alarm_interval =
        std::chrono::milliseconds(cfg.get_int("overflow.alarm.interval.ms", 0, 365LL * 24 * 3600 * 1000));
    o.top_backlogs = static_cast<std::size_t>(cfg.get_int("overflow.top.backlogs", 0, 1000));
    o.rates_topic = cfg.get("rates.topic").value_or("");

    sluice::app app(
        overflow_buffer_job_topology(cfg.get("input.topic").value_or(""), cfg.get("output.topic").value_or(""),
                                     cfg.get("expired.topic").value_or(""), o),
        cfg);
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice-overflow-buffer: {}", e.what());
    return 1;
  }
}
