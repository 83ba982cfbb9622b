// sluice::error: the one exception type that lifecycle and configuration failures throw.
//
// Per-record failures never throw through the poll loop: they go to the configured
// handler (see config.hpp) and are counted. What does throw is meant for a person: the
// message names the problem and the fix ("topic 'a' has 4 partitions but 'b' has 3;
// co-partitioned sources need equal counts").
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace sluice {

/// What went wrong, coarsely. Tests assert on these, users switch on them.
enum class errc {
  ok = 0,
  invalid_config,       ///< a property is unknown, malformed or out of range
  invalid_topology,     ///< the topology cannot run as built (missing store, bad wiring)
  kafka,                ///< librdkafka reported an error (see kafka flags on the error)
  kafka_fatal,          ///< librdkafka raised a fatal error: the client must be recreated
  transaction_aborted,  ///< the transaction had to be aborted; state was rolled back
  fenced,               ///< another instance took over our transactional id
  serialization,        ///< a value could not be encoded or decoded
  processing,           ///< a processor failed on a record (processing.error.handler=fail)
  state,                ///< a state store failed (I/O, corruption, lock held elsewhere)
  timeout,              ///< an operation did not finish in its time budget
  io,                   ///< a file could not be read or written
};

/// The std::error_category of sluice::errc.
const std::error_category& sluice_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), sluice_category()}; }

/// Flags librdkafka attaches to an error; kept so callers can decide to retry, abort a
/// transaction or recreate the client without parsing messages.
struct kafka_flags {
  int code = 0;                     ///< rd_kafka_resp_err_t value; 0 when not from Kafka
  bool fatal = false;               ///< the client instance is unusable
  bool retriable = false;           ///< the same call may succeed later
  bool txn_requires_abort = false;  ///< abort the current transaction, then go on
};

/// The exception sluice throws. Carries an errc and, for Kafka errors, librdkafka's flags.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message, kafka_flags flags = {})
      : std::runtime_error(message), code_(code), flags_(flags) {}

  errc code() const noexcept { return code_; }
  const kafka_flags& kafka() const noexcept { return flags_; }

 private:
  errc code_;
  kafka_flags flags_;
};

/// A record key as error messages and log lines show it, safe for a terminal and bounded:
/// quoted, printable ASCII as is, other bytes (and '\') as \xNN, at most 100 bytes then
/// "..."; a null key as null. Stateless; safe from any thread.
std::string printable_key(const std::optional<std::string_view>& key);

/// Whether printable_key shows `key` unchanged between its quotes: at most 100 bytes of
/// printable ASCII other than '\'. A log line may then show the key bare. Stateless.
bool printable_as_is(std::string_view key);

}  // namespace sluice

template <>
struct std::is_error_code_enum<sluice::errc> : std::true_type {};
