// default_serde and default_state_serde pick the serde the DSL uses when none is given.
#include <type_traits>

#include <gtest/gtest.h>

#include "serde_test_util.hpp"
#include "sluice/serde/serde.hpp"
#include "test_types.hpp"

namespace sluice {
namespace {

using testing::order;

static_assert(std::is_same_v<default_serde<std::string>, string_serde>);
static_assert(std::is_same_v<default_serde<std::int16_t>, int16_serde>);
static_assert(std::is_same_v<default_serde<std::int32_t>, int32_serde>);
static_assert(std::is_same_v<default_serde<std::int64_t>, int64_serde>);
static_assert(std::is_same_v<default_serde<std::uint32_t>, fixed_int_serde<std::uint32_t>>);
static_assert(std::is_same_v<default_serde<double>, double_serde>);
static_assert(std::is_same_v<default_serde<float>, float_serde>);
static_assert(std::is_same_v<default_serde<bool>, bool_serde>);
static_assert(std::is_same_v<default_serde<std::monostate>, void_serde>);
static_assert(std::is_same_v<default_serde<order>, json_serde<order>>);
static_assert(std::is_same_v<default_state_serde<order>, binary_serde<order>>);
static_assert(std::is_same_v<default_state_serde<std::int64_t>, int64_serde>);
static_assert(std::is_same_v<default_state_serde<std::string>, string_serde>);
static_assert(serde_for<default_serde<order>, order>);
static_assert(serde<default_state_serde<order>>);

TEST(default_serde, struct_values_on_topics_are_json_and_in_state_binary) {
  const order o = testing::sample_order();
  std::string topic_bytes;
  std::string state_bytes;
  default_serde<order>::serialize(o, topic_bytes);
  default_state_serde<order>::serialize(o, state_bytes);
  EXPECT_EQ(topic_bytes.front(), '{');
  EXPECT_EQ(state_bytes.front(), '\x01');
  EXPECT_LT(state_bytes.size(), topic_bytes.size());
  EXPECT_EQ(default_serde<order>::deserialize(topic_bytes), o);
  EXPECT_EQ(default_state_serde<order>::deserialize(state_bytes), o);
}

}  // namespace
}  // namespace sluice
