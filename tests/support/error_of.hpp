// error_of: runs a callable that must throw sluice::error with a given code, and returns the
// message so a test can check what it names. Fails the test when nothing (or something else)
// is thrown.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "sluice/error.hpp"

namespace sluice::test {

template <class F>
std::string error_of(F&& f, sluice::errc expected) {
  try {
    f();
  } catch (const sluice::error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a sluice::error";
  return {};
}

}  // namespace sluice::test
