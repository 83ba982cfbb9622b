// The word count example's topology: lines in, a running count per word out.
#pragma once

#include <cctype>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace examples {

inline std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> out;
  std::string w;
  for (char ch : line) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

/// lines -> flat_map_values(words) -> group_by(word) -> count("word-counts") -> word-counts
inline sluice::topology word_count_topology(const std::string& input = "lines",
                                            const std::string& output = "word-counts") {
  sluice::streams_builder b;
  b.stream<std::optional<std::string>, std::string>(input)
      .flat_map_values([](const std::string& line) { return words_of(line); })
      .group_by([](const std::optional<std::string>&, const std::string& word) { return word; })
      .count("word-counts")
      .to_stream()
      .to(output);
  return b.build();
}

}  // namespace examples
