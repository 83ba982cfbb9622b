// sluice::topology: the built, immutable graph of a job: sources, processors, sinks, the
// stores they use, and the internal topics the runtime creates. Made by
// streams_builder::build(); run by sluice::app or sluice::testing::topology_test_driver.
//
// Nodes connected by edges or by a shared store form a sub-topology; the runtime runs one
// task per (sub-topology, partition) and names it "<sub-topology>_<partition>".
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sluice/detail/node.hpp"
#include "sluice/http.hpp"

namespace sluice {

class streams_builder;
namespace detail {
struct topology_access;
}

class topology {
 public:
  struct subtopology {
    int id = 0;
    std::vector<std::size_t> nodes;          ///< indices of its nodes in the graph, in insertion order
    std::vector<std::string> source_topics;  ///< as written; internal ones get the app prefix
    std::vector<std::string> stores;         ///< non-global stores used by its nodes
  };

  /// An empty topology; a runnable one comes from streams_builder::build().
  topology() = default;

  /// The graph in Kafka Streams' format: sub-topologies with their sources, processors,
  /// sinks and stores, then global stores and internal topics.
  std::string describe() const;
  /// The graph as Graphviz DOT (render with `dot -Tpng`).
  std::string to_dot() const;

  const std::vector<subtopology>& subtopologies() const noexcept { return subtopologies_; }
  /// HTTP endpoints the topology adds to the instance server (streams_builder::add_endpoint).
  const std::vector<http::route>& endpoints() const noexcept { return endpoints_; }
  /// The names given to repartitioned(): each is the topic
  /// <application.id>-<name>-repartition at run time.
  std::vector<std::string> repartition_topics() const;

 private:
  friend class streams_builder;
  friend struct detail::topology_access;

  topology(std::vector<detail::node_spec> nodes, std::vector<detail::store_spec> stores,
           std::vector<http::route> endpoints);
  const detail::store_spec* find_store(std::string_view name) const;

  std::vector<detail::node_spec> nodes_;
  std::vector<detail::store_spec> stores_;
  std::vector<subtopology> subtopologies_;
  std::vector<http::route> endpoints_;
};

namespace detail {

/// The runtime's and the test driver's view of a topology's type-erased graph. Not for
/// user code: the public surface of a topology is describe(), to_dot() and subtopologies().
struct topology_access {
  static const std::vector<node_spec>& nodes(const topology& t) noexcept { return t.nodes_; }
  static const std::vector<store_spec>& stores(const topology& t) noexcept { return t.stores_; }
  /// The store named `name`, or nullptr.
  static const store_spec* find_store(const topology& t, std::string_view name) { return t.find_store(name); }
  /// A topic name as the runtime sees it: a repartition node's name becomes
  /// repartition_topic(application_id, name); other topics are unchanged.
  static std::string resolve_topic(const node_spec& node, const std::string& topic, const std::string& application_id);
};

}  // namespace detail

}  // namespace sluice
