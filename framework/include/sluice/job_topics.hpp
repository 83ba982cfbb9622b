// Checks for a job whose topics come from its settings (input.topic, output.topic, ...): a
// topic it writes that is also one it reads sends records back into the job, and two settings
// it reads naming one topic make it read one thing as another. Both are typing slips that
// run without an error and do harm (a loop without end, a whole input copied into a table),
// so a shipped job refuses them when its topology is built.
#pragma once

#include <initializer_list>
#include <string_view>

namespace sluice {

/// A topic a job takes from a setting. An empty topic means "none" and is never checked.
struct job_topic {
  std::string_view setting;  ///< e.g. "output.topic"
  std::string_view topic;
};

/// Throws sluice::error(invalid_topology) naming both settings and the fix when a topic in
/// `written` is also in `read` (what the job writes there would come back as input), or when
/// two topics in `read` are one. Topics in `written` may share a topic with each other.
void check_job_topics(std::initializer_list<job_topic> read, std::initializer_list<job_topic> written);

}  // namespace sluice
