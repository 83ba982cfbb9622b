// Input for a word-count job under test: lines of three words drawn at random from a
// vocabulary, and the count of every word written so far (the reference its output must
// reach).
//
// Lifecycle: one per test, filled by the fixture's SetUp; single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sluice/client.hpp"

namespace sluice::test {

struct word_lines {
  std::vector<std::string> vocabulary;
  std::map<std::string, std::int64_t> reference;  ///< word -> times written
  int lines_fed = 0;

  /// Writes `lines` lines of three words to `topic` without a key (spread over the
  /// partitions), counts their words into the reference and flushes the writer.
  void feed(sluice::topic_writer& writer, const std::string& topic, int lines, std::mt19937& rng) {
    std::uniform_int_distribution<std::size_t> pick(0, vocabulary.size() - 1);
    for (int i = 0; i < lines; ++i) {
      std::string line;
      for (int k = 0; k < 3; ++k) {
        const auto& w = vocabulary[pick(rng)];
        line += (k ? " " : "") + w;
        ++reference[w];
      }
      writer.send_raw(topic, std::nullopt, line);
    }
    writer.flush();
    lines_fed += lines;
  }
};

}  // namespace sluice::test
