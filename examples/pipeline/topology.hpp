// The pipeline example's topology: orders in, large orders out, and a count of orders per
// customer kept in a RocksDB store with a changelog. Shared by the job and its tests.
#pragma once

#include <boost/hana/define_struct.hpp>
#include <cstdint>
#include <string>

#include "sluice/sluice.hpp"

namespace examples {

struct order {
  BOOST_HANA_DEFINE_STRUCT(order, (std::string, id), (std::string, customer), (std::int64_t, amount_cents));
};

struct large_order {
  BOOST_HANA_DEFINE_STRUCT(large_order, (std::string, id), (std::string, customer), (double, amount));
};

/// The topics the pipeline reads and writes; tests give each run its own.
struct pipeline_topics {
  std::string orders = "orders";
  std::string large_orders = "large-orders";
  std::string counts = "orders-per-customer";
};

/// orders -> filter(amount >= 100.00) -> map_values(large_order) -> large-orders
/// orders -> group_by(customer) -> count("orders-per-customer") -> orders-per-customer
inline sluice::topology pipeline_topology(const pipeline_topics& topics = {}) {
  sluice::streams_builder b;
  auto orders = b.stream<std::string, order>(topics.orders);
  orders.filter([](const std::string&, const order& o) { return o.amount_cents >= 10000; })
      .map_values([](const order& o) {
        return large_order{o.id, o.customer, o.amount_cents / 100.0};
      })
      .to(topics.large_orders);
  orders.group_by([](const std::string&, const order& o) { return o.customer; })
      .count("orders-per-customer")
      .to_stream()
      .to(topics.counts);
  return b.build();
}

}  // namespace examples
