// librdkafka configuration and the librdkafka → spdlog log bridge.
#include "kafka/config.hpp"

#include <spdlog/spdlog.h>

#include "sluice/error.hpp"

namespace sluice::kafka {
namespace {

std::shared_ptr<spdlog::logger> named_logger(const std::string& name) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = spdlog::default_logger()->clone(name);
  spdlog::register_logger(logger);
  return logger;
}

spdlog::level::level_enum from_syslog(int level) {
  if (level <= 2) return spdlog::level::critical;
  if (level == 3) return spdlog::level::err;
  if (level == 4) return spdlog::level::warn;
  if (level <= 6) return spdlog::level::info;
  return spdlog::level::debug;
}

// Called from librdkafka's internal threads; must not throw into C.
void log_bridge(const rd_kafka_t* rk, int level, const char* facility, const char* line) {
  try {
    static const auto logger = rdkafka_logger();
    const auto lvl = from_syslog(level);
    if (!logger->should_log(lvl)) return;
    logger->log(lvl, "[{}] {}: {}", rk ? rd_kafka_name(rk) : "-", facility ? facility : "", line ? line : "");
  } catch (...) {
    // Logging failed; nothing sensible is left to do from inside librdkafka.
  }
}

bool is_secret(std::string_view key) {
  return key.find("password") != std::string_view::npos || key.find("secret") != std::string_view::npos ||
         key.find("sasl.oauthbearer.config") != std::string_view::npos;
}

}  // namespace

std::shared_ptr<spdlog::logger> rdkafka_logger() { return named_logger("rdkafka"); }
std::shared_ptr<spdlog::logger> layer_logger() { return named_logger("sluice.kafka"); }

const std::string* find(const config_map& config, std::string_view key) {
  auto it = config.find(std::string(key));
  return it == config.end() ? nullptr : &it->second;
}

bool is_librdkafka_property(std::string_view name) {
  // Setting a property on a scratch conf tells unknown names from bad values; the value
  // given ("") is never kept.
  conf_ptr scratch(rd_kafka_conf_new());
  char reason[512] = {0};
  return rd_kafka_conf_set(scratch.get(), std::string(name).c_str(), "", reason, sizeof reason) !=
         RD_KAFKA_CONF_UNKNOWN;
}

const std::vector<std::string>& librdkafka_property_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    conf_ptr conf(rd_kafka_conf_new());
    std::size_t count = 0;
    const char** pairs = rd_kafka_conf_dump(conf.get(), &count);
    for (std::size_t i = 0; i + 1 < count; i += 2) out.emplace_back(pairs[i]);
    rd_kafka_conf_dump_free(pairs, count);
    rd_kafka_topic_conf_t* topic = rd_kafka_topic_conf_new();
    pairs = rd_kafka_topic_conf_dump(topic, &count);
    for (std::size_t i = 0; i + 1 < count; i += 2) out.emplace_back(pairs[i]);
    rd_kafka_conf_dump_free(pairs, count);
    rd_kafka_topic_conf_destroy(topic);
    return out;
  }();
  return names;
}

void set_property(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
  char reason[512] = {0};
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), reason, sizeof reason) != RD_KAFKA_CONF_OK) {
    throw sluice::error(errc::invalid_config, "librdkafka rejected property '" + key + "'='" +
                                                  (is_secret(key) ? std::string("<redacted>") : value) +
                                                  "': " + reason);
  }
}

conf_ptr make_conf(const config_map& config) {
  conf_ptr conf(rd_kafka_conf_new());
  rd_kafka_conf_set_log_cb(conf.get(), &log_bridge);
  for (const auto& [key, value] : config) set_property(conf.get(), key, value);
  return conf;
}

handle_ptr new_handle(rd_kafka_type_t type, conf_ptr conf) {
  char reason[512] = {0};
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), reason, sizeof reason);
  if (!rk) {
    // conf is still ours and is destroyed by conf_ptr.
    throw sluice::error(errc::invalid_config, std::string("could not create the Kafka ") +
                                                  (type == RD_KAFKA_PRODUCER ? "producer" : "consumer") + ": " +
                                                  reason);
  }
  (void)conf.release();  // rd_kafka_new took ownership.
  return handle_ptr(rk);
}

bool log_throttle::should_log(int code) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  auto [it, inserted] = last_.try_emplace(code, now);
  if (inserted) return true;
  if (now - it->second < interval_) return false;
  it->second = now;
  return true;
}

}  // namespace sluice::kafka
