// The DSL's nodes and store codecs of the commonest types, instantiated once here; their
// headers declare them `extern template`, so a unit using them compiles only the calls.
#include <cstdint>
#include <optional>
#include <string>

#include "sluice/detail/dsl_nodes.hpp"
#include "sluice/detail/store_codec.hpp"

namespace sluice::detail {

template class source_node<std::string, std::string, string_serde, string_serde>;
template class source_node<std::optional<std::string>, std::string, string_serde, string_serde>;
template class source_node<std::string, std::int64_t, string_serde, int64_serde>;
template class sink_node<std::string, std::string, string_serde, string_serde>;
template class sink_node<std::string, std::int64_t, string_serde, int64_serde>;
template class counting_node<std::string>;

template std::shared_ptr<const store_codec> make_store_codec<std::string, std::string>();
template std::shared_ptr<const store_codec> make_store_codec<std::string, std::int64_t>();
template std::shared_ptr<const store_codec>
make_store_codec<std::string, std::string, default_state_serde<std::string>,
                 timestamp_skipping_serde<default_state_serde<std::string>>>();
template std::shared_ptr<const store_codec>
make_store_codec<std::string, std::int64_t, default_state_serde<std::string>,
                 timestamp_skipping_serde<default_state_serde<std::int64_t>>>();

}  // namespace sluice::detail
