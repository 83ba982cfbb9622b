// See config_checks.hpp.
#include "runtime/config_checks.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "http/instance_server.hpp"
#include "kafka/config.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {
namespace {

/// RocksDB's smallest workable block cache plus write buffers (state/src/rocksdb_environment.cpp).
constexpr std::int64_t min_state_memory_budget = std::int64_t{8} << 20;

/// Consumer settings the runtime owns: a user value that differs would silently break
/// offsets, the group or the guarantee, so it is refused with what to do instead.
void refuse_consumer_overrides(const config& cfg) {
  const auto consumer = cfg.client_properties("consumer");
  auto value = [&](const char* key) -> const std::string* {
    auto it = consumer.find(key);
    return it == consumer.end() ? nullptr : &it->second;
  };
  auto refuse = [](const std::string& key, const std::string& v, const std::string& why) {
    throw error(errc::invalid_config, "configuration key '" + key + "' has value '" + v + "': " + why);
  };
  const auto app_id = cfg.application_id();
  if (const auto* v = value("group.id"); v && *v != app_id)
    refuse("group.id", *v,
           "the consumer group of a sluice job is its application.id ('" + app_id +
               "'); remove group.id, or set application.id=" + *v + " to join that group");
  for (const char* key : {"enable.auto.commit", "enable.auto.offset.store"})
    if (const auto* v = value(key); v && *v != "false")
      refuse(key, *v,
             "sluice commits input offsets itself, together with its stores (and inside its transactions under "
             "exactly_once); remove it");
  if (const auto* v = value("partition.assignment.strategy"); v && v->find("cooperative") != std::string::npos)
    refuse("partition.assignment.strategy", *v,
           "stream threads rebalance eagerly (every task closes on a revocation) and librdkafka 2.0.2's "
           "cooperative-sticky assignor loses and duplicates assignments; use range (the default) or roundrobin");
  if (const auto* v = value("isolation.level");
      v && *v != "read_committed" && cfg.guarantee() == processing_guarantee::exactly_once)
    refuse("isolation.level", *v, "exactly_once reads its inputs read_committed; remove it");
}

/// replication.factor: -1 (the broker's default) or 1 .. 32767.
int internal_replication_factor_of(const config& cfg) {
  const auto r = cfg.get_int("replication.factor", -1, 32767);
  if (r == 0)
    throw error(errc::invalid_config,
                "configuration key 'replication.factor' has value '0'; allowed: -1 (the "
                "broker's default.replication.factor) or 1 to 32767");
  return static_cast<int>(r);
}

/// Levenshtein distance, for typo suggestions (keys are short).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

constexpr std::array<std::string_view, 3> client_prefixes = {"consumer.", "producer.", "admin."};

/// Every key set that is neither sluice's nor librdkafka's is refused before librdkafka sees
/// it, so a sluice key's typo never reads as a librdkafka error.
void refuse_unknown_keys(const config& cfg) {
  for (const auto& [key, value] : cfg.values()) {
    if (config::is_sluice_key(key) || key == "bootstrap.servers") continue;
    std::string_view bare = key;
    for (auto prefix : client_prefixes)
      if (bare.starts_with(prefix)) bare.remove_prefix(prefix.size());
    if (kafka::is_librdkafka_property(bare)) continue;
    std::string message = "unknown configuration key '" + key + "': neither sluice nor librdkafka knows it";
    if (auto guess = closest_known_key(bare); !guess.empty())
      message += "; did you mean '" + guess + "'?";
    else
      message += "; `--help` lists sluice's keys, librdkafka's are in its CONFIGURATION.md";
    throw error(errc::invalid_config, message);
  }
}

}  // namespace

int internal_replication_factor(const config& cfg) { return internal_replication_factor_of(cfg); }

std::int64_t state_memory_budget(const config& cfg) {
  return cfg.get_int("state.memory.budget.bytes", min_state_memory_budget, std::int64_t{1} << 40);
}

std::string closest_known_key(std::string_view key) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, key.size() / 6) + 1;
  auto consider = [&](std::string_view candidate) {
    const auto d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  };
  for (const auto& k : config::known_keys()) consider(k.name);
  for (const auto& k : config::declared_keys()) consider(k.name);
  for (const auto& name : kafka::librdkafka_property_names()) consider(name);
  return best;
}

void validate_config(const config& cfg) {
  refuse_unknown_keys(cfg);
  cfg.application_id();
  cfg.guarantee();
  cfg.commit_interval();
  cfg.num_stream_threads();
  cfg.validate_numbers();
  cfg.get_error_policy("deserialization.error.handler");
  cfg.get_error_policy("processing.error.handler");
  if (cfg.get_error_policy("production.error.handler") == error_policy::dead_letter)
    throw error(
        errc::invalid_config,
        "configuration key 'production.error.handler' has value 'dead_letter'; allowed: fail or log_and_continue");
  state_memory_budget(cfg);
  internal_replication_factor_of(cfg);
  for (const char* client : {"consumer", "producer", "admin"}) {
    auto props = cfg.client_properties(client);
    props.erase("bootstrap.servers");
    kafka::make_conf(props);  // throws naming an invalid librdkafka value
  }
  refuse_consumer_overrides(cfg);
  http::options_from_config(cfg);
}

}  // namespace sluice::runtime
