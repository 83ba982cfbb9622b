// The checks of a configuration that need no broker, shared by sluice::app and the
// TopologyTestDriver so that a test refuses exactly what production refuses: sluice's own
// keys read and range-checked, every other key known to librdkafka (a key neither knows gets
// "did you mean ...?"), consumer settings the runtime owns refused, the HTTP settings read.
//
// Stateless free functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/config.hpp"

namespace sluice::runtime {

/// Throws sluice::error(errc::invalid_config) for the first problem, naming the key, the
/// value and the fix.
void validate_config(const config& cfg);

/// replication.factor: -1 (the broker's default) or 1 .. 32767.
int internal_replication_factor(const config& cfg);

/// state.memory.budget.bytes, range-checked.
std::int64_t state_memory_budget(const config& cfg);

/// The known key closest to `key` by edit distance among sluice's keys, the job's declared
/// keys and librdkafka's properties, when one is close enough to be a typo; "" otherwise.
std::string closest_known_key(std::string_view key);

}  // namespace sluice::runtime
