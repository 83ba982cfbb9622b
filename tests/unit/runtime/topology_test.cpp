// Building topologies: sub-topologies, validation errors.
#include <gtest/gtest.h>

#include "sluice/builder.hpp"
#include "sluice/error.hpp"

TEST(topology, nodes_sharing_a_store_form_one_subtopology) {
  sluice::streams_builder b;
  auto t = b.table<std::string, std::string>("table", "t");
  b.stream<std::string, std::string>("s")
      .join(t, [](const std::string& a, const std::string& c) { return a + c; })
      .to("o");
  b.stream<std::string, std::string>("other").to("o2");
  auto topo = b.build();
  ASSERT_EQ(topo.subtopologies().size(), 2u);
  auto& first = topo.subtopologies()[0];
  EXPECT_EQ(first.source_topics.size(), 2u);
  EXPECT_EQ(first.stores, std::vector<std::string>{"t"});
}

TEST(topology, a_store_used_but_never_declared_is_named_in_the_error) {
  struct noop : sluice::processor<std::string, std::string> {
    void process(const sluice::record<std::string, std::string>&) override {}
  };
  sluice::streams_builder b;
  b.stream<std::string, std::string>("s").process([] { return std::make_unique<noop>(); }, "missing-store");
  try {
    b.build();
    FAIL();
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), sluice::errc::invalid_topology);
    EXPECT_NE(std::string(e.what()).find("missing-store"), std::string::npos);
  }
}

TEST(topology, a_topic_read_twice_is_rejected) {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("s").to("a");
  b.stream<std::string, std::string>("s").to("b");
  EXPECT_THROW(b.build(), sluice::error);
}
