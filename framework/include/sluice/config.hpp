// sluice::config: a job's configuration, read like Kafka's: a .properties file plus
// `--set key=value` overrides.
//
// Keys sluice owns (application.id, processing.guarantee, ...) are listed in
// config::known_keys() with their default and meaning, and validated when read. Every
// other key passes through to librdkafka: bare keys go to every client, `consumer.`,
// `producer.` and `admin.` prefixed keys only to that client. A key neither sluice nor
// librdkafka knows is rejected when the job starts, with its name.
//
// Thread-safety: a config is a value; copies are independent. Not synchronized.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct command_line;

/// What happens to a record that fails (the *.error.handler keys, docs/configuration.md).
enum class error_policy {
  fail,              ///< stop the job with a clear message
  log_and_continue,  ///< skip the record, count it, log a sample
  dead_letter,       ///< send the original bytes to the dead-letter topic, count it
};

enum class processing_guarantee { at_least_once, exactly_once };

/// One key sluice owns: its name, default ("" = none) and meaning, for validation and docs.
struct config_key {
  std::string_view name;
  std::string_view default_value;
  std::string_view meaning;
};

class config {
 public:
  config() = default;

  /// Reads a .properties file (`key=value`, `key: value`, `#`/`!` comments, `\` continuation).
  /// Throws sluice::error(errc::io) when the file cannot be read, naming it.
  static config from_file(const std::filesystem::path& path);

  /// Parses properties text; `origin` names it in error messages.
  static config from_string(std::string_view text, std::string_view origin = "<string>");

  /// Reads `--config FILE` (optional) and any number of `--set key=value` from a job's
  /// command line. `--help` (or `-h`) asks for the usage and the key reference: the result
  /// carries it for the job's main to print (the library never exits the process).
  /// Throws sluice::error(errc::invalid_config) on a malformed argument.
  static command_line from_args(int argc, const char* const* argv, std::string_view program_summary = {});

  /// Sets (or overrides) one key. Returns *this for chaining.
  config& set(std::string key, std::string value);

  /// The value of `key`, or the documented default for a sluice key, or nullopt.
  std::optional<std::string> get(std::string_view key) const;
  /// Like get, but a missing key throws errc::invalid_config naming the key.
  std::string require(std::string_view key) const;
  bool contains(std::string_view key) const { return values_.contains(std::string(key)); }

  /// Typed reads; a malformed value throws errc::invalid_config naming key, value and
  /// what is allowed. For sluice's own numeric keys (poll.ms, commit.interval.ms, ...) the
  /// range is also limited to what the runtime can honour (docs/configuration.md); such a
  /// key needs no range of its own here.
  std::int64_t get_int(std::string_view key, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  std::chrono::milliseconds get_ms(std::string_view key) const;
  /// A comma-separated list ("a, b,c"), each item trimmed of spaces and tabs; absent or blank
  /// gives an empty list. An empty item ("a,,b", "a,") throws errc::invalid_config naming
  /// the key and the value, followed by `advice` (what the list should hold).
  std::vector<std::string> get_list(std::string_view key, std::string_view advice) const;
  /// Reads every numeric sluice key (poll.ms, commit.interval.ms, max.poll.records, ...)
  /// and throws errc::invalid_config for the first one out of its range, naming the key,
  /// the value, the range and why.
  void validate_numbers() const;
  error_policy get_error_policy(std::string_view key) const;

  // The sluice keys, read and validated.
  std::string application_id() const;
  processing_guarantee guarantee() const;
  /// 30 s, or 100 ms under exactly-once. Under exactly-once without
  /// producer.transaction.timeout.ms at most 450000 (the broker's default
  /// transaction.max.timeout.ms is twice that).
  std::chrono::milliseconds commit_interval() const;
  /// The producers' transaction.timeout.ms under exactly-once: producer.transaction.timeout.ms
  /// when set, else max(10000, 2 x commit_interval()). A crashed instance's open transaction
  /// holds back read_committed reads until the broker aborts it this long after it began.
  std::chrono::milliseconds transaction_timeout() const;
  int num_stream_threads() const;
  std::filesystem::path state_dir() const;
  std::string bootstrap_servers() const;
  bool embedded() const { return bootstrap_servers() == "embedded"; }
  std::string dead_letter_topic() const;  ///< default <application.id>-dlq
  /// max.task.idle.ms: -1 (never wait) or the milliseconds a task reading several partitions
  /// waits for a caught-up empty one before processing the others (docs/configuration.md).
  std::int64_t max_task_idle_ms() const;
  std::string instance_id() const;  ///< stable per host and state.dir unless set

  /// Properties for one librdkafka client: bare non-sluice keys plus `<client>.` keys
  /// with the prefix removed. `client` is "consumer", "producer" or "admin".
  std::map<std::string, std::string> client_properties(std::string_view client) const;

  /// Every key as set, sluice's and librdkafka's alike.
  const std::map<std::string, std::string>& values() const noexcept { return values_; }

  /// The keys sluice owns, with defaults and meanings (the configuration reference).
  static std::span<const config_key> known_keys();
  /// Declares keys a job adds (a topology's `input.topic`, `throttle.limit`, ...) so they
  /// are validated, documented by --help and never passed to librdkafka. Call before
  /// reading the configuration; the views must outlive the process (use literals). A job
  /// may declare a sluice key again to give it another default (a job that must not stop
  /// on a bad record: `processing.error.handler` = dead_letter): --help shows the job's
  /// default and meaning, and from_args() sets it when neither the file nor --set does.
  static void declare_keys(std::span<const config_key> keys);
  /// The keys declared by the job (see declare_keys).
  static std::span<const config_key> declared_keys();
  /// True when `key` is one of known_keys() or declared_keys().
  static bool is_sluice_key(std::string_view key);

 private:
  std::map<std::string, std::string> values_;
};

/// What a job's command line asks for (config::from_args): run with `settings`, or print
/// `help` and exit 0. Acting on it is the job's main's business:
///
///   auto args = sluice::config::from_args(argc, argv, "My job.");
///   if (args.action == sluice::command_line::request::print_help) {
///     std::cout << args.help;
///     return 0;
///   }
///   sluice::app app(topology, std::move(args.settings));
struct command_line {
  enum class request { run, print_help };
  request action = request::run;  ///< Default: run
  config settings;                ///< the file and --set overrides (action == run)
  std::string help;               ///< usage and key reference (action == print_help)
};

}  // namespace sluice
