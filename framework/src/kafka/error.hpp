// Turning librdkafka errors into sluice::error, keeping the fatal / retriable /
// abort-transaction flags so callers decide without parsing messages.
#pragma once

#include <librdkafka/rdkafka.h>

#include <string_view>

#include "sluice/error.hpp"

namespace sluice::kafka {

/// The errc a librdkafka error maps to: fenced codes → errc::fenced, then fatal →
/// errc::kafka_fatal, abort-required → errc::transaction_aborted, _TIMED_OUT →
/// errc::timeout, anything else → errc::kafka.
errc classify(rd_kafka_resp_err_t code, const kafka_flags& flags) noexcept;

/// A sluice::error from a librdkafka error object (not consumed; the caller still owns
/// it). Message: "<context>: <reason> (<error name>)" plus a hint for common causes.
sluice::error make_error(const rd_kafka_error_t* err, std::string_view context = {});

/// A sluice::error from a bare code. `flags.code` is overwritten with `code`; the other
/// flags are kept as given (bare codes carry none of their own). `reason` replaces
/// librdkafka's generic string for the code when not empty.
sluice::error make_error(rd_kafka_resp_err_t code, std::string_view context, kafka_flags flags = {},
                         std::string_view reason = {});

/// The fatal error of `rk` (rd_kafka_fatal_error) as a sluice::error with fatal=true;
/// `fallback` is used if the handle reports none.
sluice::error make_fatal_error(rd_kafka_t* rk, std::string_view context,
                               rd_kafka_resp_err_t fallback = RD_KAFKA_RESP_ERR__FATAL);

/// Takes ownership of `err`; throws make_error(err, context) when it is not null.
void throw_if(rd_kafka_error_t* err, std::string_view context);

/// Throws make_error(code, context) when `code` is not RD_KAFKA_RESP_ERR_NO_ERROR.
void throw_if(rd_kafka_resp_err_t code, std::string_view context);

/// A hint a user can act on for common codes, or an empty view.
std::string_view hint_for(rd_kafka_resp_err_t code) noexcept;

}  // namespace sluice::kafka
