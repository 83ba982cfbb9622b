// sluice-word-count: counts words of the lines on `input.topic` (default "lines") into a
// RocksDB store with a changelog, and writes each new count to `output.topic`.
#include <utility>
#include <iostream>
#include <spdlog/spdlog.h>

#include "word_count/topology.hpp"

int main(int argc, char** argv) {
  static constexpr sluice::config_key keys[] = {
      {"input.topic", "lines", "Topic of text lines to count words of."},
      {"output.topic", "word-counts", "Topic the counts go to (key: word, value: int64 big-endian)."},
  };
  try {
    sluice::config::declare_keys(keys);
    auto args = sluice::config::from_args(argc, argv, "Word count: a running count per word.");
    if (args.action == sluice::command_line::request::print_help) {
      std::cout << args.help;
      return 0;
    }
    auto cfg = std::move(args.settings);
    if (!cfg.contains("application.id")) cfg.set("application.id", "sluice-word-count");
    sluice::app app(examples::word_count_topology(*cfg.get("input.topic"), *cfg.get("output.topic")), cfg);
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice-word-count: {}", e.what());
    return 1;
  }
}
