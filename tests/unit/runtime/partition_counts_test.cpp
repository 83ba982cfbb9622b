// app::start()'s partition-count inference on its own: repartition topics take the count
// of the sub-topology that writes them, to a fixpoint, and an undeterminable count fails.
#include "runtime/partition_counts.hpp"

#include <gtest/gtest.h>

#include "error_of.hpp"
#include "sluice/builder.hpp"
#include "sluice/error.hpp"

namespace sluice::runtime {
namespace {

/// "in" -> re-keyed and counted six times over, each count through its own repartition
/// topic: seven sub-topologies, six of them reading only a repartition topic.
topology chain_of_repartitions() {
  streams_builder b;
  auto s = b.stream<std::string, std::string>("in");
  for (int i = 0; i < 6; ++i) {
    auto name = "c" + std::to_string(i);
    s = s.select_key([](const std::string& k, const std::string&) { return k + "x"; })
            .group_by_key()
            .count(name)
            .to_stream()
            .map_values([](const std::int64_t& n) { return std::to_string(n); });
  }
  s.to("out");
  return b.build();
}

TEST(partition_counts, every_repartition_topic_of_a_long_chain_gets_the_source_count) {
  auto topo = chain_of_repartitions();
  ASSERT_EQ(topo.subtopologies().size(), 7u);
  std::map<int, int> sub_partitions{{topo.subtopologies().front().id, 5}};
  auto counts = infer_repartition_partitions(topo, sub_partitions);
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [name, count] : counts) EXPECT_EQ(count, 5) << name;
  EXPECT_EQ(sub_partitions.size(), 7u);
  for (const auto& [sub, count] : sub_partitions) EXPECT_EQ(count, 5) << "sub-topology " << sub;
}

TEST(partition_counts, a_sub_topology_whose_count_cannot_be_determined_fails_naming_it) {
  auto topo = chain_of_repartitions();
  std::map<int, int> nothing_known;  // as if the external source's count were unknown
  auto what = test::error_of([&] { infer_repartition_partitions(topo, nothing_known); }, errc::invalid_topology);
  EXPECT_NE(what.find("sub-topology 0 reads 'in'"), std::string::npos) << what;
  EXPECT_NE(what.find("partition count cannot be determined"), std::string::npos) << what;
}

}  // namespace
}  // namespace sluice::runtime
