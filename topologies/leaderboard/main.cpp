// sluice-leaderboard: segment leaderboards as a job. Reads efforts from `input.topic`, keeps
// per (segment, board, user) the best effort in a ranked index and writes one record per
// change of an entry to `updates.topic`. See README.md.
//
//   sluice-leaderboard --config leaderboard.properties [--set key=value]...
#include <iostream>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "sluice/sluice.hpp"
#include "sluice/topologies/leaderboard.hpp"

int main(int argc, char** argv) {
  using namespace sluice::topologies;
  static constexpr sluice::config_key keys[] = {
      {"application.id", "sluice-leaderboard",
       "Names the job: the consumer group, the prefix of internal topics and the state folder."},
      {"processing.error.handler", "dead_letter",
       "fail, log_and_continue or dead_letter: what to do when a processor throws on a record "
       "(this job: dead_letter, so a malformed record never stops it)."},
      {"deserialization.error.handler", "dead_letter",
       "fail, log_and_continue or dead_letter: what to do with a record whose key or value does not decode "
       "(this job: dead_letter)."},
      {"input.topic", "efforts", "Topic of effort events: key = segment id, value = effort JSON (see README.md)."},
      {"updates.topic", "leaderboard-updates",
       "Topic of entry changes (key = segment id, value = "
       "{segment_id, board, user_id, previous, current}); empty = none."},
      {"leaderboard.boards", "",
       "Comma-separated attributes with a board per value (<attribute>=<value>), "
       "besides overall; empty = overall only."},
      {"leaderboard.tombstone.retention.ms", "604800000",
       "How long a deleted effort's version is remembered so a "
       "late older update cannot revive it (1000 .. 31536000000)."},
  };
  try {
    sluice::config::declare_keys(keys);
    auto line = sluice::config::from_args(argc, argv,
                                          "Leaderboard: best effort per user with ranks, pages and "
                                          "neighbours per segment and board.");
    if (line.action == sluice::command_line::request::print_help) {
      std::cout << line.help;
      return 0;
    }
    auto cfg = std::move(line.settings);  // with this job's defaults above (malformed efforts never stop it)

    leaderboard_options o;
    o.boards = cfg.get_list("leaderboard.boards",
                            "use a comma-separated list of attribute names (e.g. gender,age_group), or leave it empty "
                            "for the overall board only");
    o.tombstone_retention =
        std::chrono::milliseconds(cfg.get_int("leaderboard.tombstone.retention.ms", 1000, 31'536'000'000));

    sluice::app app(
        leaderboard_job_topology(cfg.get("input.topic").value_or(""), cfg.get("updates.topic").value_or(""), o), cfg);
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("sluice-leaderboard: {}", e.what());
    return 1;
  }
}
