// The shop's topology: the four things a team usually writes first, in one job.
//   1. orders enriched with their customer from a global table (a join)
//   2. a struct-valued aggregate per customer (orders and cents so far)
//   3. orders per customer per minute (a windowed count)
//   4. a processor with a stream-time punctuator (a running total every 10 s of order time)
#pragma once

#include <boost/hana/define_struct.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sluice/sluice.hpp"

namespace shop {

using namespace std::chrono_literals;

struct order {
  BOOST_HANA_DEFINE_STRUCT(order, (std::string, customer), (std::int64_t, amount_cents));
};
struct customer {
  BOOST_HANA_DEFINE_STRUCT(customer, (std::string, name), (std::string, tier));
};
struct enriched_order {
  BOOST_HANA_DEFINE_STRUCT(enriched_order, (std::string, customer), (std::string, tier), (std::int64_t, amount_cents));
};
struct customer_totals {
  BOOST_HANA_DEFINE_STRUCT(customer_totals, (std::int64_t, orders), (std::int64_t, amount_cents));
};

/// The topics the job reads and writes; tests may give each run its own.
struct topics {
  std::string orders = "orders";        // key: order id, value: order
  std::string customers = "customers";  // key: customer id, value: customer (compacted)
  std::string enriched = "orders-enriched";
  std::string totals = "customer-totals";
  std::string per_minute = "orders-per-minute";
  std::string running_total = "running-total";
};

/// Sums the cents of every order of its task and, every 10 s of stream time (the orders'
/// timestamps), sends the sum so far under the key "total".
class running_total : public sluice::processor<std::string, order, std::string, std::int64_t> {
 public:
  void init(context_type& ctx) override {
    processor::init(ctx);
    ctx.schedule(10s, sluice::punctuation_type::stream_time, [this](std::int64_t now) {
      context().forward(sluice::record<std::string, std::int64_t>{"total", cents_, now, {}});
    });
  }
  void process(const sluice::record<std::string, order>& r) override { cents_ += r.value.amount_cents; }

 private:
  std::int64_t cents_ = 0;
};

inline sluice::topology shop_topology(const topics& t = {}) {
  sluice::streams_builder b;
  auto customers = b.global_table<std::string, customer>(t.customers);
  auto orders = b.stream<std::string, order>(t.orders);

  orders  // 1
      .left_join(
          customers, [](const std::string&, const order& o) { return o.customer; },
          [](const order& o, const std::optional<customer>& c) {
            return enriched_order{o.customer, c ? c->tier : "unknown", o.amount_cents};
          })
      .to(t.enriched);

  auto by_customer = orders.group_by([](const std::string&, const order& o) { return o.customer; });
  by_customer  // 2
      .aggregate(
          [] {
            return customer_totals{0, 0};
          },
          [](const std::string&, const order& o, customer_totals totals) {
            totals.orders += 1;
            totals.amount_cents += o.amount_cents;
            return totals;
          },
          sluice::materialized{.name = "customer-totals"})
      .to_stream()
      .to(t.totals);

  by_customer  // 3
      .windowed_by(sluice::time_windows::of_size_and_grace(1min, 10s))
      .count("orders-per-minute")
      .to_stream()
      .to(t.per_minute);

  orders.process([] { return std::make_unique<running_total>(); }).to(t.running_total);  // 4
  return b.build();
}

}  // namespace shop
