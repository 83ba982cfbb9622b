// sluice::topologies::overflow_buffer: a per-customer output rate; the excess is parked
// durably per customer and drained at that rate (seed 000's "overflow buffer"), with
// scheduled delivery, TTL and backlog alarms. See topologies/overflow_buffer/README.md.
//
// Records are keyed by customer id; values are JSON objects passed through unchanged (the
// processor reads only the optional fields `ttl_ms` and `deliver_at_ms`). A record whose
// customer has nothing buffered and a token in its bucket goes out at once (direct path);
// otherwise it joins the customer's buffer, a queue in a queue store (state/queue_store.hpp)
// keyed by input partition and offset, drained on wall-clock time at the customer's rate.
//
//   sluice::streams_builder b;
//   sluice::topologies::overflow_buffer_options o;   // defaults as in the job
//   auto out = sluice::topologies::apply_overflow_buffer(b, b.stream<bytes, bytes>("notifications"), o);
//   out.emitted.to("notifications-out");
//   if (out.expired) out.expired->to("notifications-expired");
//
// Threading: one processor per task, called from the task's thread only (as every
// processor); the drain runs in a wall-clock punctuator on the same thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/builder.hpp"
#include "sluice/http.hpp"
#include "sluice/queries.hpp"
#include "sluice/processor.hpp"
#include "sluice/queue_store.hpp"

namespace sluice::topologies {

/// Headers of an emitted record: its input timestamp (decimal ms) and how long it waited in
/// the buffer (decimal ms; 0 on the direct path).
inline constexpr std::string_view overflow_input_timestamp_header = "sluice-overflow-input-timestamp";
inline constexpr std::string_view overflow_delay_header = "sluice-overflow-delay-ms";
/// Header of an expired record: {"customer":"…","age_ms":A,"ttl_ms":T}.
inline constexpr std::string_view overflow_expired_header = "sluice-overflow-expired";

struct overflow_buffer_options {
  /// Rate of customers absent from the rates table (records per second, >= 0; 0 holds
  /// everything until a rate is set or the records expire).
  /// Default: 10.
  double default_rate_per_second = 10;

  /// A record expires this long after its input timestamp (after deliver_at_ms for a
  /// scheduled one), or after its own `ttl_ms` if that is smaller. Must be > 0.
  /// Default: 6 hours.
  std::chrono::milliseconds default_ttl{6LL * 3600 * 1000};

  /// How often (wall clock) the buffer drains. Must be within [1 ms, 60 s].
  /// Default: 100 ms.
  std::chrono::milliseconds drain_interval{100};

  /// A customer's backlog alarm (a warning log line) repeats at most this often.
  /// Default: 5 minutes.
  std::chrono::milliseconds alarm_interval{5LL * 60 * 1000};

  /// How many of the largest backlogs (per task) get a gauge labelled with their customer
  /// (sluice_overflow_top_backlog{customer}); a customer leaving them loses its series.
  /// Default: 10.
  std::size_t top_backlogs = 10;

  /// Global table of customer rates: key = customer id, value {"rate_per_second": r}.
  /// Empty = every customer gets default_rate_per_second.
  /// Default: "customer-rates".
  std::string rates_topic = "customer-rates";

  /// Expired records go to the processor's second outlet (true, with the
  /// sluice-overflow-expired header) or are dropped and counted (false).
  /// Default: true.
  bool forward_expired = true;

  /// The queue store of buffered records (RocksDB, changelogged).
  /// Default: "overflow-buffer".
  std::string buffer_store = "overflow-buffer";
  /// The key-value store of per-customer state: handled offset and token bucket.
  /// Default: "overflow-customers".
  std::string customer_store = "overflow-customers";
  /// The global store of the rates table.
  /// Default: "overflow-rates".
  std::string rates_store = "overflow-rates";

  /// apply_overflow_buffer() adds GET /overflow/backlog and GET /overflow/customers/{c} to
  /// the instance HTTP server (served when application.server is set). Turn off for a
  /// second overflow buffer in one topology (the paths would clash).
  /// Default: true.
  bool http_endpoints = true;
};

/// Throws sluice::error(errc::invalid_config) naming the bad value and its allowed range.
void validate(const overflow_buffer_options& options);

/// Declares the buffer (queue store), the customer store and, with rates_topic, the rates
/// global table. Validates the options first.
void add_overflow_buffer_stores(streams_builder& builder, const overflow_buffer_options& options);

namespace overflow_detail {

using bytes = std::optional<std::string>;

/// One buffered record as stored in the queue store.
struct buffered_record {
  std::int64_t input_timestamp = 0;
  std::int64_t offset = 0;
  std::int64_t buffered_at = 0;  ///< wall clock when it entered the buffer
  std::int64_t deliver_at = 0;   ///< 0: not scheduled
  std::int64_t ttl_ms = 0;       ///< the TTL that applies to it
  bytes value;
  sluice::headers headers;
  bool key_absent = false;  ///< the input record had no key (the customer ""): emitted without one

  /// When it expires: ttl after deliver_at (scheduled) or after the input timestamp.
  std::int64_t expires_at() const noexcept { return (deliver_at != 0 ? deliver_at : input_timestamp) + ttl_ms; }
  /// When it is due: deliver_at for scheduled records, else its input timestamp.
  std::int64_t due_at() const noexcept { return deliver_at != 0 ? deliver_at : input_timestamp; }

  void serialize(std::string& out) const;
  static buffered_record deserialize(std::string_view in);
};

/// Per customer, in the customer store: replays at or below `handled_offset` are skipped;
/// the token bucket holds `tokens` as of `refilled_at` (wall clock).
struct customer_state {
  std::int64_t handled_offset = -1;
  double tokens = 0;
  std::int64_t refilled_at = 0;
  /// The rate last applied to the customer (records/s); negative when not known yet (state
  /// written before the rate was kept, or never applied).
  double rate = -1;
  bool fresh = true;  ///< not in the store yet: starts with a full bucket

  void serialize(std::string& out) const;
  static customer_state deserialize(std::string_view in);
};

/// A customer's state as the processor holds it between commits: decoded from the customer
/// store on first use, changed in memory per record, written back at each commit.
struct live_state {
  customer_state st;
  bool dirty = false;  ///< changed since it was read or last written back
  /// What the customer store holds for the customer (nothing when stored.fresh).
  customer_state stored;
};

/// The processor's live states by customer. Entries sit in a vector, numbered in insertion
/// order (a number stays valid until clear()); an open-addressing index of (hash tag, entry
/// number) pairs, linear probing, at most half full, finds them. A lookup reads one 8-byte
/// index slot and the entry, where a node-based map reads its bucket array, the node before
/// and the node: on the direct path that lookup missed the CPU cache three times per record.
/// Lifecycle: filled by the processor, emptied at its limit and at close. Threading: the
/// task's thread.
class live_state_table {
 public:
  struct entry {
    std::string customer;
    live_state live;
  };
  /// The number of `customer`'s entry, or nullopt.
  std::optional<std::uint32_t> find(std::string_view customer) const;
  /// Adds `customer` (not present) and returns its number. References to entries are
  /// invalidated (the vector may grow); numbers are not.
  std::uint32_t insert(std::string_view customer, const live_state& live);
  entry& operator[](std::uint32_t number) noexcept { return entries_[number]; }
  std::size_t size() const noexcept { return entries_.size(); }
  void clear();

 private:
  struct slot {
    std::uint32_t tag = 0;     ///< the hash's high half
    std::uint32_t number = 0;  ///< the entry's number + 1; 0: empty
  };
  static std::uint64_t hash(std::string_view customer) noexcept;
  /// Puts entry `number` into the index (its first free slot from its hash's).
  void place(std::uint32_t number);
  void grow();
  std::vector<slot> index_;  ///< a power of two in size, or empty
  std::vector<entry> entries_;
};

/// The fields the processor reads from a value. Throws sluice::error(errc::processing) when
/// the value is not a JSON object or a field has the wrong type.
struct parsed_fields {
  std::optional<std::int64_t> ttl_ms;
  std::optional<std::int64_t> deliver_at_ms;
};
parsed_fields parse_fields(const bytes& value);

/// The rate in a rates-table value, or nullopt when it is invalid.
std::optional<double> parse_rate(std::string_view json);

/// Formats the backlog alarm line, e.g. "customer c-42: 12,000 buffered at 2/s drain in
/// 100 min; TTL 60 min: records will expire".
std::string alarm_line(std::string_view customer, std::uint64_t buffered, double rate, std::int64_t drain_ms,
                       std::int64_t ttl_ms);

/// The processor: bytes in, bytes out (first child emitted, second child expired).
class processor final : public sluice::processor<bytes, bytes> {
 public:
  explicit processor(const overflow_buffer_options& options);

  void init(context_type& ctx) override;
  void process(const record<bytes, bytes>& r) override;
  void close() override;

  /// One drain pass at wall clock `now` (the punctuator calls it).
  void drain(std::int64_t now);

 private:
  class queue_cursor;
  /// A customer with anything buffered (about 100 bytes of memory plus its name).
  struct waiting {
    std::int64_t wake_at = 0;
    std::uint64_t line = 0;       ///< entries due at once, in input order
    std::uint64_t scheduled = 0;  ///< entries held for deliver_at_ms
    std::int64_t earliest_scheduled = std::numeric_limits<std::int64_t>::max();
    /// The TTL of the line's last record (0: not known since a restart) and when it expires:
    /// the record a backlog alarm is about, since it is emitted last.
    std::int64_t line_tail_ttl_ms = 0;
    std::int64_t line_tail_expires_at = 0;
    std::uint64_t buffered() const noexcept { return line + scheduled; }
  };

  /// Live states held at most, per task: at it they are all written back and dropped before
  /// another is read (120 bytes each plus the index, at most 3 MB).
  static constexpr std::size_t live_state_limit = 16384;

  double rate_for(std::string_view customer);
  /// The number in live_ of the customer's live state (read from customers_ when it is not
  /// held); valid until live_ is emptied (at its limit, in live_state_of).
  std::uint32_t live_state_of(std::string_view customer);
  /// Makes `st` the state of live_ entry `number`.
  void save_state(std::uint32_t number, const customer_state& st);
  /// Writes the changed live states to customers_, which then commits them with the records
  /// that changed them (processor_context::before_commit; also before live_ is emptied at
  /// its limit). Under exactly-once, a state whose bucket is full again at `now`, at the
  /// rate of the stored state and with that one full too, is not written: both refill to
  /// the same burst, and the handled offset that would differ only serves at-least-once
  /// replays (under exactly-once no input below a committed state's is processed again).
  /// So a customer well under its rate costs no state write per commit.
  void write_back(std::int64_t now);
  static void refill(customer_state& st, double rate, std::int64_t now);
  /// True when the bucket, refilled to `now` at st.rate, holds its whole burst.
  static bool bucket_full(const customer_state& st, std::int64_t now);
  void emit(std::string_view customer, const buffered_record& b, std::int64_t now);
  void emit_direct(const record<bytes, bytes>& r, std::int64_t now);
  /// Fills out_ with an emitted record (key, absent when nullopt, value and headers copied
  /// into its reused buffers, the two overflow headers appended) and forwards it to the
  /// emitted child.
  void forward_emitted(std::optional<std::string_view> key, const bytes& value, const sluice::headers& headers,
                       std::int64_t now, std::int64_t input_timestamp, std::int64_t delay_ms);
  void expire(std::string_view customer, const buffered_record& b, std::int64_t now, std::int64_t ttl_ms,
              std::int64_t reference);
  void schedule_at(const std::string& customer, std::int64_t wake_at);
  /// Emits and expires what the customer can now; returns when to look again (nullopt:
  /// nothing left buffered).
  std::optional<std::int64_t> service(const std::string& customer, std::int64_t now);
  void report(std::int64_t now);
  /// Sets the gauges of the N largest backlogs (sizes: backlog and customer, reordered).
  void publish_top_backlogs(std::vector<std::pair<std::uint64_t, const std::string*>>& sizes);
  /// Removes every top-backlog series this processor set.
  void remove_top_backlogs();
  /// Re-reads the sizes of the customer's queues into its waiting entry.
  void recount(const std::string& customer, waiting& w);

  overflow_buffer_options options_;
  std::optional<queue_store_handle> buffer_;
  std::optional<key_value_store<std::string, std::string>> customers_;
  std::optional<global_store_view<std::string, std::string>> rates_;
  std::string emitted_child_, expired_child_;
  // Customers with anything buffered, and when to look at each again: the drain visits only
  // those whose time has come.
  std::unordered_map<std::string, waiting> waiting_;
  std::multimap<std::int64_t, std::string> wake_queue_;
  std::unordered_map<std::string, std::int64_t> last_alarm_;
  std::unordered_map<std::string, std::optional<double>> parsed_rates_;
  live_state_table live_;
  std::vector<std::uint32_t> dirty_;  ///< the live states changed since the last write_back
  std::int64_t next_report_ = 0;
  std::uint64_t buffered_total_ = 0;
  std::string scratch_;
  // The record every emission is built in: its strings and header vector keep their capacity
  // from one record to the next, so emitting allocates nothing once they are large enough.
  record<bytes, bytes> out_;
  std::vector<state::queue_entry> peeked_;
  counter* direct_ = nullptr;
  counter* buffered_ = nullptr;
  counter* drained_ = nullptr;
  counter* expired_ = nullptr;
  counter* expired_dropped_ = nullptr;
  counter* replays_skipped_ = nullptr;
  counter* invalid_rates_ = nullptr;
  counter* alarms_ = nullptr;  ///< backlog alarm lines logged
  gauge* buffered_now_ = nullptr;
  gauge* customers_buffering_ = nullptr;
  gauge* oldest_age_ = nullptr;
  std::string task_labels_;            ///< task="..." of every metric of this processor
  std::map<std::string, gauge*> top_;  ///< the last report's top-backlog customers and their gauges
};

}  // namespace overflow_detail

/// The processor supplier for kstream<bytes, bytes>::process(supplier, stores...). Declare
/// the stores with add_overflow_buffer_stores(b, o) first. Validates the options.
std::function<std::unique_ptr<overflow_detail::processor>()> overflow_buffer(overflow_buffer_options options);

/// The outlets of apply_overflow_buffer: emitted records, and expired ones when
/// forward_expired (nullopt when they are dropped).
struct overflow_buffer_outlets {
  kstream<overflow_detail::bytes, overflow_detail::bytes> emitted;
  std::optional<kstream<overflow_detail::bytes, overflow_detail::bytes>> expired;
};

/// Declares the stores, adds the overflow buffer after `in` and returns its outlets.
overflow_buffer_outlets apply_overflow_buffer(streams_builder& builder,
                                              const kstream<overflow_detail::bytes, overflow_detail::bytes>& in,
                                              const overflow_buffer_options& options);

/// GET /overflow/backlog?limit=N (default 10, at most 1000; scope=application, the default,
/// or instance) and GET /overflow/customers/{c} on the instance HTTP server (README.md,
/// "HTTP"). apply_overflow_buffer() adds them when options.http_endpoints is set. Any
/// instance answers either: a customer is forwarded to the instance running its partition,
/// the backlog gathers every instance's partitions.
void add_overflow_buffer_endpoints(streams_builder& builder, const overflow_buffer_options& options);
/// The bodies of the two endpoints as this instance alone answers them, over `queries` (an
/// app's or the TopologyTestDriver's), ages measured at `now_ms`. Backlog: the `limit`
/// largest backlogs of the partitions this instance runs, with the partitions it does not
/// (scope "instance"). Customer: its backlog when this instance runs its partition, else a
/// 404 naming how to find the owner (the endpoint forwards instead).
http::response overflow_backlog_response(interactive_queries& queries, const overflow_buffer_options& options,
                                         std::size_t limit, std::int64_t now_ms);
http::response overflow_customer_response(interactive_queries& queries, const overflow_buffer_options& options,
                                          std::string_view customer, std::int64_t now_ms);

/// How long GET /overflow/backlog (scope=application) may hold the HTTP handler thread that
/// answers it: its local reads and its asks of other instances share one budget. A local read
/// waits at most what is left; an ask of another instance is started only while its whole
/// bound still fits, so the request never overruns the budget. What was not read or asked in
/// time is named in the answer ("unreachable"); when no partition could be read at all, the
/// answer is 503 with Retry-After.
struct backlog_gather_limits {
  /// The whole request's budget.
  /// Default: 4.5 s.
  std::chrono::milliseconds budget{4500};
  /// How long one ask of another instance may take (the forwarding's own timeout,
  /// http::store_access::forward).
  /// Default: 3 s.
  std::chrono::milliseconds ask_bound{3000};
  /// The clock the budget runs on (tests substitute their own).
  /// Default: std::chrono::steady_clock::now.
  std::function<std::chrono::steady_clock::time_point()> clock = [] { return std::chrono::steady_clock::now(); };
};
/// GET /overflow/backlog with scope=application as the endpoint answers it: this instance's
/// partitions, then the others asked of their owners, within `limits`.
http::response overflow_gathered_backlog(const http::request& req, const overflow_buffer_options& options,
                                         std::size_t limit, std::int64_t now_ms,
                                         const backlog_gather_limits& limits = {});

/// The sluice-overflow-buffer job's topology: `input` -> overflow buffer -> `output`, expired
/// records to `expired` (dropped and counted when it is empty). Throws invalid_topology when
/// `output` or `expired` is `input` or the rates topic (records would come back as input or
/// as rates), or the rates topic is `input` (sluice/job_topics.hpp).
topology overflow_buffer_job_topology(const std::string& input, const std::string& output, const std::string& expired,
                                      overflow_buffer_options options);

}  // namespace sluice::topologies
