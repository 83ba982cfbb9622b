// Freezing the DSL's graph into a topology: validation, sub-topologies, describe() and DOT.
#include "sluice/topology.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "sluice/builder.hpp"
#include "sluice/detail/internal_topics.hpp"
#include "sluice/error.hpp"

namespace sluice {
namespace detail {

void node::throw_unknown_child(std::string_view to) const {
  std::string known;
  for (const auto& n : child_names_) known += (known.empty() ? "" : ", ") + n;
  throw error(errc::invalid_topology,
              "forward to child '" + std::string(to) + "': no such child; this node's children are [" + known + "]");
}

void throw_context_before_init() {
  throw error(errc::invalid_topology,
              "processor::context() called before init(): the context exists from init() on; move the code that "
              "uses it from the processor's constructor into init()");
}

state::kv_store* kv_store_of(const store_binding& binding) {
  return store_of_kind<state::kv_store>(binding, "key-value");
}

void throw_wrong_store_kind(const state::state_store* store, std::string_view kind) {
  const std::string name = store ? store->name() : std::string("(none)");
  throw error(errc::invalid_topology, "store '" + name + "' is not a " + std::string(kind) +
                                          " store; ask for it with the handle of the kind it was declared as");
}

void throw_null_field(const char* what) {
  throw serialization_error(std::string("the record has a null ") + what + " but the stream's " + what +
                            " type is not std::optional");
}

void throw_deserialization_failure(const char* prefix, const std::exception& cause) {
  throw deserialization_failure(std::string(prefix) + cause.what());
}

void throw_negative_timestamp(std::int64_t ts, std::int64_t record_ts, bool extracted) {
  if (!extracted)
    throw deserialization_failure("the record's timestamp is " + std::to_string(ts) +
                                  "; timestamps must be >= 0 (produce records with a timestamp, or give the "
                                  "source a timestamp extractor)");
  throw deserialization_failure("the timestamp extractor returned " + std::to_string(ts) + " (record timestamp " +
                                std::to_string(record_ts) + "); timestamps must be >= 0");
}

sink_base::sink_base(std::string topic, bool internal) : topic_(std::move(topic)), internal_(internal) {}
sink_base::sink_base(const sink_base& other) = default;
sink_base::~sink_base() = default;

void sink_base::init(task_context& task) {
  node::init(task);
  if (internal_) topic_ = repartition_topic(task.application_id(), topic_);
}

void sink_base::send(const std::optional<std::string_view>& key, const std::optional<std::string_view>& value,
                     std::int64_t timestamp, const sluice::headers& headers, std::int32_t partition) {
  context_->send(topic_, key, value, timestamp, headers, partition);
}

std::int32_t sink_base::partition_of(std::string_view key) {
  if (partitions_ == 0) partitions_ = context_->output_partitions(topic_);
  return murmur2_partition(key, partitions_);
}

std::size_t graph_builder::add(node_spec spec) {
  nodes.push_back(std::move(spec));
  return nodes.size() - 1;
}

std::string graph_builder::name(std::string_view kind) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%010zu", counter++);
  return std::string(kind) + "-" + digits;
}

std::size_t graph_builder::add_processor(std::string_view kind, std::size_t parent, node_factory factory,
                                         std::vector<std::string> stores) {
  return add({.name = name(kind),
              .kind = node_kind::processor,
              .stores = std::move(stores),
              .parents = {parent},
              .factory = std::move(factory)});
}

std::size_t graph_builder::add_source(std::string_view kind, std::vector<std::string> topics, node_factory factory) {
  return add(
      {.name = name(kind), .kind = node_kind::source, .topics = std::move(topics), .factory = std::move(factory)});
}

void graph_builder::add_sink(std::size_t parent, const std::string& topic, node_factory factory) {
  add({.name = name("KSTREAM-SINK"),
       .kind = node_kind::sink,
       .topics = {topic},
       .parents = {parent},
       .factory = std::move(factory)});
}

std::size_t graph_builder::add_repartition(std::size_t parent, const std::string& topic, node_factory sink,
                                           node_factory source) {
  add({.name = name("KSTREAM-SINK"),
       .kind = node_kind::sink,
       .topics = {topic},
       .parents = {parent},
       .factory = std::move(sink),
       .internal_topic = true});
  return add({.name = name("KSTREAM-SOURCE"),
              .kind = node_kind::source,
              .topics = {topic},
              .factory = std::move(source),
              .internal_topic = true});
}

std::size_t graph_builder::add_aggregation(std::size_t parent, const materialized& store,
                                           std::shared_ptr<const store_codec> codec, node_factory factory) {
  auto spec = store_spec_for(store);
  spec.codec = std::move(codec);
  spec.format = value_format::timestamped;  // each aggregate with its timestamp (aggregate_store)
  add_store(std::move(spec));
  return add_processor("KSTREAM-AGGREGATE", parent, std::move(factory), {store.name});
}

namespace {

/// A node factory of copies of one prototype (factory_of): the prototype is shared by the
/// factory's copies and only read, as the lambda it replaces read its captured copy.
struct prototype_copier {
  std::shared_ptr<const node> prototype;
  std::unique_ptr<node> (*clone)(const node&);
  std::unique_ptr<node> operator()() const { return clone(*prototype); }
};

}  // namespace

graph_builder::node_factory prototype_factory(std::unique_ptr<node> prototype,
                                              std::unique_ptr<node> (*clone)(const node&)) {
  return prototype_copier{std::shared_ptr<const node>(std::move(prototype)), clone};
}

void graph_builder::add_store(store_spec spec) {
  for (const auto& s : stores)
    if (s.name == spec.name)
      throw error(errc::invalid_topology,
                  "store '" + spec.name +
                      "' is declared twice; declare a store once: process(..., materialized{...}) for a store one "
                      "processor uses, or add_state_store() and its name in each process(..., \"name\") sharing it; "
                      "two different stores need two names");
  if (spec.name.empty()) throw error(errc::invalid_topology, "a store needs a name (materialized{.name = ...})");
  stores.push_back(std::move(spec));
}

}  // namespace detail

namespace {

std::size_t find_root(std::vector<std::size_t>& parent, std::size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

const char* kind_word(detail::node_kind k) {
  switch (k) {
    case detail::node_kind::source: return "Source";
    case detail::node_kind::sink: return "Sink";
    default: return "Processor";
  }
}

std::string list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

/// Why `name` is not one Kafka accepts for a topic (its rule: 1 to 249 of a-z, A-Z, 0-9, '.',
/// '_' and '-', neither "." nor ".."); empty when it is.
std::string kafka_name_problem(const std::string& name) {
  const auto legal = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  };
  if (name.empty()) return "it is empty";
  if (name.size() > 249) return "it is " + std::to_string(name.size()) + " characters long";
  if (name == "." || name == "..") return "'.' and '..' are reserved";
  if (auto bad = std::find_if_not(name.begin(), name.end(), legal); bad != name.end())
    return "it holds '" + std::string(1, *bad) + "'";
  return {};
}

constexpr const char* kafka_name_rule = "1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'";

/// Throws unless `topic` is a name Kafka accepts, so that a job configured with an empty or
/// mistyped topic is refused when its topology is built, not after a broker round trip that
/// blames the cluster. `where` says where the topology uses it.
void check_topic_name(const std::string& topic, const std::string& where) {
  const std::string problem = kafka_name_problem(topic);
  if (problem.empty()) return;
  throw error(errc::invalid_topology, "topic '" + topic + "' (" + where +
                                          ") is not a valid Kafka topic name: " + problem + "; a topic name is " +
                                          kafka_name_rule + " (for a shipped job, check its *.topic settings)");
}

/// Throws unless a store's name follows the topic rule, as Kafka Streams requires: it names
/// the store's directory under the state dir (a '/' or ".." would leave it) and its changelog
/// topic.
void check_store_name(const std::string& store) {
  const std::string problem = kafka_name_problem(store);
  if (problem.empty()) return;
  throw error(errc::invalid_topology, "store '" + store + "' does not have a valid name: " + problem +
                                          "; a store name names its directory and its changelog topic, so it is " +
                                          kafka_name_rule + " (Kafka Streams' rule for store names too)");
}

}  // namespace

topology streams_builder::build() const { return topology(g_->nodes, g_->stores, g_->endpoints); }

topology::topology(std::vector<detail::node_spec> nodes, std::vector<detail::store_spec> stores,
                   std::vector<http::route> endpoints)
    : nodes_(std::move(nodes)), stores_(std::move(stores)), endpoints_(std::move(endpoints)) {
  if (nodes_.empty()) throw error(errc::invalid_topology, "the topology has no nodes: add a stream() and an operation");
  for (const auto& n : nodes_) {
    if (!n.factory) throw error(errc::invalid_topology, "node '" + n.name + "' has nothing to run (an empty split()?)");
    if (n.kind != detail::node_kind::processor) {
      const char* role = n.kind == detail::node_kind::source ? "read by node '" : "written by node '";
      for (const auto& t : n.topics) check_topic_name(t, role + n.name + "'");
    }
    for (const auto& s : n.stores) {
      if (!find_store(s))
        throw error(errc::invalid_topology, "processor '" + n.name + "' uses store '" + s +
                                                "' which was never added; declare it with add_state_store()");
    }
  }
  for (const auto& st : stores_) {
    if (st.global) check_topic_name(st.source_topic, "the table of global store '" + st.name + "'");
    check_store_name(st.name);
  }
  // Union-find: nodes joined by an edge or a (non-global) store share a sub-topology.
  std::vector<std::size_t> parent(nodes_.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::map<std::string, std::size_t> store_owner;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    for (auto p : nodes_[i].parents) parent[find_root(parent, i)] = find_root(parent, p);
    for (const auto& s : nodes_[i].stores) {
      if (find_store(s)->global) continue;
      auto [it, fresh] = store_owner.emplace(s, i);
      if (!fresh) parent[find_root(parent, i)] = find_root(parent, it->second);
    }
  }
  std::map<std::size_t, int> ids;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    auto root = find_root(parent, i);
    auto [it, fresh] = ids.emplace(root, static_cast<int>(subtopologies_.size()));
    if (fresh) subtopologies_.push_back({.id = it->second});
    auto& sub = subtopologies_[it->second];
    sub.nodes.push_back(i);
    if (nodes_[i].kind == detail::node_kind::source)
      for (const auto& t : nodes_[i].topics) sub.source_topics.push_back(t);
    for (const auto& s : nodes_[i].stores)
      if (!find_store(s)->global && std::find(sub.stores.begin(), sub.stores.end(), s) == sub.stores.end())
        sub.stores.push_back(s);
  }
  for (const auto& sub : subtopologies_)
    if (sub.source_topics.empty())
      throw error(errc::invalid_topology, "sub-topology " + std::to_string(sub.id) +
                                              " has no source: every operation must start from a stream()");
  std::map<std::string, int> topic_owner;
  for (const auto& sub : subtopologies_)
    for (const auto& t : sub.source_topics) {
      auto [it, fresh] = topic_owner.emplace(t, sub.id);
      if (!fresh && it->second != sub.id)
        throw error(errc::invalid_topology, "topic '" + t +
                                                "' is read by two unconnected parts of the topology; "
                                                "read it once and branch the stream instead");
    }
}

const detail::store_spec* topology::find_store(std::string_view name) const {
  for (const auto& s : stores_)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> topology::repartition_topics() const {
  std::set<std::string> out;
  for (const auto& n : nodes_)
    if (n.internal_topic)
      for (const auto& t : n.topics) out.insert(t);
  return {out.begin(), out.end()};
}

std::string detail::topology_access::resolve_topic(const node_spec& node, const std::string& topic,
                                                   const std::string& application_id) {
  return node.internal_topic ? detail::repartition_topic(application_id, topic) : topic;
}

namespace {

/// describe() and to_dot() show internal topics as they are named at run time.
constexpr std::string_view shown_application_id = "<application.id>";

std::vector<std::string> shown_topics(const detail::node_spec& n) {
  std::vector<std::string> out;
  for (const auto& t : n.topics)
    out.push_back(detail::topology_access::resolve_topic(n, t, std::string(shown_application_id)));
  return out;
}

}  // namespace

std::string topology::describe() const {
  std::ostringstream out;
  out << "Topologies:\n";
  std::vector<std::vector<std::size_t>> children(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    for (auto p : nodes_[i].parents) children[p].push_back(i);
  for (const auto& sub : subtopologies_) {
    out << "   Sub-topology: " << sub.id << "\n";
    for (auto i : sub.nodes) {
      const auto& n = nodes_[i];
      out << "    " << kind_word(n.kind) << ": " << n.name;
      if (n.kind == detail::node_kind::source)
        out << " (topics: " << list(shown_topics(n)) << ")";
      else if (n.kind == detail::node_kind::sink)
        out << " (topic: " << shown_topics(n).at(0) << ")";
      else
        out << " (stores: " << list(n.stores) << ")";
      out << "\n";
      if (!children[i].empty()) {
        std::vector<std::string> names;
        for (auto c : children[i]) names.push_back(nodes_[c].name);
        out << "      --> ";
        for (std::size_t k = 0; k < names.size(); ++k) out << (k ? ", " : "") << names[k];
        out << "\n";
      } else if (n.kind != detail::node_kind::sink) {
        out << "      --> none\n";
      }
      if (!n.parents.empty()) {
        out << "      <-- ";
        for (std::size_t k = 0; k < n.parents.size(); ++k) out << (k ? ", " : "") << nodes_[n.parents[k]].name;
        out << "\n";
      }
    }
    out << "\n";
  }
  bool any_global = false;
  for (const auto& s : stores_)
    if (s.global) {
      if (!any_global) out << "Global stores:\n";
      any_global = true;
      out << "    GlobalStore: " << s.name << " (topic: " << s.source_topic << ")\n";
    }
  std::vector<std::string> internal;
  for (const auto& t : repartition_topics()) internal.push_back(detail::repartition_topic(shown_application_id, t));
  for (const auto& s : stores_)
    if (s.logged && !s.global) internal.push_back(detail::changelog_topic(shown_application_id, s.name));
  if (!internal.empty()) {
    out << "Internal topics:\n";
    for (const auto& t : internal) out << "    " << t << "\n";
  }
  return out.str();
}

std::string topology::to_dot() const {
  std::ostringstream out;
  out << "digraph topology {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  auto id = [](std::size_t i) { return "n" + std::to_string(i); };
  std::set<std::string> topics;
  for (const auto& sub : subtopologies_) {
    out << "  subgraph cluster_" << sub.id << " {\n    label=\"sub-topology " << sub.id << "\";\n";
    for (auto i : sub.nodes) {
      const auto& n = nodes_[i];
      const char* shape = n.kind == detail::node_kind::processor ? "box" : "ellipse";
      out << "    " << id(i) << " [label=\"" << n.name << "\", shape=" << shape << "];\n";
    }
    out << "  }\n";
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    for (auto p : n.parents) out << "  " << id(p) << " -> " << id(i) << ";\n";
    for (const auto& t : shown_topics(n)) {
      std::string tid = "\"topic:" + t + "\"";
      if (topics.insert(t).second)
        out << "  " << tid << " [label=\"" << t << "\", shape=cds, style=filled, fillcolor=\"#e8f0fe\"];\n";
      if (n.kind == detail::node_kind::source)
        out << "  " << tid << " -> " << id(i) << ";\n";
      else
        out << "  " << id(i) << " -> " << tid << ";\n";
    }
    for (const auto& s : n.stores) {
      out << "  \"store:" << s << "\" [label=\"" << s << "\", shape=cylinder];\n";
      out << "  " << id(i) << " -> \"store:" << s << "\" [dir=both, style=dashed];\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace sluice
