// Test helpers for serdes: hex dumps and catching the specific serialization_error.
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "sluice/serde/serde.hpp"

namespace sluice::testing {

inline std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    if (!s.empty()) s += ' ';
    s += digits[c >> 4];
    s += digits[c & 0xF];
  }
  return s;
}

/// Runs `f`, expects a serialization_error with errc::serialization, returns its message
/// ("<no error>" when nothing was thrown, so substring checks fail visibly).
template <class F>
std::string serialization_error_of(F&& f) {
  try {
    f();
  } catch (const sluice::serialization_error& e) {
    EXPECT_EQ(e.code(), sluice::errc::serialization);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected serialization_error, got another exception: " << e.what();
    return "<wrong exception>";
  }
  ADD_FAILURE() << "expected serialization_error, nothing was thrown";
  return "<no error>";
}

template <class S>
typename S::value_type round_trip(const typename S::value_type& value) {
  std::string bytes;
  S::serialize(value, bytes);
  return S::deserialize(bytes);
}

}  // namespace sluice::testing
