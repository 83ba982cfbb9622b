// Topic administration over librdkafka's Admin API (or the mock cluster directly).
#include "kafka/admin.hpp"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "kafka/error.hpp"
#include "kafka/mock_cluster.hpp"
#include "sluice/error.hpp"

namespace sluice::kafka {
namespace {

/// The pause between two checks of a topic just created. A broker applies a creation within
/// milliseconds, so the first pauses are short (a fixed 50 ms pause added about 50 ms to a
/// job's start for each new topic); a slow cluster is asked at most every 50 ms.
class retry_pause {
 public:
  void wait() {
    std::this_thread::sleep_for(next_);
    next_ = std::min(next_ * 2, std::chrono::milliseconds(50));
  }

 private:
  std::chrono::milliseconds next_{2};
};

admin_options_ptr options_for(rd_kafka_t* rk, rd_kafka_admin_op_t op, std::chrono::milliseconds timeout) {
  admin_options_ptr opts(rd_kafka_AdminOptions_new(rk, op));
  char reason[256];
  rd_kafka_AdminOptions_set_request_timeout(opts.get(), static_cast<int>(timeout.count()), reason, sizeof reason);
  if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS)
    rd_kafka_AdminOptions_set_operation_timeout(opts.get(), static_cast<int>(timeout.count()), reason, sizeof reason);
  return opts;
}

/// Throws the first of a create or delete request's per-topic results that failed, as
/// "`action` 'name'"; `done_already` (the topic exists, or is gone) counts as success.
void throw_first_failure(std::span<const rd_kafka_topic_result_t*> results, rd_kafka_resp_err_t done_already,
                         const char* action) {
  for (const auto* result : results) {
    const auto err = rd_kafka_topic_result_error(result);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == done_already) continue;
    const char* reason = rd_kafka_topic_result_error_string(result);
    throw make_error(err, std::string(action) + " '" + rd_kafka_topic_result_name(result) + "'", {},
                     reason ? reason : "");
  }
}

}  // namespace

admin::admin(const config_map& config) {
  config_map effective = config;
  // Metadata lookups must never create the topic they ask about.
  effective["allow.auto.create.topics"] = "false";
  rk_ = new_handle(RD_KAFKA_PRODUCER, make_conf(effective));
  queue_.reset(rd_kafka_queue_new(rk_.get()));
  if (const auto* bootstrap = find(config, "bootstrap.servers")) mock_ = find_mock_cluster(*bootstrap);
}

admin::~admin() = default;

event_ptr admin::wait_for(int type, std::chrono::milliseconds timeout, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(1);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw sluice::error(errc::timeout, std::string(what) + ": no answer from the cluster in " +
                                             std::to_string(timeout.count()) +
                                             " ms; is the broker at bootstrap.servers reachable?");
    event_ptr ev(rd_kafka_queue_poll(queue_.get(), static_cast<int>(left.count())));
    if (!ev) continue;
    if (rd_kafka_event_type(ev.get()) != type) continue;
    if (const auto err = rd_kafka_event_error(ev.get()); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* reason = rd_kafka_event_error_string(ev.get());
      throw make_error(err, what, {}, reason ? reason : "");
    }
    return ev;
  }
}

void admin::create_topics(const std::vector<new_topic>& topics, std::chrono::milliseconds timeout) {
  if (topics.empty()) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (mock_) {
    for (const auto& t : topics)
      mock_->create_topic(t.name, t.partitions, t.replication_factor < 1 ? 1 : t.replication_factor, t.configs);
  } else {
    std::vector<new_topic_ptr> owned;
    std::vector<rd_kafka_NewTopic_t*> raw;
    for (const auto& t : topics) {
      char reason[512] = {0};
      new_topic_ptr nt(
          rd_kafka_NewTopic_new(t.name.c_str(), t.partitions, t.replication_factor, reason, sizeof reason));
      if (!nt) throw sluice::error(errc::invalid_config, "topic '" + t.name + "': " + reason);
      for (const auto& [key, value] : t.configs)
        throw_if(rd_kafka_NewTopic_set_config(nt.get(), key.c_str(), value.c_str()),
                 "topic '" + t.name + "' config '" + key + "'");
      raw.push_back(nt.get());
      owned.push_back(std::move(nt));
    }
    auto opts = options_for(rk_.get(), RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout);
    rd_kafka_CreateTopics(rk_.get(), raw.data(), raw.size(), opts.get(), queue_.get());
    auto ev = wait_for(RD_KAFKA_EVENT_CREATETOPICS_RESULT, timeout, "create topics");
    std::size_t n = 0;
    const auto** results = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &n);
    throw_first_failure({results, n}, RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS, "create topic");
  }
  // The controller answered. Wait until every partition takes writes: metadata can name a
  // leader before that broker has applied the creation, and an idempotent producer's first
  // batch refused then (NOT_LEADER_OR_FOLLOWER) can be lost when a later batch is appended
  // first (KAFKA-15591, brokers before the fix). ListOffsets is refused until the leader's
  // replica exists, like Produce, so one answered query per partition is the signal.
  for (const auto& t : topics) {
    const auto left = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    };
    std::optional<int> count;
    retry_pause pause;
    while (!(count = partition_count(t.name, std::max(left(), std::chrono::milliseconds(1000))))) {
      if (left().count() <= 0)
        throw sluice::error(errc::timeout, "topic '" + t.name + "' was created but does not show in metadata");
      pause.wait();
    }
    if (mock_) continue;  // the mock creates partitions synchronously
    for (int p = 0; p < *count; ++p) {
      for (retry_pause pause;;) {
        std::int64_t low = 0, high = 0;
        const auto err =
            rd_kafka_query_watermark_offsets(rk_.get(), t.name.c_str(), p, &low, &high,
                                             static_cast<int>(std::clamp<std::int64_t>(left().count(), 1000, 5000)));
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        if (left().count() <= 0)
          throw make_error(err, "topic '" + t.name + "' partition " + std::to_string(p) +
                                    " was created but its leader does not answer");
        pause.wait();
      }
    }
  }
}

void admin::delete_topics(const std::vector<std::string>& topics, std::chrono::milliseconds timeout) {
  if (topics.empty()) return;
  if (mock_) throw sluice::error(errc::kafka, "the mock cluster cannot delete topics");
  std::vector<delete_topic_ptr> owned;
  std::vector<rd_kafka_DeleteTopic_t*> raw;
  for (const auto& t : topics) {
    owned.emplace_back(rd_kafka_DeleteTopic_new(t.c_str()));
    raw.push_back(owned.back().get());
  }
  auto opts = options_for(rk_.get(), RD_KAFKA_ADMIN_OP_DELETETOPICS, timeout);
  rd_kafka_DeleteTopics(rk_.get(), raw.data(), raw.size(), opts.get(), queue_.get());
  auto ev = wait_for(RD_KAFKA_EVENT_DELETETOPICS_RESULT, timeout, "delete topics");
  std::size_t n = 0;
  const auto** results = rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev.get()), &n);
  throw_first_failure({results, n}, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "delete topic");
}

void admin::reach(std::chrono::milliseconds timeout) {
  const rd_kafka_metadata_t* raw = nullptr;
  throw_if(rd_kafka_metadata(rk_.get(), 0, nullptr, &raw, static_cast<int>(timeout.count())), "metadata");
  metadata_ptr md(const_cast<rd_kafka_metadata_t*>(raw));
}

std::optional<int> admin::partition_count(const std::string& topic, std::chrono::milliseconds timeout) {
  // The mock creates any topic a metadata request names; only ask about ours.
  if (mock_ && !mock_->topic_configs(topic)) return std::nullopt;
  topic_ptr rkt(rd_kafka_topic_new(rk_.get(), topic.c_str(), nullptr));
  const rd_kafka_metadata_t* raw = nullptr;
  throw_if(rd_kafka_metadata(rk_.get(), 0, rkt.get(), &raw, static_cast<int>(timeout.count())),
           "metadata of '" + topic + "'");
  metadata_ptr md(const_cast<rd_kafka_metadata_t*>(raw));
  for (int i = 0; i < md->topic_cnt; ++i) {
    const auto& t = md->topics[i];
    if (topic != t.topic) continue;
    if (t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART || t.err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
      return std::nullopt;
    if (t.err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE && t.partition_cnt == 0) return std::nullopt;  // being created
    throw_if(t.err, "metadata of '" + topic + "'");
    return t.partition_cnt;
  }
  return std::nullopt;
}

config_map admin::describe_topic_configs(const std::string& topic, std::chrono::milliseconds timeout) {
  if (mock_) {
    if (auto configs = mock_->topic_configs(topic)) return *configs;
    throw make_error(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "describe configs of '" + topic + "'");
  }
  config_resource_ptr res(rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str()));
  rd_kafka_ConfigResource_t* raw[] = {res.get()};
  auto opts = options_for(rk_.get(), RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout);
  rd_kafka_DescribeConfigs(rk_.get(), raw, 1, opts.get(), queue_.get());
  auto ev = wait_for(RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT, timeout, "describe configs");
  std::size_t n = 0;
  const auto** resources =
      rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev.get()), &n);
  config_map out;
  for (std::size_t i = 0; i < n; ++i) {
    if (const auto err = rd_kafka_ConfigResource_error(resources[i]); err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* reason = rd_kafka_ConfigResource_error_string(resources[i]);
      throw make_error(err, "describe configs of '" + topic + "'", {}, reason ? reason : "");
    }
    std::size_t count = 0;
    const auto** entries = rd_kafka_ConfigResource_configs(resources[i], &count);
    for (std::size_t j = 0; j < count; ++j) {
      const char* value = rd_kafka_ConfigEntry_value(entries[j]);
      out[rd_kafka_ConfigEntry_name(entries[j])] = value ? value : "";
    }
  }
  return out;
}

namespace {

/// Reads the consumer protocol's assignment (version, [topic [partition]], user data), as
/// a group's coordinator hands it out, big-endian; nullopt when the bytes are not one.
std::optional<std::vector<topic_partition>> decode_assignment(const void* data, int size) {
  std::vector<topic_partition> out;
  if (data == nullptr || size <= 0) return out;  // a member not assigned yet
  const auto* p = static_cast<const unsigned char*>(data);
  const auto* const end = p + size;
  auto read = [&](int bytes, std::int64_t& v) {
    if (end - p < bytes) return false;
    std::uint64_t u = 0;
    for (int i = 0; i < bytes; ++i) u = (u << 8) | *p++;
    v = bytes == 2 ? static_cast<std::int16_t>(u) : static_cast<std::int32_t>(u);
    return true;
  };
  std::int64_t version = 0, topics = 0;
  if (!read(2, version) || version < 0 || !read(4, topics) || topics < 0) return std::nullopt;
  for (std::int64_t t = 0; t < topics; ++t) {
    std::int64_t name_length = 0, partitions = 0;
    if (!read(2, name_length) || name_length < 0 || end - p < name_length) return std::nullopt;
    std::string topic(reinterpret_cast<const char*>(p), static_cast<std::size_t>(name_length));
    p += name_length;
    if (!read(4, partitions) || partitions < 0) return std::nullopt;
    for (std::int64_t i = 0; i < partitions; ++i) {
      std::int64_t partition = 0;
      if (!read(4, partition)) return std::nullopt;
      out.push_back({topic, static_cast<std::int32_t>(partition)});
    }
  }
  return out;  // the user data that may follow is not ours to read
}

}  // namespace

// Through rd_kafka_list_groups (ListGroups to every broker, then DescribeGroups to the
// group's coordinator), not the DescribeConsumerGroups admin call: in librdkafka 2.0.2 that
// call aborts the process (rd_kafka_enq_once_del_source_return: "eonce->refcnt > 0") when it
// times out with a coordinator request in flight and the request ends later, as a broker
// outage makes it (librdkafka issue #4605; seen with /metadata during a paused broker).
// list_groups serves its own queue and drops replies that arrive after it returned.
group_description admin::describe_group(const std::string& group, std::chrono::milliseconds timeout) {
  if (mock_) return mock_->describe_group(group);
  const rd_kafka_group_list* raw = nullptr;
  const auto err = rd_kafka_list_groups(rk_.get(), group.c_str(), &raw, static_cast<int>(timeout.count()));
  std::unique_ptr<const rd_kafka_group_list, void (*)(const rd_kafka_group_list*)> list(
      raw, [](const rd_kafka_group_list* l) {
        if (l != nullptr) rd_kafka_group_list_destroy(l);
      });
  // Partial: some broker did not answer, but the coordinator did (the group is listed).
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && !(err == RD_KAFKA_RESP_ERR__PARTIAL && list && list->group_cnt > 0))
    throw make_error(err, "describing consumer group '" + group + "'");
  group_description out;
  out.state = "Dead";  // what the coordinator answers for a group it does not know
  for (int g = 0; list && g < list->group_cnt; ++g) {
    const auto& info = list->groups[g];
    if (info.group == nullptr || group != info.group) continue;
    if (info.err != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw sluice::error(errc::kafka,
                          "describing consumer group '" + group + "' failed: " + rd_kafka_err2str(info.err));
    out.state = info.state ? info.state : "";
    for (int m = 0; m < info.member_cnt; ++m) {
      const auto& member = info.members[m];
      group_member gm;
      gm.client_id = member.client_id ? member.client_id : "";
      gm.host = member.client_host ? member.client_host : "";
      auto assignment = decode_assignment(member.member_assignment, member.member_assignment_size);
      if (!assignment)
        throw sluice::error(errc::kafka, "describing consumer group '" + group + "': member '" + gm.client_id +
                                             "' has an assignment that is not the consumer protocol's");
      gm.assignment = std::move(*assignment);
      out.members.push_back(std::move(gm));
    }
  }
  return out;
}

}  // namespace sluice::kafka
