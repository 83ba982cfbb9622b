// The overflow buffer's HTTP endpoints: GET /overflow/backlog and GET /overflow/customers/{c},
// read from the buffer and customer stores through the app's interactive queries (on the
// stream thread owning each partition, committed state). A customer asked of an instance that
// does not run its partition is forwarded to the one that does (store_access::forward, one
// hop); the backlog gathers the partitions of the other instances from their owners, one
// request per owner. See README.md, "HTTP".
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "sluice/http_headers.hpp"
#include "sluice/topologies/overflow_buffer.hpp"

namespace sluice::topologies {
namespace {

using overflow_detail::buffered_record;

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

/// What orders a backlog: a row's buffered count and customer id.
std::pair<std::uint64_t, std::string_view> backlog_order(const backlog_row& row) {
  return {row.buffered(), row.customer};
}
std::pair<std::uint64_t, std::string> backlog_order(const nlohmann::json& row) {
  return {row["buffered"].get<std::uint64_t>(), row["customer"].get<std::string>()};
}

/// Keeps the `limit` largest backlogs of `rows` (rows read here, or answered by other
/// instances as JSON), largest first; ties by customer id, so every instance orders a merge
/// the same way.
template <class Row>
void keep_largest(std::vector<Row>& rows, std::size_t limit) {
  const std::size_t n = std::min(limit, rows.size());
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n), rows.end(),
                    [](const Row& a, const Row& b) {
                      const auto x = backlog_order(a), y = backlog_order(b);
                      return x.first != y.first ? x.first > y.first : x.second < y.second;
                    });
  rows.resize(n);
}

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

// Fills each row's rate with the one that applies to the customer now, as the processor
// reads it: its entry in the rates table, or the default when it has none or an invalid one.
void fill_rates(detail::task_context& context, const overflow_buffer_options& o,
                const std::vector<backlog_row*>& rows) {
  if (o.rates_topic.empty()) {
    for (auto* row : rows) row->rate = o.default_rate_per_second;
    return;
  }
  global_store_view<std::string, std::string> rates(context.global_store(o.rates_store));
  for (auto* row : rows) {
    const auto raw = rates.get(row->customer);
    const auto parsed = raw ? overflow_detail::parse_rate(*raw) : std::nullopt;
    row->rate = parsed.value_or(o.default_rate_per_second);
  }
}

/// The backlog of the partitions this instance runs: the `limit` largest, with their rates.
struct local_backlog {
  std::vector<backlog_row> rows;
  std::vector<std::int32_t> local, not_local, unavailable;
  std::vector<std::int32_t> timed_out;    ///< local partitions whose read timed out (the budget's rest)
  std::optional<http::response> refusal;  ///< a failure that is not about where a partition is
};

/// The one time budget of a backlog request: every read and ask takes at most what is left.
class request_budget {
 public:
  explicit request_budget(const backlog_gather_limits& limits)
      : limits_(limits), deadline_(limits.clock() + limits.budget) {}
  std::chrono::milliseconds remaining() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - limits_.clock());
    return std::max(left, std::chrono::milliseconds(0));
  }
  /// A local read's timeout: the queries' default, or what is left when that is less.
  std::chrono::milliseconds read_timeout() const { return std::min(interactive_queries::default_timeout, remaining()); }
  /// Whether an ask of another instance (bounded by the forwarding's own timeout) still fits.
  bool ask_fits() const { return remaining() >= limits_.ask_bound; }

 private:
  const backlog_gather_limits& limits_;
  std::chrono::steady_clock::time_point deadline_;
};

std::string budget_text(const backlog_gather_limits& limits) { return std::to_string(limits.budget.count()) + " ms"; }

local_backlog read_local_backlog(interactive_queries& q, const overflow_buffer_options& o, std::size_t limit,
                                 const request_budget& budget) {
  local_backlog out;
  const auto all = q.every_partition(o.buffer_store);
  if (all.empty()) {  // the app is starting: an empty answer would read as "no backlog"
    out.refusal = http::response::error(http::status::service_unavailable,
                                        "the partitions of store '" + o.buffer_store + "' are not known yet; retry");
    out.refusal->headers.emplace_back("Retry-After", "1");
    return out;
  }
  // Every partition at once (one wait for the stream threads, not one per partition); each
  // fills its own rows.
  std::vector<std::vector<backlog_row>> found(all.size());
  auto outcomes = q.run_each<queue_store_handle>(
      o.buffer_store, all,
      [&](std::int32_t p, queue_store_handle& buffer) {
        auto& mine = found[static_cast<std::size_t>(p)];
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
        keep_largest(mine, limit);
        for (auto& row : mine) read_queues(buffer, row);
      },
      budget.read_timeout());
  for (auto& answer : outcomes) {
    const auto p = answer.partition;
    switch (answer.result) {
      case interactive_queries::outcome::done:
        out.local.push_back(p);
        for (auto& row : found[static_cast<std::size_t>(p)]) out.rows.push_back(std::move(row));
        break;
      case interactive_queries::outcome::not_local: out.not_local.push_back(p); break;
      case interactive_queries::outcome::unavailable: out.unavailable.push_back(p); break;
      case interactive_queries::outcome::timed_out: out.timed_out.push_back(p); break;
      default: out.refusal = http::store_access::refusal(answer.result, o.buffer_store, p, answer.failure); return out;
    }
  }
  keep_largest(out.rows, limit);
  std::map<std::int32_t, std::vector<backlog_row*>> by_partition;
  std::vector<std::int32_t> with_rows;
  for (auto& row : out.rows) {
    auto& members = by_partition[row.partition];
    if (members.empty()) with_rows.push_back(row.partition);
    members.push_back(&row);
  }
  // All at once again; a partition that moved since, or out of time: its rows keep the
  // default rate (unknown).
  if (!with_rows.empty() && budget.remaining().count() > 0)
    (void)q.run_bindings(
        o.customer_store, with_rows,
        [&](std::int32_t p, const detail::store_binding&, detail::task_context& context) {
          fill_rates(context, o, by_partition.at(p));
        },
        budget.read_timeout());
  return out;
}

nlohmann::json backlog_row_json(const backlog_row& row, const overflow_buffer_options& o, std::int64_t now_ms) {
  auto j = row_json(row, o, now_ms);
  j["partition"] = row.partition;
  return j;
}

std::string error_text(const http::response& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
  return r.body.substr(0, 200);
}

/// GET /overflow/backlog with scope=application: this instance's partitions, then the others
/// from their owners, one forwarded request per owner (its answer covers every partition it
/// runs), merged into the `limit` largest. What could not be asked is named in the answer,
/// never left out silently.
http::response gathered_backlog(const http::request& req, const overflow_buffer_options& o, std::size_t limit,
                                std::int64_t now_ms, const backlog_gather_limits& limits) {
  auto& stores = req.stores();
  const request_budget budget(limits);
  auto mine = read_local_backlog(stores, o, limit, budget);
  if (mine.refusal) return std::move(*mine.refusal);
  std::vector<nlohmann::json> rows;
  for (const auto& row : mine.rows) rows.push_back(backlog_row_json(row, o, now_ms));
  std::set<std::int32_t> answered(mine.local.begin(), mine.local.end());
  std::set<std::int32_t> unavailable(mine.unavailable.begin(), mine.unavailable.end());
  nlohmann::json asked = nlohmann::json::array(), unreachable = nlohmann::json::array();
  for (auto p : mine.unavailable)
    unreachable.push_back(
        {{"partition", p},
         {"error", "partition " + std::to_string(p) + " is restoring or moving on this instance; retry"}});
  for (auto p : mine.timed_out) {
    unavailable.insert(p);
    unreachable.push_back({{"partition", p},
                           {"error", "not read: its stream thread did not answer within the request's " +
                                         budget_text(limits) + "; retry"}});
  }
  for (const auto p : mine.not_local) {
    if (answered.count(p)) continue;  // its owner answered for it with an earlier partition
    if (!budget.ask_fits()) {         // an ask may take its whole bound: start none that could overrun
      unavailable.insert(p);
      unreachable.push_back({{"partition", p},
                             {"error", "not asked: the request's " + budget_text(limits) +
                                           " did not leave time to ask its owner; retry"}});
      continue;
    }
    const auto r = stores.forward(req, o.buffer_store, p);
    auto j = r.status == 200 ? nlohmann::json::parse(r.body, nullptr, false) : nlohmann::json();
    if (r.status != 200 || !j.is_object() || !j["partitions"].is_array() || !j["customers"].is_array()) {
      unavailable.insert(p);
      unreachable.push_back({{"partition", p},
                             {"status", r.status},
                             {"error", r.status == 200 ? "the owner answered malformed JSON" : error_text(r)}});
      continue;
    }
    const std::string instance(r.header(http::served_by_header).value_or("unknown"));
    std::set<std::int32_t> theirs;
    for (const auto& q : j["partitions"]) {
      if (!q.is_number_integer()) continue;
      const auto partition = q.get<std::int32_t>();
      // Only partitions this instance does not run and nobody answered yet: a partition
      // moving between two answers is counted once.
      if (std::binary_search(mine.not_local.begin(), mine.not_local.end(), partition) && !answered.count(partition))
        theirs.insert(partition);
    }
    for (auto& row : j["customers"])
      if (row.is_object() && row["partition"].is_number_integer() && row["buffered"].is_number_unsigned() &&
          row["customer"].is_string() && theirs.count(row["partition"].get<std::int32_t>()))
        rows.push_back(row);
    answered.insert(theirs.begin(), theirs.end());
    asked.push_back({{"instance", instance}, {"partitions", theirs}});
    if (!theirs.count(p)) {
      unavailable.insert(p);
      unreachable.push_back({{"partition", p},
                             {"error", "the owner " + instance + " did not answer for partition " + std::to_string(p) +
                                           " (restoring or moving there); retry"}});
    }
  }
  for (auto p : answered) unavailable.erase(p);
  if (answered.empty() && !unavailable.empty()) {
    // Nothing to show: an empty list would read as "no backlog anywhere".
    nlohmann::json body = {
        {"error", "no partition of store '" + o.buffer_store + "' could be read within the request's " +
                      budget_text(limits) + " (restoring, moving, busy or unreachable); retry"},
        {"unreachable", unreachable}};
    auto r = http::response::json(http::status::service_unavailable, dump(body));
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  keep_largest(rows, limit);
  nlohmann::json body = {{"customers", rows},        {"scope", "application"},
                         {"partitions", answered},   {"partitions_unavailable", unavailable},
                         {"instances_asked", asked}, {"unreachable", unreachable}};
  return http::response::json(http::status::ok, dump(body));
}

}  // namespace

http::response overflow_backlog_response(interactive_queries& q, const overflow_buffer_options& o, std::size_t limit,
                                         std::int64_t now_ms) {
  // This answer is often another instance's ask, which gives up after its ask bound: answer
  // within less, partially if need be, rather than not at all.
  backlog_gather_limits limits;
  limits.budget = limits.ask_bound - std::chrono::milliseconds(500);
  const request_budget budget(limits);
  auto mine = read_local_backlog(q, o, limit, budget);
  if (mine.refusal) return std::move(*mine.refusal);
  // Not read in time: unavailable for now, as the forwarding instance reports it.
  mine.unavailable.insert(mine.unavailable.end(), mine.timed_out.begin(), mine.timed_out.end());
  std::sort(mine.unavailable.begin(), mine.unavailable.end());
  nlohmann::json customers = nlohmann::json::array();
  for (const auto& row : mine.rows) customers.push_back(backlog_row_json(row, o, now_ms));
  nlohmann::json body = {{"customers", customers},
                         {"scope", "instance"},
                         {"partitions", mine.local},
                         {"partitions_not_local", mine.not_local},
                         {"partitions_unavailable", mine.unavailable}};
  return http::response::json(http::status::ok, dump(body));
}

namespace {

/// The customer's answer from this instance; `not_local` receives the partition when another
/// instance runs it (and the answer is then a 404 saying so).
http::response customer_answer(interactive_queries& q, const overflow_buffer_options& o, std::string_view customer,
                               std::int64_t now_ms, std::optional<std::int32_t>& not_local) {
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
  if (outcome == interactive_queries::outcome::not_local) not_local = *p;
  if (outcome != interactive_queries::outcome::done)
    return http::store_access::refusal(outcome, o.buffer_store, *p, failure);
  // The rate from the global table, read through a query on the customer store's partition
  // (a global store has no partition of its own; every task of the instance sees the table).
  outcome = q.run_binding(
      o.customer_store, *p,
      [&](const detail::store_binding&, detail::task_context& context) { fill_rates(context, o, {&row}); },
      interactive_queries::default_timeout, &failure);
  if (outcome == interactive_queries::outcome::not_local) not_local = *p;  // moved away between the two reads
  if (outcome != interactive_queries::outcome::done)
    return http::store_access::refusal(outcome, o.customer_store, *p, failure);
  auto j = row_json(row, o, now_ms);
  j["scheduled"] = row.scheduled;
  j["next_deliver_at_ms"] = row.next_deliver_at != 0 ? nlohmann::json(row.next_deliver_at) : nlohmann::json(nullptr);
  j["partition"] = *p;
  return http::response::json(http::status::ok, dump(j));
}

}  // namespace

http::response overflow_gathered_backlog(const http::request& req, const overflow_buffer_options& o, std::size_t limit,
                                         std::int64_t now_ms, const backlog_gather_limits& limits) {
  return gathered_backlog(req, o, limit, now_ms, limits);
}

http::response overflow_customer_response(interactive_queries& q, const overflow_buffer_options& o,
                                          std::string_view customer, std::int64_t now_ms) {
  std::optional<std::int32_t> not_local;
  return customer_answer(q, o, customer, now_ms, not_local);
}

void add_overflow_buffer_endpoints(streams_builder& builder, const overflow_buffer_options& o) {
  auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  builder.add_endpoint("/overflow/backlog", [o, wall_ms](const http::request& r) {
    http::response refusal;
    const auto limit = r.whole_number_query("limit", 10, 1, max_backlog_limit, refusal);
    if (!limit) return refusal;
    const auto scope = r.query("scope").value_or("application");
    if (scope != "application" && scope != "instance")
      return http::response::error(http::status::bad_request,
                                   "scope must be 'application' (every instance's partitions, the default) or "
                                   "'instance' (this instance's only); got '" +
                                       std::string(scope) + "'");
    // A request forwarded by another instance's gather answers for this instance only (one hop).
    if (scope == "instance" || r.header(http::forwarded_header))
      return overflow_backlog_response(r.stores(), o, *limit, wall_ms());
    return overflow_gathered_backlog(r, o, *limit, wall_ms());
  });
  builder.add_endpoint("/overflow/customers/{customer}", [o, wall_ms](const http::request& r) {
    std::optional<std::int32_t> not_local;
    auto answer = customer_answer(r.stores(), o, r.path_param("customer"), wall_ms(), not_local);
    if (not_local) return r.stores().forward(r, o.buffer_store, *not_local);
    return answer;
  });
}

}  // namespace sluice::topologies
