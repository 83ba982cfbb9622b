// The consumer: owned messages out, rebalances to a listener, errors throttled in the log.
#include "kafka/consumer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "kafka/error.hpp"
#include "kafka/mock_cluster.hpp"
#include "sluice/error.hpp"

namespace sluice::kafka {
namespace {

/// What to do when the group coordinator refuses this consumer's group settings, or empty
/// for any other error. librdkafka reports these as consumer errors and retries the join
/// forever; nothing changes until the configuration does, so the consumer stops instead.
std::string_view group_refusal_fix(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_INVALID_SESSION_TIMEOUT:
      return "the broker refuses the consumer's session.timeout.ms: it must lie within the broker's "
             "group.min.session.timeout.ms and group.max.session.timeout.ms (by default 6000 and 1800000); set "
             "consumer.session.timeout.ms within them";
    case RD_KAFKA_RESP_ERR_INCONSISTENT_GROUP_PROTOCOL:
      return "members of the consumer group (the application.id) use another partition.assignment.strategy or "
             "are not sluice jobs; give this job its own application.id, or stop the other members";
    case RD_KAFKA_RESP_ERR_INVALID_GROUP_ID: return "the broker refuses the consumer group id; check application.id";
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
      return "the broker does not authorize this principal to use the consumer group (the application.id); grant "
             "it READ on the group, or check the security settings";
    case RD_KAFKA_RESP_ERR_GROUP_MAX_SIZE_REACHED:
      return "the consumer group (the application.id) already has the broker's group.max.size members; run fewer "
             "instances or stream threads, or raise group.max.size on the brokers";
    default: return {};
  }
}

}  // namespace

consumer::consumer(const config_map& config, statistics_callback on_statistics)
    : on_statistics_(std::move(on_statistics)) {
  config_map effective = config;
  effective.try_emplace("enable.auto.commit", "false");
  effective.try_emplace("enable.auto.offset.store", "false");
  effective.try_emplace("partition.assignment.strategy", "range");
  // librdkafka 2.0.2 stops fetching a partition once its local queue passes
  // queued.min.messages (100,000) or queued.max.messages.kbytes (64 MiB), and is slow to
  // start again: a backlog, a restore or a reader then waits on fetches (bench/README.md,
  // "Consumer prefetch"; wake_stalled_fetch wakes it now). Byte-bound by 32 MiB per consumer
  // and count-bound by 250,000: the byte bound counts keys and values only, while librdkafka
  // spends about 300 bytes more on each queued record, so a million small records held about
  // 300 MB (bench/README.md, "Long-run memory").
  effective.try_emplace("queued.min.messages", "250000");
  effective.try_emplace("queued.max.messages.kbytes", "32768");
  const auto* group = find(effective, "group.id");
  has_group_ = group && !group->empty();
  // librdkafka's assign() needs a group handle even when nothing is ever committed; an
  // assign-only consumer gets a placeholder group it never joins or commits to.
  if (!has_group_) effective["group.id"] = "sluice-assign-only";

  auto conf = make_conf(effective);
  rd_kafka_conf_set_opaque(conf.get(), this);
  rd_kafka_conf_set_rebalance_cb(conf.get(), &consumer::on_rebalance_c);
  rd_kafka_conf_set_error_cb(conf.get(), &consumer::on_error_c);
  if (on_statistics_) rd_kafka_conf_set_stats_cb(conf.get(), &consumer::on_statistics_c);
  rk_ = new_handle(RD_KAFKA_CONSUMER, std::move(conf));
  name_ = rd_kafka_name(rk_.get());
  // Route the main queue (errors, rebalances) through consumer_poll.
  throw_if_failed(rd_kafka_poll_set_consumer(rk_.get()), "poll_set_consumer");
  wake_queue_.reset(rd_kafka_queue_get_consumer(rk_.get()));
  if (const auto* bootstrap = find(effective, "bootstrap.servers"); bootstrap && has_group_) {
    mock_ = find_mock_cluster(*bootstrap);
    group_ = *group;
    if (const auto* id = find(effective, "client.id")) membership_.client_id = *id;
    membership_.host = "in-process";
  }
}

void consumer::report_membership() {
  if (mock_) mock_->set_member(group_, name_, membership_);
}

void consumer::wake() noexcept {
  if (wake_queue_) rd_kafka_queue_yield(wake_queue_.get());
}

consumer::~consumer() {
  try {
    close();
  } catch (const std::exception& e) {
    layer_logger()->warn("consumer {}: close failed: {}", name_, e.what());
  } catch (...) {
    layer_logger()->warn("consumer {}: close failed", name_);
  }
}

void consumer::close() {
  if (closed_ || !rk_) return;
  closed_ = true;
  const auto err = rd_kafka_consumer_close(rk_.get());
  if (mock_) mock_->remove_member(group_, name_);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__FATAL) {
    layer_logger()->warn("consumer {}: {}", name_, make_error(err, "close").what());
  }
  if (pending_) {
    auto e = std::exchange(pending_, nullptr);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      layer_logger()->warn("consumer {}: callback failed during close: {}", name_, ex.what());
    } catch (...) {
      layer_logger()->warn("consumer {}: callback failed during close", name_);
    }
  }
}

void consumer::on_rebalance_c(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                              void* opaque) {
  static_cast<consumer*>(opaque)->on_rebalance(err, parts);
}

void consumer::on_rebalance(rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts) {
  rd_kafka_t* rk = rk_.get();
  // Store only the first exception; every later step still runs so librdkafka's
  // assignment stays consistent.
  auto guard = [this](auto&& step) {
    try {
      step();
    } catch (...) {
      if (!pending_) pending_ = std::current_exception();
      try {
        throw;
      } catch (const std::exception& e) {
        layer_logger()->error("consumer {}: rebalance callback failed: {}", name_, e.what());
      } catch (...) {
        layer_logger()->error("consumer {}: rebalance callback failed", name_);
      }
    }
  };
  guard([&] {
    const bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    const auto list = partitions_of(parts);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      layer_logger()->info("consumer {}: assigned {} partition(s)", name_, list.size());
      // The mock learns the assignment before the listener runs, as a coordinator knows it
      // before the member's callback: a listener that makes the app `running` (no restore)
      // must not let a /metadata read find the group without this member.
      // Eager: the list is the whole assignment. Cooperative: it adds to what is held.
      auto& mine = membership_.assignment;
      if (!cooperative) {
        mine = list;
      } else {
        for (const auto& tp : list)
          if (std::find(mine.begin(), mine.end(), tp) == mine.end()) mine.push_back(tp);
      }
      std::sort(mine.begin(), mine.end());
      report_membership();
      if (listener_) guard([&] { listener_->on_assigned(list); });
      if (cooperative)
        throw_if(rd_kafka_incremental_assign(rk, parts), "incremental_assign");
      else
        throw_if_failed(rd_kafka_assign(rk, parts), "assign");
    } else {
      const bool lost = rd_kafka_assignment_lost(rk) != 0;
      if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        layer_logger()->info("consumer {}: {} {} partition(s)", name_, lost ? "lost" : "revoked", list.size());
      } else {
        layer_logger()->error("consumer {}: {}", name_, make_error(err, "rebalance").what());
      }
      if (listener_) guard([&] { lost ? listener_->on_lost(list) : listener_->on_revoked(list); });
      if (cooperative)
        throw_if(rd_kafka_incremental_unassign(rk, parts), "incremental_unassign");
      else
        throw_if_failed(rd_kafka_assign(rk, nullptr), "unassign");
      auto& mine = membership_.assignment;
      if (cooperative)
        std::erase_if(mine,
                      [&](const topic_partition& tp) { return std::find(list.begin(), list.end(), tp) != list.end(); });
      else
        mine.clear();
      report_membership();
    }
  });
  // After an assignment the poll serving this callback returns as soon as it is done,
  // whatever its timeout: the caller has partitions to act on (restores to begin, pauses to
  // apply), and they have fetched nothing yet. Without this a stream thread's poll waited out
  // its timeout (100 ms) after every assignment before the restores began. Not while closing:
  // rd_kafka_consumer_close serves the revocation and gives up on a yield.
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && !closed_ && wake_queue_) rd_kafka_queue_yield(wake_queue_.get());
}

int consumer::on_statistics_c(rd_kafka_t*, char* json, size_t json_len, void* opaque) {
  auto* self = static_cast<consumer*>(opaque);
  try {
    if (self->on_statistics_) self->on_statistics_(std::string_view(json, json_len));
  } catch (...) {}
  return 0;  // librdkafka frees the text
}

void consumer::on_error_c(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* self = static_cast<consumer*>(opaque);
  try {
    const auto code = static_cast<rd_kafka_resp_err_t>(err);
    if (code == RD_KAFKA_RESP_ERR__FATAL) {
      self->fatal_ = true;
      return;
    }
    if (code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) self->brokers_down_ = true;
    if (self->throttle_.should_log(err)) {
      layer_logger()->warn("consumer {}: {}", self->name_,
                           make_error(code, "client error", {}, reason ? reason : "").what());
    }
  } catch (...) {}
}

void consumer::throw_if_failed(rd_kafka_resp_err_t code, std::string_view what) const {
  if (code == RD_KAFKA_RESP_ERR__FATAL)
    throw make_fatal_error(rk_.get(), "consumer " + name_ + ": " + std::string(what));
  throw_if(code, what);
}

void consumer::rethrow_pending() {
  if (pending_) std::rethrow_exception(std::exchange(pending_, nullptr));
  if (fatal_) throw make_fatal_error(rk_.get(), "consumer " + name_);
}

void consumer::handle_error_message(const rd_kafka_message_t& m) {
  if (m.err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
    if (on_eof_) on_eof_(m.rkt ? rd_kafka_topic_name(m.rkt) : "", m.partition, m.offset);
    return;
  }
  if (m.err == RD_KAFKA_RESP_ERR__FATAL || rd_kafka_fatal_error(rk_.get(), nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    fatal_ = true;
    throw make_fatal_error(rk_.get(), "consumer " + name_);
  }
  if (const auto fix = group_refusal_fix(m.err); !fix.empty()) {
    const std::string reason = m.payload ? std::string(static_cast<const char*>(m.payload), m.len) : std::string();
    throw sluice::error(errc::invalid_config,
                        "consumer " + name_ + ": " + std::string(rd_kafka_err2name(m.err)) +
                            (reason.empty() ? "" : " (" + reason + ")") + ": " + std::string(fix),
                        kafka_flags{static_cast<int>(m.err), false, false, false});
  }
  if (throttle_.should_log(static_cast<int>(m.err))) {
    std::string context = "consumer " + name_;
    if (m.rkt) context += " on " + std::string(rd_kafka_topic_name(m.rkt)) + "[" + std::to_string(m.partition) + "]";
    const std::string reason = m.payload ? std::string(static_cast<const char*>(m.payload), m.len) : std::string();
    layer_logger()->warn("{}", make_error(m.err, context, {}, reason).what());
  }
}

rd_kafka_message_t* consumer::next(int timeout_ms) {
  if (closed_) throw sluice::error(errc::kafka, "consumer " + name_ + " is closed");
  return rd_kafka_consumer_poll(rk_.get(), timeout_ms);
}

std::optional<message> consumer::poll(std::chrono::milliseconds timeout) {
  rethrow_pending();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    message_ptr m(next(static_cast<int>(std::max<std::int64_t>(left.count(), 0))));
    rethrow_pending();
    if (!m) return std::nullopt;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      message out;
      copy_message(*m, out);
      return out;
    }
    handle_error_message(*m);
    if (left.count() <= 0) return std::nullopt;
  }
}

bool consumer::poll_batch(std::vector<message>& out, std::size_t max, std::chrono::milliseconds timeout) {
  rethrow_pending();
  std::size_t count = 0;
  bool partition_end = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (count < max) {
    // Only the first record is waited for (within the one budget); then take what is there.
    // A partition end also ends the wait: it may be what the caller waits for (an idling task).
    int wait = 0;
    if (count == 0 && !partition_end) {
      // Rounded up: a 1 ms budget truncated to 0 would make the caller spin.
      wait = static_cast<int>(std::max<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count(), 0));
    }
    message_ptr m(next(wait));
    if (!m) break;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      partition_end = partition_end || m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
      handle_error_message(*m);
      continue;
    }
    if (count == out.size()) {
      if (spare_.empty()) {
        out.emplace_back();
      } else {
        out.push_back(std::move(spare_.back()));
        spare_.pop_back();
      }
    }
    copy_message(*m, out[count]);
    ++count;
  }
  // Shrink without freeing: surplus messages keep their buffers for the next larger batch.
  while (out.size() > count) {
    spare_.push_back(std::move(out.back()));
    out.pop_back();
  }
  rethrow_pending();
  after_poll(count > 0);
  return count > 0;
}

bool consumer::poll_lent(std::size_t max, std::chrono::milliseconds timeout,
                         const std::function<void(std::span<const raw_view>)>& apply) {
  rethrow_pending();
  if (closed_) throw sluice::error(errc::kafka, "consumer " + name_ + " is closed");
  lent_raw_.resize(std::max<std::size_t>(max, 1));
  // librdkafka's batch call waits out its whole timeout unless the batch fills: a global
  // table's catch-up of 1,000 records took one 100 ms poll. So the first record is waited
  // for alone, and the rest is what is already there.
  auto got = rd_kafka_consume_batch_queue(wake_queue_.get(), static_cast<int>(timeout.count()), lent_raw_.data(), 1);
  if (got == 1 && lent_raw_.size() > 1) {
    const auto more = rd_kafka_consume_batch_queue(wake_queue_.get(), 0, lent_raw_.data() + 1, lent_raw_.size() - 1);
    if (more > 0) got += more;
  }
  if (got < 0) throw_if_failed(rd_kafka_last_error(), "consume_batch_queue");
  const auto n = static_cast<std::size_t>(std::max<ssize_t>(got, 0));
  // Every message handed out is destroyed when this returns, whatever throws first.
  struct destroy_on_return {
    std::vector<rd_kafka_message_t*>& messages;
    std::size_t count;
    ~destroy_on_return() {
      for (std::size_t i = 0; i < count; ++i) rd_kafka_message_destroy(messages[i]);
    }
  } destroy{lent_raw_, n};
  lent_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& m = *lent_raw_[i];
    if (m.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      handle_error_message(m);
      continue;
    }
    raw_view& v = lent_.emplace_back();
    v.topic = m.rkt ? rd_kafka_topic_name(m.rkt) : "";
    v.partition = m.partition;
    v.offset = m.offset;
    rd_kafka_timestamp_type_t ts_type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    v.timestamp = rd_kafka_message_timestamp(&m, &ts_type);
    if (m.key) v.key.emplace(static_cast<const char*>(m.key), m.key_len);
    if (m.payload) v.value.emplace(static_cast<const char*>(m.payload), m.len);
  }
  rethrow_pending();
  after_poll(!lent_.empty());
  for (std::size_t i = 0; i < lent_.size();) {
    std::size_t j = i + 1;
    while (j < lent_.size() && lent_[j].partition == lent_[i].partition &&
           (lent_[j].topic.data() == lent_[i].topic.data() || lent_[j].topic == lent_[i].topic))
      ++j;
    apply(std::span<const raw_view>(lent_.data() + i, j - i));
    i = j;
  }
  return !lent_.empty();
}

void consumer::subscribe(const std::vector<std::string>& topics, rebalance_listener* listener) {
  require_group("subscribe");
  listener_ = listener;
  partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const auto& t : topics) rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  throw_if_failed(rd_kafka_subscribe(rk_.get(), list.get()), "subscribe");
}

void consumer::unsubscribe() { throw_if_failed(rd_kafka_unsubscribe(rk_.get()), "unsubscribe"); }

void consumer::assign(const std::vector<topic_partition_offset>& parts) {
  auto list = to_list(parts);
  throw_if_failed(rd_kafka_assign(rk_.get(), list.get()), "assign");
}

void consumer::unassign() { throw_if_failed(rd_kafka_assign(rk_.get(), nullptr), "unassign"); }

void consumer::assign_more(const std::vector<topic_partition_offset>& parts) {
  if (parts.empty()) return;
  auto list = to_list(parts);
  throw_if(rd_kafka_incremental_assign(rk_.get(), list.get()), "incremental_assign");
}

void consumer::unassign_some(const std::vector<topic_partition>& parts) {
  if (parts.empty()) return;
  auto list = to_list(parts);
  throw_if(rd_kafka_incremental_unassign(rk_.get(), list.get()), "incremental_unassign");
}

bool consumer::learn_leaders(const std::vector<std::string>& topics, std::chrono::milliseconds timeout) {
  // librdkafka 2.0.2's rd_kafka_metadata asks for one topic, every topic in the cluster, or
  // the topics this client knows (a handle or a cached answer): holding a handle to each of
  // `topics` makes the last one request, one round trip, name all of them.
  std::vector<topic_ptr> handles;
  handles.reserve(topics.size());
  for (const auto& topic : topics) handles.emplace_back(rd_kafka_topic_new(rk_.get(), topic.c_str(), nullptr));
  const rd_kafka_metadata_t* raw = nullptr;
  // The response updates the leaders of the partitions this client holds.
  if (rd_kafka_metadata(rk_.get(), 0, nullptr, &raw, static_cast<int>(timeout.count())) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return false;
  metadata_ptr md(const_cast<rd_kafka_metadata_t*>(raw));
  return true;
}

bool consumer::check_brokers_back(const std::vector<topic_partition>& assigned, const std::vector<std::string>& topics,
                                  std::chrono::milliseconds timeout) {
  if (!brokers_down_) return false;
  bool answered = false;
  if (has_group_ && !assigned.empty()) {
    auto list = to_list(std::vector<topic_partition>{assigned.front()});
    answered =
        rd_kafka_committed(rk_.get(), list.get(), static_cast<int>(timeout.count())) == RD_KAFKA_RESP_ERR_NO_ERROR;
  } else {
    answered = learn_leaders(topics, timeout);
  }
  if (answered) brokers_down_ = false;
  return brokers_down_;
}

std::vector<topic_partition> consumer::assignment() const {
  rd_kafka_topic_partition_list_t* raw = nullptr;
  throw_if_failed(rd_kafka_assignment(rk_.get(), &raw), "assignment");
  partition_list_ptr list(raw);
  return partitions_of(list.get());
}

void consumer::pause(const std::vector<topic_partition>& parts) {
  std::vector<topic_partition> first;  // not paused before this call
  for (const auto& p : parts)
    if (++paused_[p] == 1) first.push_back(p);
  if (first.empty()) return;
  auto list = to_list(first);
  const auto err = rd_kafka_pause_partitions(rk_.get(), list.get());
  // A partition librdkafka did not pause (one it does not know) holds no pause here either;
  // the others it paused do, so a later resume() reaches it.
  for (int i = 0; i < list->cnt; ++i)
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
      paused_.erase(topic_partition{list->elems[i].topic, list->elems[i].partition});
  throw_if_failed(err, "pause");
  throw_on_partition_error(list.get(), "pause");
}

void consumer::resume(const std::vector<topic_partition>& parts) {
  // Only a partition's last holder resumes it, and a partition that is not paused is never
  // resumed: librdkafka 2.0.2 can restart the fetch of a partition resumed while not paused
  // from a position consumed before (fixed upstream in 2024, its issues 4637 and 4686).
  std::vector<topic_partition> last;
  for (const auto& p : parts) {
    auto it = paused_.find(p);
    if (it == paused_.end()) continue;
    if (--it->second == 0) {
      paused_.erase(it);
      last.push_back(p);
    }
  }
  if (last.empty()) return;
  auto list = to_list(last);
  throw_if_failed(rd_kafka_resume_partitions(rk_.get(), list.get()), "resume");
  throw_on_partition_error(list.get(), "resume");
}

void consumer::after_poll(bool got_records) {
  if (got_records) {
    brokers_down_ = false;
    next_wake_ = {}, wake_interval_ = {};  // records flow: the next dry poll may wake at once
    return;
  }
  // A broker that answers within this is woken; one that does not costs a dry poll at most
  // this, and the requests back off to one a second while polls stay dry.
  constexpr auto wake_timeout = std::chrono::milliseconds(100);
  wake_stalled_fetch(wake_timeout);
}

bool consumer::wake_stalled_fetch(std::chrono::milliseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_wake_) return false;
  rd_kafka_topic_partition_list_t* raw = nullptr;
  if (rd_kafka_assignment(rk_.get(), &raw) != RD_KAFKA_RESP_ERR_NO_ERROR) return false;
  partition_list_ptr assigned(raw);
  if (rd_kafka_position(rk_.get(), assigned.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) return false;
  std::vector<const rd_kafka_topic_partition_t*> behind;
  for (int i = 0; i < assigned->cnt; ++i) {
    const auto& e = assigned->elems[i];
    if (e.offset < 0) continue;  // nothing delivered yet: no fetch has stopped on a full queue
    std::int64_t low = -1, high = -1;
    if (rd_kafka_get_watermark_offsets(rk_.get(), e.topic, e.partition, &low, &high) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        high - e.offset <= 1)
      continue;
    if (paused_.contains(topic_partition{e.topic, e.partition})) continue;
    behind.push_back(&e);
  }
  if (behind.empty()) return false;
  const auto& e = *behind[wake_turn_++ % behind.size()];
  std::int64_t low = -1, high = -1;
  ++fetch_wakes_;
  // The answer is not used: the request is what wakes the leader's broker thread.
  (void)rd_kafka_query_watermark_offsets(rk_.get(), e.topic, e.partition, &low, &high,
                                         static_cast<int>(timeout.count()));
  wake_interval_ = std::clamp(wake_interval_ * 2, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  next_wake_ = std::chrono::steady_clock::now() + wake_interval_;
  return true;
}

void consumer::seek(const topic_partition_offset& to, std::chrono::milliseconds timeout) {
  auto list = to_list(std::vector<topic_partition_offset>{to});
  throw_if(rd_kafka_seek_partitions(rk_.get(), list.get(), static_cast<int>(timeout.count())), "seek");
  if (timeout.count() == 0) {
    // Asynchronous seek: librdkafka marks each partition _IN_PROGRESS; only other errors count.
    for (int i = 0; i < list->cnt; ++i) {
      const auto& e = list->elems[i];
      if (e.err && e.err != RD_KAFKA_RESP_ERR__IN_PROGRESS)
        throw make_error(e.err, "seek " + std::string(e.topic) + "[" + std::to_string(e.partition) + "]");
    }
    return;
  }
  throw_on_partition_error(list.get(), "seek");
}

void consumer::require_group(const char* what) const {
  if (!has_group_)
    throw sluice::error(errc::invalid_config, "consumer " + name_ + ": " + what + " needs group.id to be set");
}

void consumer::commit(const std::vector<topic_partition_offset>& offsets) {
  require_group("commit");
  if (offsets.empty()) return;
  auto list = to_list(offsets);
  throw_if_failed(rd_kafka_commit(rk_.get(), list.get(), 0), "commit");
  throw_on_partition_error(list.get(), "commit");
}

std::vector<topic_partition_offset> consumer::committed(const std::vector<topic_partition>& parts,
                                                        std::chrono::milliseconds timeout) const {
  require_group("committed");
  auto list = to_list(parts);
  throw_if_failed(rd_kafka_committed(rk_.get(), list.get(), static_cast<int>(timeout.count())), "committed");
  throw_on_partition_error(list.get(), "committed");
  return offsets_of(list.get());
}

std::vector<topic_partition_offset> consumer::position(const std::vector<topic_partition>& parts) const {
  auto list = to_list(parts);
  throw_if_failed(rd_kafka_position(rk_.get(), list.get()), "position");
  return offsets_of(list.get());
}

std::pair<std::int64_t, std::int64_t> consumer::watermarks(const std::string& topic, std::int32_t partition,
                                                           std::chrono::milliseconds timeout) const {
  std::int64_t low = -1;
  std::int64_t high = -1;
  throw_if_failed(rd_kafka_query_watermark_offsets(rk_.get(), topic.c_str(), partition, &low, &high,
                                                   static_cast<int>(timeout.count())),
                  "watermarks of " + topic + "[" + std::to_string(partition) + "]");
  return {low, high};
}

std::vector<std::pair<std::int64_t, std::int64_t>> consumer::watermarks(const std::vector<topic_partition>& parts,
                                                                        std::chrono::milliseconds timeout) const {
  std::vector<std::pair<std::int64_t, std::int64_t>> out(parts.size(), {-1, -1});
  if (parts.empty()) return out;
  // ListOffsets takes a timestamp per partition, where -2 means the earliest offset and -1
  // the latest; rd_kafka_offsets_for_times sends one request per leader for the whole list.
  for (const std::int64_t which : {offset_beginning, offset_end}) {
    std::vector<topic_partition_offset> query;
    query.reserve(parts.size());
    for (const auto& tp : parts) query.push_back({tp.topic, tp.partition, which});
    auto list = to_list(query);
    throw_if_failed(rd_kafka_offsets_for_times(rk_.get(), list.get(), static_cast<int>(timeout.count())), "watermarks");
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const auto* e = rd_kafka_topic_partition_list_find(list.get(), parts[i].topic.c_str(), parts[i].partition);
      const auto where = "watermarks of " + parts[i].topic + "[" + std::to_string(parts[i].partition) + "]";
      if (!e) throw sluice::error(errc::kafka, where + ": not in the broker's answer");
      throw_if(e->err, where);
      (which == offset_beginning ? out[i].first : out[i].second) = e->offset;
    }
  }
  return out;
}

std::optional<std::int64_t> consumer::cached_high_watermark(const std::string& topic, std::int32_t partition) const {
  std::int64_t low = -1;
  std::int64_t high = -1;
  if (rd_kafka_get_watermark_offsets(rk_.get(), topic.c_str(), partition, &low, &high) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      high < 0)
    return std::nullopt;
  return high;
}

consumer_group_metadata consumer::group_metadata() const {
  require_group("group_metadata");
  auto* md = rd_kafka_consumer_group_metadata(rk_.get());
  if (!md) throw sluice::error(errc::invalid_config, "consumer " + name_ + " has no group metadata: set group.id");
  return consumer_group_metadata(md);
}

bool consumer::assignment_lost() const { return rd_kafka_assignment_lost(rk_.get()) != 0; }

}  // namespace sluice::kafka
