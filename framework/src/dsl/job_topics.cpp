#include "sluice/job_topics.hpp"

#include <string>

#include "sluice/error.hpp"

namespace sluice {

void check_job_topics(std::initializer_list<job_topic> read, std::initializer_list<job_topic> written) {
  for (auto a = read.begin(); a != read.end(); ++a) {
    if (a->topic.empty()) continue;
    for (auto b = a + 1; b != read.end(); ++b) {
      if (b->topic != a->topic) continue;
      throw error(errc::invalid_topology, std::string(b->setting) + " '" + std::string(b->topic) + "' is also " +
                                              std::string(a->setting) + ": the job would read one as the other; give " +
                                              std::string(b->setting) + " a topic of its own");
    }
  }
  for (const auto& w : written) {
    if (w.topic.empty()) continue;
    for (const auto& r : read) {
      if (r.topic != w.topic) continue;
      throw error(errc::invalid_topology,
                  std::string(w.setting) + " '" + std::string(w.topic) + "' is also " + std::string(r.setting) +
                      ": every record the job writes there would come back to it as input; give " +
                      std::string(w.setting) + " a topic of its own");
    }
  }
}

}  // namespace sluice
