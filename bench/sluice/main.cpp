// sluice-bench-job: the sluice contender of bench/run. Runs until SIGTERM like any job.
//
//   sluice-bench-job --workload passthrough|count --input T --output T [--report-running]
//                    [--log-level warn|info|debug] [--config F] [--set k=v]...
//
// passthrough: map each value (ASCII upper-case) and write it out, key kept.
// count: count per key into a RocksDB store with a changelog ("bench-counts"), emit each
// updated count (int64, big-endian) keyed by the input key.
// --report-running: when the app first reaches `running`, print one JSON line to stdout,
// {"running":true,"restored":N} with N the changelog records restored before it (bench/run's
// restart workload times start-to-running by it).
// --log-level: spdlog's level (default warn: the job's own logging stays out of the figures).
#include <atomic>
#include <utility>
#include <iostream>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace {

std::string upper(const std::string& v) {
  std::string out(v);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload = "passthrough", input, output;
  bool report_running = false;
  std::string log_level = "warn";
  std::vector<const char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "--workload")
      workload = argv[++i];
    else if (i + 1 < argc && a == "--input")
      input = argv[++i];
    else if (i + 1 < argc && a == "--output")
      output = argv[++i];
    else if (a == "--report-running")
      report_running = true;
    else if (i + 1 < argc && a == "--log-level")
      log_level = argv[++i];
    else
      rest.push_back(argv[i]);
  }
  if (input.empty() || output.empty() || (workload != "passthrough" && workload != "count")) {
    std::fprintf(stderr,
                 "usage: %s --workload passthrough|count --input T --output T [--report-running] [--log-level L] "
                 "[--set k=v]...\n",
                 argv[0]);
    return 2;
  }
  // spdlog reads an unknown name as "off": refuse it instead of silencing the job.
  const auto level = spdlog::level::from_str(log_level);
  if (level == spdlog::level::off && log_level != "off") {
    std::fprintf(stderr, "%s: unknown --log-level '%s'; use trace, debug, info, warn, error, critical or off\n",
                 argv[0], log_level.c_str());
    return 2;
  }
  spdlog::set_level(level);
  try {
    auto args = sluice::config::from_args(static_cast<int>(rest.size()), rest.data(), "bench job");
    if (args.action == sluice::command_line::request::print_help) {
      std::cout << args.help;
      return 0;
    }
    auto cfg = std::move(args.settings);
    sluice::streams_builder b;
    if (workload == "passthrough") {
      b.stream<std::string, std::string>(input).map_values([](const std::string& v) { return upper(v); }).to(output);
    } else {
      b.stream<std::string, std::string>(input).group_by_key().count("bench-counts").to_stream().to(output);
    }
    sluice::app app(b.build(), cfg);
    std::atomic<bool> reported{false};
    if (report_running) {
      app.on_state_change([&app, &reported](sluice::app_state, sluice::app_state now) {
        if (now != sluice::app_state::running || reported.exchange(true)) return;
        std::printf("{\"running\":true,\"restored\":%.0f}\n", app.metrics().total("sluice_restored_records_total"));
        std::fflush(stdout);
      });
    }
    return app.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-bench-job: %s\n", e.what());
    return 1;
  }
}
