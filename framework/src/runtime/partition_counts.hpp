// How many partitions the sub-topologies and repartition topics of a topology have: one of
// app::start()'s steps, apart so it can be tested without a cluster.
#pragma once

#include <map>
#include <string>

#include "sluice/topology.hpp"

namespace sluice::runtime {

/// Completes `sub_partitions` (sub-topology id -> partition count, known for those with an
/// external source) with the sub-topologies that read only repartition topics, and returns
/// each repartition topic's count (by its name in the graph): a repartition topic has the
/// count of the sub-topology that writes it. Iterates until nothing new is learned, so
/// chains of any length resolve. Throws sluice::error(errc::invalid_topology) naming a
/// sub-topology whose count cannot be determined (instead of creating 0 partitions).
std::map<std::string, int> infer_repartition_partitions(const topology& topo, std::map<int, int>& sub_partitions);

}  // namespace sluice::runtime
