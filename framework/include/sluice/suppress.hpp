// ktable::suppress: holds back a table's updates in a durable buffer and emits them later,
// as Kafka Streams 3.9's KTable#suppress.
//
//   counts.suppress(sluice::until_window_closes())      // one final result per window
//       .to_stream()
//       .to("final-counts");
//   table.suppress(sluice::until_time_limit(30s, {.max_records = 10'000, .when_full =
//   sluice::buffer_full::emit_early}));
//
// The buffer is a state store with a changelog (`<application.id>-<store>-changelog`), so
// what it holds survives restarts and, under exactly-once, commits with the outputs. See
// docs/time-and-windows.md, "Suppression", for when a record comes out.
//
// Thread-safety: values; build on one thread, like the rest of the DSL.
#pragma once

#include <string>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/detail/suppress_node.hpp"
#include "sluice/error.hpp"
#include "sluice/suppressed.hpp"
#include "sluice/windows.hpp"

namespace sluice {

template <class K, class V>
ktable<K, V> ktable<K, V>::suppress(const suppressed& how) const {
  detail::suppression_spec spec{
      .wait = how.time_to_wait(), .buffer = how.buffer(), .buffer_time = detail::suppression_time::record_timestamp};
  if (how.what() == suppressed::kind::until_window_closes) {
    if constexpr (!detail::is_windowed<K>::value && !detail::is_session_windowed<K>::value) {
      throw error(errc::invalid_topology,
                  "suppress(until_window_closes()): the table's key is not windowed; it applies to the result of a "
                  "windowed aggregation over time_windows, sliding_windows or session_windows; use "
                  "until_time_limit(...) here");
    } else {
      if (!window_grace_)
        throw error(errc::invalid_topology,
                    "suppress(until_window_closes()): the table is not the result of a windowed aggregation, so its "
                    "windows' grace is unknown; suppress the table windowed_by(...).count/reduce/aggregate returns");
      spec.wait = *window_grace_;
      spec.buffer_time = detail::suppression_time::window_end;
    }
  }
  auto& g = *g_;
  const std::string node_name = how.name().empty() ? g.name("KTABLE-SUPPRESS") : how.name();
  const std::string store = how.name().empty() ? g.name("KTABLE-SUPPRESS-STATE-STORE") : how.name() + "-store";
  // An in-memory buffer rebuilt from its changelog on start, as Kafka Streams' in-memory
  // time-ordered buffer.
  g.add_store({.name = store, .backend = store_backend::memory, .logged = true});
  auto idx = g.add({.name = node_name,
                    .kind = detail::node_kind::processor,
                    .stores = {store},
                    .parents = {node_},
                    .factory = detail::factory_of(detail::suppress_node<K, V>(store, spec))});
  // Lookups of the suppressed table (joins) read this buffer, then the table underneath.
  ktable<K, V> result(g_, idx, store_, window_grace_, std::nullopt, store_kind_);
  result.suppression_buffers_ = suppression_buffers_;
  result.suppression_buffers_.insert(result.suppression_buffers_.begin(), store);
  result.suppressed_of_ =
      "the suppressed table " +
      std::string(how.what() == suppressed::kind::until_window_closes ? "suppress(until_window_closes())"
                                                                      : "suppress(until_time_limit(...))") +
      (how.name().empty() ? "" : " named '" + how.name() + "'") + " of " + described();
  return result;
}

}  // namespace sluice
