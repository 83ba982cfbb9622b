// librdkafka configuration: properties pass through unchanged, failures name the key, and
// every client logs through spdlog's "rdkafka" logger.
#pragma once

#include <librdkafka/rdkafka.h>
#include <spdlog/logger.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "kafka/handles.hpp"

namespace sluice::kafka {

/// librdkafka properties, key → value, exactly as librdkafka documents them
/// (CONFIGURATION.md). Nothing is renamed or filtered.
using config_map = std::map<std::string, std::string>;

/// The spdlog logger librdkafka's own log lines go to ("rdkafka"; created on first use
/// as a clone of the default logger, or taken from spdlog's registry if registered).
std::shared_ptr<spdlog::logger> rdkafka_logger();

/// The logger this layer's own lifecycle lines go to ("sluice.kafka").
std::shared_ptr<spdlog::logger> layer_logger();

/// A new conf with every property of `config` set and log_cb installed. Throws
/// sluice::error(errc::invalid_config) naming the key, the value (redacted for secrets)
/// and librdkafka's reason.
conf_ptr make_conf(const config_map& config);

/// True when librdkafka knows `name` as a global or topic property (whatever its value).
bool is_librdkafka_property(std::string_view name);

/// The names of librdkafka's global and topic properties (for typo suggestions).
const std::vector<std::string>& librdkafka_property_names();

/// Sets one property on `conf`; throws like make_conf.
void set_property(rd_kafka_conf_t* conf, const std::string& key, const std::string& value);

/// rd_kafka_new: takes ownership of `conf` only on success (on failure `conf` is destroyed
/// by the conf_ptr); throws errc::invalid_config with librdkafka's reason.
handle_ptr new_handle(rd_kafka_type_t type, conf_ptr conf);

/// Value of `key` in `config`, or nullptr.
const std::string* find(const config_map& config, std::string_view key);

/// Limits repeated error lines to one per distinct code per interval (default 10 s).
/// Thread-safe.
class log_throttle {
 public:
  explicit log_throttle(std::chrono::steady_clock::duration interval = std::chrono::seconds(10))
      : interval_(interval) {}
  /// True when a line for `code` may be logged now (and records that it was).
  bool should_log(int code);

 private:
  std::chrono::steady_clock::duration interval_;
  std::mutex mutex_;
  std::map<int, std::chrono::steady_clock::time_point> last_;
};

}  // namespace sluice::kafka
