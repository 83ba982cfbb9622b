// Reflection helpers for the struct serdes: walk the members of a struct described with
// BOOST_HANA_DEFINE_STRUCT in declaration order, and recognise the container types
// json_serde and binary_serde support. Hana stays inside this folder and the serde
// headers; nothing else in sluice includes it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/hana/accessors.hpp>
#include <boost/hana/core/to.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/unpack.hpp>

#include "sluice/serde/serde.hpp"

namespace sluice::serde_detail {

/// Calls `f(name, member)` for each member of `obj` in declaration order; `name` is a
/// null-terminated string with static storage, `member` is a reference with the
/// constness of `obj`.
template <class S, class F>
void for_each_field(S& obj, F&& f) {
  using T = std::remove_cv_t<S>;
  boost::hana::for_each(boost::hana::accessors<T>(), [&](auto pair) {
    f(boost::hana::to<char const*>(boost::hana::first(pair)), boost::hana::second(pair)(obj));
  });
}

/// `f(type_identity<M>{}...)` over the member types of T, for compile-time folds.
template <class T, class F>
constexpr decltype(auto) unpack_member_types(F&& f) {
  return boost::hana::unpack(boost::hana::accessors<T>(), [&](auto... pairs) {
    return f(std::type_identity<std::remove_cvref_t<decltype(boost::hana::second(pairs)(std::declval<T&>()))>>{}...);
  });
}

template <class T>
inline constexpr bool is_optional = false;
template <class X>
inline constexpr bool is_optional<std::optional<X>> = true;

template <class T>
inline constexpr bool is_vector = false;
template <class X>
inline constexpr bool is_vector<std::vector<X>> = true;

template <class T>
inline constexpr bool is_string_map = false;
template <class X>
inline constexpr bool is_string_map<std::map<std::string, X>> = true;

/// Integer member types: every integer type but bool, which is its own kind.
template <class T>
inline constexpr bool is_integer = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <class T>
inline constexpr bool always_false = false;

}  // namespace sluice::serde_detail
