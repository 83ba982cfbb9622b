// Parsing and validation of sluice::config: .properties text, --set overrides, the table
// of sluice's own keys, and the split of librdkafka keys per client.
#include "sluice/config.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>

#include "sluice/error.hpp"

namespace sluice {
namespace {

constexpr config_key keys[] = {
    {"application.id", "",
     "Names the job: the consumer group, the prefix of internal topics and the state folder. Required."},
    {"bootstrap.servers", "",
     "Kafka brokers, host:port[,host:port]. Required: there is no default. 'embedded' starts librdkafka's in-process "
     "mock cluster (demos and examples; it does not compact)."},
    {"processing.guarantee", "at_least_once",
     "at_least_once or exactly_once (transactions; inputs read read_committed)."},
    {"commit.interval.ms", "", "How often tasks commit. Default 30000, or 100 under exactly_once."},
    {"num.stream.threads", "1", "Stream threads per instance, each with one consumer and one producer."},
    {"state.dir", "/tmp/sluice", "Where local state stores live: <state.dir>/<application.id>/<task>/<store>."},
    {"state.memory.budget.bytes", "268435456",
     "One budget for RocksDB's block cache and write buffers, shared by every store of the process; at least 8388608 "
     "(8 MiB)."},
    {"statestore.changelog.buffer.bytes", "4194304",
     "Per task: a key-value store's changelog gets the last write per key of each commit; the task buffers up to "
     "this many key and value bytes of them before sending early. 0 sends every write at once."},
    {"statestore.read.cache.bytes", "1048576",
     "Per RocksDB key-value store: entries already written that the store keeps in memory for reads (keys, values "
     "and bookkeeping). 0 turns it off."},
    {"replication.factor", "-1",
     "Replication factor of the internal topics sluice creates (repartition, changelog, dead letter); -1 = the "
     "broker's default.replication.factor."},
    {"instance.id", "",
     "This instance's stable identity for static group membership (group.instance.id = "
     "<application.id>-<instance.id>-<thread>). Default: host name plus a hash of state.dir."},
    {"deserialization.error.handler", "fail",
     "fail, log_and_continue or dead_letter: what to do with a record whose key or value does not decode."},
    {"processing.error.handler", "fail",
     "fail, log_and_continue or dead_letter: what to do when a processor throws on a record."},
    {"production.error.handler", "fail",
     "fail or log_and_continue: what to do when Kafka rejects an output record for good (e.g. too large)."},
    {"dead.letter.topic", "",
     "Where dead_letter sends records; not a topic the topology reads. Default <application.id>-dlq."},
    {"poll.ms", "100",
     "How long a stream thread waits for records before running punctuators and commits, 0 to 10000."},
    {"max.poll.records", "1000", "Records a stream thread takes from its consumer per loop."},
    {"restore.log.interval.ms", "5000", "How often restoration logs its progress."},
    {"application.server", "",
     "host:port of this instance's HTTP server (metrics, health, queries), as other instances and clients reach it. "
     "Empty: no server."},
    {"http.bind.address", "127.0.0.1",
     "Address the HTTP server listens on (the port is application.server's). 0.0.0.0 listens on every interface."},
    {"http.auth.token", "",
     "When set, every HTTP endpoint but /health and /ready needs 'Authorization: Bearer <token>'."},
    {"http.max.connections", "512", "Open HTTP connections at most; more are closed as soon as they are accepted."},
    {"http.request.timeout.ms", "10000",
     "Time for a whole HTTP request to arrive (slow clients and idle keep-alive connections are closed after it)."},
    {"max.task.idle.ms", "0",
     "How long a task reading several partitions (joins, merges) waits, once an empty one is caught up, before it "
     "processes the others' records anyway; it always waits while the empty one has records on the broker. -1: never "
     "wait (process in arrival order)."},
    {"task.timeout.ms", "300000",
     "How long a stream thread retries after retriable failures (broker outage, leader move, fenced producer) without "
     "a successful commit before the job stops."},
};

/// The values the runtime can honour for sluice's numeric keys, and why. get_int and get_ms
/// of these keys allow only the part of the caller's range that lies within this one.
struct numeric_range {
  std::string_view key;
  std::int64_t min;
  std::int64_t max;
  std::string_view why;
};

constexpr std::int64_t int32_max = 2147483647;
/// About 35,000 years: wall time plus this never overflows.
constexpr std::int64_t max_task_idle = std::int64_t{1} << 50;

constexpr numeric_range ranges[] = {
    {"poll.ms", 0, 10000,
     "a stream thread notices shutdown (SIGTERM) and runs punctuators and commits only between polls, so a "
     "longer wait delays all three"},
    {"commit.interval.ms", 0, int32_max, "librdkafka's timeouts are 32-bit milliseconds"},
    {"restore.log.interval.ms", 1, int32_max, "librdkafka's timeouts are 32-bit milliseconds"},
    {"task.timeout.ms", 0, int32_max, "librdkafka's timeouts are 32-bit milliseconds"},
    {"max.task.idle.ms", -1, max_task_idle, "-1 turns task idling off"},
    {"max.poll.records", 1, 1000000, "a stream thread holds up to twice this many records per partition"},
    {"num.stream.threads", 1, 256, "each thread has three Kafka clients"},
    {"state.memory.budget.bytes", std::int64_t{8} << 20, std::int64_t{1} << 40,
     "RocksDB needs 8 MiB for its block cache and write buffers"},
    {"statestore.changelog.buffer.bytes", 0, std::int64_t{1} << 40, "0 turns buffering off"},
    {"statestore.read.cache.bytes", 0, std::int64_t{1} << 40, "0 turns the read cache off"},
    {"replication.factor", -1, 32767, "-1 is the broker's default.replication.factor; Kafka's limit is 32767"},
};

const numeric_range* find_range(std::string_view key) {
  for (const auto& r : ranges)
    if (r.key == key) return &r;
  return nullptr;
}

/// Under exactly_once the runtime sets transaction.timeout.ms to max(10000, 2 x
/// commit.interval.ms) unless producer.transaction.timeout.ms is set: the broker refuses a
/// transaction timeout above its transaction.max.timeout.ms (default 900000).
constexpr std::int64_t default_broker_max_transaction_timeout_ms = 900000;

std::mutex declared_mutex;
std::vector<config_key>& declared() {
  static std::vector<config_key> list;
  return list;
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\f");
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(" \t\r\f");
  return std::string(s.substr(b, e - b + 1));
}

/// The whole of `text` read as a decimal integer, or nothing when any of it is not one.
std::optional<std::int64_t> whole_integer(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

[[noreturn]] void invalid(std::string_view key, std::string_view value, std::string_view allowed) {
  throw error(errc::invalid_config, "configuration key '" + std::string(key) + "' has value '" + std::string(value) +
                                        "'; allowed: " + std::string(allowed));
}

const config_key* find_key(std::string_view name) {
  for (const auto& k : keys)
    if (k.name == name) return &k;
  std::lock_guard lock(declared_mutex);
  for (const auto& k : declared())
    if (k.name == name) return &k;
  return nullptr;
}

bool is_framework_key(std::string_view name) {
  return std::any_of(std::begin(keys), std::end(keys), [&](const config_key& k) { return k.name == name; });
}

void print_reference(std::ostream& out) {
  auto row = [&](const config_key& k) {
    out << "  " << k.name << " (default: " << (k.default_value.empty() ? "-" : k.default_value) << ")\n      "
        << k.meaning << "\n";
  };
  const auto declared = config::declared_keys();
  out << "sluice keys:\n";
  for (const auto& k : keys) {
    // A job that declares a sluice key again gives it its own default (and says why).
    auto mine = std::find_if(declared.begin(), declared.end(), [&](const config_key& d) { return d.name == k.name; });
    row(mine != declared.end() ? *mine : k);
  }
  if (std::any_of(declared.begin(), declared.end(), [](const config_key& d) { return !is_framework_key(d.name); })) {
    out << "job keys:\n";
    for (const auto& k : declared)
      if (!is_framework_key(k.name)) row(k);
  }
  out << "Any other key passes to librdkafka: bare for every client, or prefixed with\n"
         "consumer., producer. or admin. for one client.\n";
}

}  // namespace

config config::from_string(std::string_view text, std::string_view origin) {
  config c;
  std::istringstream in{std::string(text)};
  std::string line, logical;
  int number = 0, start = 0;
  while (std::getline(in, line)) {
    ++number;
    if (logical.empty()) start = number;
    std::string t = trim(line);
    if (logical.empty() && (t.empty() || t[0] == '#' || t[0] == '!')) continue;
    // A line ending in an odd number of backslashes continues on the next.
    std::size_t slashes = 0;
    while (slashes < t.size() && t[t.size() - 1 - slashes] == '\\') ++slashes;
    if (slashes % 2 == 1) {
      logical += t.substr(0, t.size() - 1);
      continue;
    }
    logical += t;
    auto sep = logical.find_first_of("=:");
    if (sep == std::string::npos) sep = logical.find_first_of(" \t");
    if (sep == std::string::npos || sep == 0)
      throw error(errc::invalid_config,
                  std::string(origin) + ":" + std::to_string(start) + ": expected 'key=value', got '" + logical + "'");
    c.set(trim(std::string_view(logical).substr(0, sep)), trim(std::string_view(logical).substr(sep + 1)));
    logical.clear();
  }
  if (!logical.empty())
    throw error(errc::invalid_config,
                std::string(origin) + ":" + std::to_string(start) + ": the last line ends in '\\' but nothing follows");
  return c;
}

config config::from_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in)
    throw error(errc::io, "cannot read configuration file '" + path.string() + "': check the path given to --config");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return from_string(buffer.str(), path.string());
}

command_line config::from_args(int argc, const char* const* argv, std::string_view summary) {
  command_line result;
  config& c = result.settings;
  std::vector<std::pair<std::string, std::string>> overrides;
  auto usage = [&](std::ostream& out) {
    out << "usage: " << (argc > 0 ? argv[0] : "job") << " [--config FILE] [--set key=value]...\n";
    if (!summary.empty()) out << summary << "\n";
    print_reference(out);
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value_of = [&](std::string_view flag) -> std::string {
      if (arg.size() > flag.size() && arg[flag.size()] == '=') return std::string(arg.substr(flag.size() + 1));
      if (i + 1 >= argc) throw error(errc::invalid_config, std::string(flag) + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::ostringstream out;
      usage(out);
      result.action = command_line::request::print_help;
      result.help = out.str();
      return result;
    } else if (arg == "--config" || arg.starts_with("--config=")) {
      auto file = from_file(value_of("--config"));
      for (auto& [k, v] : file.values_) c.values_[k] = v;
    } else if (arg == "--set" || arg.starts_with("--set=")) {
      auto kv = value_of("--set");
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw error(errc::invalid_config, "--set expects key=value, got '" + kv + "'");
      overrides.emplace_back(trim(kv.substr(0, eq)), trim(kv.substr(eq + 1)));
    } else {
      std::ostringstream out;
      usage(out);
      throw error(errc::invalid_config, "unknown argument '" + std::string(arg) + "'\n" + out.str());
    }
  }
  for (auto& [k, v] : overrides) c.set(k, v);  // --set wins over the file, whatever the order
  // The job's own defaults of sluice keys (declare_keys), where neither file nor --set chose.
  for (const auto& k : declared_keys())
    if (is_framework_key(k.name) && !c.contains(k.name)) c.set(std::string(k.name), std::string(k.default_value));
  return result;
}

config& config::set(std::string key, std::string value) {
  if (key.empty()) throw error(errc::invalid_config, "configuration key must not be empty");
  values_[std::move(key)] = std::move(value);
  return *this;
}

std::optional<std::string> config::get(std::string_view key) const {
  if (auto it = values_.find(std::string(key)); it != values_.end()) return it->second;
  if (auto* k = find_key(key); k && !k->default_value.empty()) return std::string(k->default_value);
  return std::nullopt;
}

std::string config::require(std::string_view key) const {
  auto v = get(key);
  if (!v || v->empty())
    throw error(errc::invalid_config, "configuration key '" + std::string(key) +
                                          "' is required: set it in the properties file or with --set " +
                                          std::string(key) + "=...");
  return *v;
}

std::int64_t config::get_int(std::string_view key, std::int64_t min, std::int64_t max) const {
  std::string why;
  if (const auto* r = find_range(key)) {
    min = std::max(min, r->min);
    max = std::min(max, r->max);
    why = " (" + std::string(r->why) + ")";
  }
  const auto text = require(key);
  const auto v = whole_integer(text);
  if (!v || *v < min || *v > max)
    invalid(key, text, "an integer from " + std::to_string(min) + " to " + std::to_string(max) + why);
  return *v;
}

std::chrono::milliseconds config::get_ms(std::string_view key) const {
  return std::chrono::milliseconds(get_int(key, 0, std::int64_t{1} << 50));
}

std::vector<std::string> config::get_list(std::string_view key, std::string_view advice) const {
  std::vector<std::string> items;
  const auto text = get(key).value_or("");
  constexpr std::string_view blank = " \t";
  if (text.find_first_not_of(blank) == std::string::npos) return items;
  std::string_view rest = text;
  for (;;) {
    const auto comma = rest.find(',');
    auto item = rest.substr(0, comma);
    const auto b = item.find_first_not_of(blank);
    if (b == std::string_view::npos)
      throw error(errc::invalid_config, "configuration key '" + std::string(key) + "' has value '" + text +
                                            "' with an empty item; " + std::string(advice));
    item = item.substr(b, item.find_last_not_of(blank) - b + 1);
    items.emplace_back(item);
    if (comma == std::string_view::npos) return items;
    rest.remove_prefix(comma + 1);
  }
}

void config::validate_numbers() const {
  for (const auto& r : ranges)
    if (get(r.key)) get_int(r.key, r.min, r.max);  // commit.interval.ms has no fixed default
  commit_interval();
}

error_policy config::get_error_policy(std::string_view key) const {
  auto v = require(key);
  if (v == "fail") return error_policy::fail;
  if (v == "log_and_continue") return error_policy::log_and_continue;
  if (v == "dead_letter") return error_policy::dead_letter;
  invalid(key, v, "fail, log_and_continue or dead_letter");
}

std::string config::application_id() const {
  auto id = require("application.id");
  for (char ch : id)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'))
      invalid("application.id", id, "letters, digits, '.', '_' and '-' (it names Kafka topics)");
  return id;
}

processing_guarantee config::guarantee() const {
  auto v = require("processing.guarantee");
  if (v == "at_least_once") return processing_guarantee::at_least_once;
  if (v == "exactly_once" || v == "exactly_once_v2") return processing_guarantee::exactly_once;
  invalid("processing.guarantee", v, "at_least_once or exactly_once");
}

std::chrono::milliseconds config::commit_interval() const {
  const bool exactly_once = guarantee() == processing_guarantee::exactly_once;
  if (!contains("commit.interval.ms")) return std::chrono::milliseconds(exactly_once ? 100 : 30000);
  auto interval = get_ms("commit.interval.ms");
  const auto client = client_properties("producer");
  if (exactly_once && !client.contains("transaction.timeout.ms") &&
      2 * interval.count() > default_broker_max_transaction_timeout_ms)
    invalid("commit.interval.ms", std::to_string(interval.count()),
            "at most " + std::to_string(default_broker_max_transaction_timeout_ms / 2) +
                " under exactly_once: transactions stay open for a commit interval and sluice sets "
                "transaction.timeout.ms to twice it, which the broker refuses above its "
                "transaction.max.timeout.ms (default 900000). Commit more often, or set "
                "producer.transaction.timeout.ms explicitly (at most the broker's transaction.max.timeout.ms)");
  return interval;
}

std::chrono::milliseconds config::transaction_timeout() const {
  const auto client = client_properties("producer");
  const auto set = client.find("transaction.timeout.ms");
  if (set == client.end())
    return std::chrono::milliseconds(std::max<std::int64_t>(10000, 2 * commit_interval().count()));
  const auto ms = whole_integer(set->second);
  if (!ms || *ms < 1)
    invalid("producer.transaction.timeout.ms", set->second,
            "a positive number of milliseconds, at most the broker's transaction.max.timeout.ms (default 900000)");
  return std::chrono::milliseconds(*ms);
}

int config::num_stream_threads() const { return static_cast<int>(get_int("num.stream.threads", 1, 256)); }

std::filesystem::path config::state_dir() const { return require("state.dir"); }

std::string config::bootstrap_servers() const {
  auto v = get("bootstrap.servers");
  if (!v || v->empty())
    throw error(errc::invalid_config,
                "configuration key 'bootstrap.servers' is not set: set it to your brokers (host:port[,host:port]), "
                "or to 'embedded' for librdkafka's in-process mock cluster (demos and tests; it does not compact)");
  return *v;
}

std::string config::dead_letter_topic() const {
  auto v = get("dead.letter.topic");
  return v && !v->empty() ? *v : application_id() + "-dlq";
}

std::int64_t config::max_task_idle_ms() const { return get_int("max.task.idle.ms", -1, max_task_idle); }

std::string config::instance_id() const {
  if (auto v = get("instance.id"); v && !v->empty()) return *v;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  auto dir = std::filesystem::absolute(state_dir()).lexically_normal().string();
  char hash[17];
  std::snprintf(hash, sizeof hash, "%08zx", std::hash<std::string>{}(dir)&0xffffffffu);
  return std::string(host) + "-" + hash;
}

std::map<std::string, std::string> config::client_properties(std::string_view client) const {
  static constexpr std::string_view clients[] = {"consumer.", "producer.", "admin."};
  std::map<std::string, std::string> out;
  // Bare keys first, so a client-prefixed key overrides them.
  for (const auto& [k, v] : values_) {
    if (is_sluice_key(k)) continue;
    const std::string_view key = k;  // clang 14 (the fuzz build) cannot capture a binding
    bool prefixed =
        std::any_of(std::begin(clients), std::end(clients), [&](std::string_view p) { return key.starts_with(p); });
    if (!prefixed) out[k] = v;
  }
  std::string prefix = std::string(client) + ".";
  for (const auto& [k, v] : values_)
    if (std::string_view(k).starts_with(prefix)) out[k.substr(prefix.size())] = v;
  return out;
}

std::span<const config_key> config::known_keys() { return keys; }

void config::declare_keys(std::span<const config_key> more) {
  std::lock_guard lock(declared_mutex);
  for (const auto& k : more) {
    bool known =
        std::any_of(declared().begin(), declared().end(), [&](const config_key& d) { return d.name == k.name; });
    if (!known) declared().push_back(k);
  }
}

std::span<const config_key> config::declared_keys() {
  std::lock_guard lock(declared_mutex);
  return declared();
}

bool config::is_sluice_key(std::string_view key) { return key != "bootstrap.servers" && find_key(key) != nullptr; }

}  // namespace sluice
