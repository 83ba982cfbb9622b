// The overflow buffer's HTTP endpoints: GET /overflow/backlog and GET /overflow/customers/{c},
// read from the buffer and customer stores through the app's interactive queries (on the
// stream thread owning each partition, committed state). See README.md, "HTTP".
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "sluice/topologies/overflow_buffer.hpp"

namespace sluice::topologies {
namespace {

using overflow_detail::buffered_record;
using overflow_detail::customer_state;

constexpr std::size_t max_backlog_limit = 1000;

struct backlog_row {
  std::string customer;
  std::int32_t partition = 0;
  std::uint64_t line = 0;
  std::uint64_t scheduled = 0;
  std::int64_t oldest_buffered_at = std::numeric_limits<std::int64_t>::max();
  std::int64_t next_deliver_at = 0;  ///< 0: nothing scheduled
  double rate = -1;
  std::uint64_t buffered() const noexcept { return line + scheduled; }
};

// Reads what the buffer holds for `customer` (its two queues' sizes and heads).
void read_queues(queue_store_handle& q, backlog_row& row) {
  const std::string line = "l" + row.customer;
  const std::string sched = "s" + row.customer;
  row.line = q.size(line);
  row.scheduled = q.size(sched);
  if (row.line > 0) {
    if (auto head = q.front(line)) row.oldest_buffered_at = buffered_record::deserialize(head->value).buffered_at;
  }
  if (row.scheduled > 0) {
    if (auto head = q.front(sched)) {
      const auto b = buffered_record::deserialize(head->value);
      row.next_deliver_at = b.deliver_at;
      row.oldest_buffered_at = std::min(row.oldest_buffered_at, b.buffered_at);
    }
  }
}

double rate_of(const backlog_row& row, const overflow_buffer_options& o) {
  return row.rate >= 0 ? row.rate : o.default_rate_per_second;
}

nlohmann::json row_json(const backlog_row& row, const overflow_buffer_options& o, std::int64_t now_ms) {
  const double rate = rate_of(row, o);
  nlohmann::json j = {{"customer", row.customer}, {"buffered", row.buffered()}, {"rate_per_second", rate}};
  j["oldest_age_ms"] = row.buffered() > 0 && row.oldest_buffered_at != std::numeric_limits<std::int64_t>::max()
                           ? nlohmann::json(std::max<std::int64_t>(0, now_ms - row.oldest_buffered_at))
                           : nlohmann::json(nullptr);
  if (row.buffered() == 0) {
    j["drain_eta_ms"] = 0;
  } else if (rate > 0) {
    j["drain_eta_ms"] = static_cast<std::int64_t>(std::ceil(static_cast<double>(row.buffered()) * 1000.0 / rate));
  } else {
    j["drain_eta_ms"] = nullptr;  // rate 0: never, until the rate changes
  }
  return j;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// Fills each row's rate from the customer store of its partition (one query per partition).
interactive_queries::outcome read_rates(interactive_queries& q, const overflow_buffer_options& o, std::int32_t partition,
                                        const std::vector<backlog_row*>& rows, std::string* failure) {
  return q.run<key_value_store<std::string, std::string>>(
      o.customer_store, partition,
      [&](key_value_store<std::string, std::string>& customers) {
        for (auto* row : rows) {
          if (auto raw = customers.get(row->customer)) row->rate = customer_state::deserialize(*raw).rate;
        }
      },
      interactive_queries::default_timeout, failure);
}

}  // namespace

http::response overflow_backlog_response(interactive_queries& q, const overflow_buffer_options& o, std::size_t limit,
                                         std::int64_t now_ms) {
  const std::int32_t partitions = q.partitions(o.buffer_store);
  std::vector<backlog_row> rows;
  nlohmann::json local = nlohmann::json::array(), not_local = nlohmann::json::array(),
                 unavailable = nlohmann::json::array();
  for (std::int32_t p = 0; p < partitions; ++p) {
    std::vector<backlog_row> mine;
    std::string failure;
    auto outcome = q.run<queue_store_handle>(
        o.buffer_store, p,
        [&](queue_store_handle& buffer) {
          // Sizes of every buffering customer of the partition (meta reads, no entries), then
          // the heads of only the `limit` largest.
          std::map<std::string, backlog_row, std::less<>> by_customer;
          for (const auto& queue : buffer.non_empty_queues()) {
            auto [it, inserted] = by_customer.try_emplace(queue.substr(1));
            if (inserted) {
              it->second.customer = it->first;
              it->second.partition = p;
            }
            (queue[0] == 'l' ? it->second.line : it->second.scheduled) = buffer.size(queue);
          }
          for (auto& [customer, row] : by_customer) mine.push_back(std::move(row));
          const std::size_t n = std::min(limit, mine.size());
          std::partial_sort(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(n), mine.end(),
                            [](const backlog_row& a, const backlog_row& b) {
                              return a.buffered() != b.buffered() ? a.buffered() > b.buffered() : a.customer < b.customer;
                            });
          mine.resize(n);
          for (auto& row : mine) read_queues(buffer, row);
        },
        interactive_queries::default_timeout, &failure);
    switch (outcome) {
      case interactive_queries::outcome::done:
        local.push_back(p);
        for (auto& row : mine) rows.push_back(std::move(row));
        break;
      case interactive_queries::outcome::not_local: not_local.push_back(p); break;
      case interactive_queries::outcome::unavailable:
      case interactive_queries::outcome::timed_out: unavailable.push_back(p); break;
      default: return http::store_access::refusal(outcome, o.buffer_store, p, failure);
    }
  }
  const std::size_t n = std::min(limit, rows.size());
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n), rows.end(),
                    [](const backlog_row& a, const backlog_row& b) {
                      return a.buffered() != b.buffered() ? a.buffered() > b.buffered() : a.customer < b.customer;
                    });
  rows.resize(n);
  std::map<std::int32_t, std::vector<backlog_row*>> by_partition;
  for (auto& row : rows) by_partition[row.partition].push_back(&row);
  for (auto& [p, members] : by_partition) {
    std::string failure;
    // A partition that moved since: its rows keep the default rate (rate unknown).
    (void)read_rates(q, o, p, members, &failure);
  }
  nlohmann::json customers = nlohmann::json::array();
  for (const auto& row : rows) customers.push_back(row_json(row, o, now_ms));
  nlohmann::json body = {{"customers", customers},
                         {"scope", "instance"},
                         {"partitions", local},
                         {"partitions_not_local", not_local},
                         {"partitions_unavailable", unavailable}};
  return http::response::json(http::status::ok, dump(body));
}

http::response overflow_customer_response(interactive_queries& q, const overflow_buffer_options& o,
                                          std::string_view customer, std::int64_t now_ms) {
  const auto p = q.partition_of(o.buffer_store, customer);
  if (!p) {
    auto r = http::response::error(http::status::service_unavailable,
                                   "the partitions of store '" + o.buffer_store + "' are not known yet; retry");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  backlog_row row;
  row.customer = std::string(customer);
  row.partition = *p;
  std::string failure;
  auto outcome = q.run<queue_store_handle>(
      o.buffer_store, *p, [&](queue_store_handle& buffer) { read_queues(buffer, row); },
      interactive_queries::default_timeout, &failure);
  if (outcome != interactive_queries::outcome::done)
    return http::store_access::refusal(outcome, o.buffer_store, *p, failure);
  std::vector<backlog_row*> one{&row};
  outcome = read_rates(q, o, *p, one, &failure);
  if (outcome != interactive_queries::outcome::done)
    return http::store_access::refusal(outcome, o.customer_store, *p, failure);
  auto j = row_json(row, o, now_ms);
  j["scheduled"] = row.scheduled;
  j["next_deliver_at_ms"] = row.next_deliver_at != 0 ? nlohmann::json(row.next_deliver_at) : nlohmann::json(nullptr);
  j["partition"] = *p;
  return http::response::json(http::status::ok, dump(j));
}

void add_overflow_buffer_endpoints(streams_builder& builder, const overflow_buffer_options& o) {
  auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  builder.add_endpoint("/overflow/backlog", [o, wall_ms](const http::request& r) {
    std::size_t limit = 10;
    if (auto v = r.query("limit")) {
      std::size_t n = 0;
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
      if (ec != std::errc() || end != v->data() + v->size() || n < 1 || n > max_backlog_limit)
        return http::response::error(http::status::bad_request,
                                     "limit must be a whole number from 1 to " + std::to_string(max_backlog_limit) +
                                         " (got '" + std::string(*v) + "')");
      limit = n;
    }
    return overflow_backlog_response(r.stores(), o, limit, wall_ms());
  });
  builder.add_endpoint("/overflow/customers/{customer}", [o, wall_ms](const http::request& r) {
    return overflow_customer_response(r.stores(), o, r.path_param("customer"), wall_ms());
  });
}

}  // namespace sluice::topologies
