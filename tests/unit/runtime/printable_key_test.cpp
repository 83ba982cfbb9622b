// How error messages and log lines show a record key (sluice/error.hpp): quoted, bounded,
// and unable to break a log line.
#include <gtest/gtest.h>

#include <string>

#include "sluice/error.hpp"

namespace sluice {
namespace {

TEST(printable_key, printable_ascii_shows_quoted_as_is) {
  EXPECT_EQ(printable_key(std::string_view("c-42")), "'c-42'");
  EXPECT_TRUE(printable_as_is("c-42"));
  EXPECT_TRUE(printable_as_is(""));
}

TEST(printable_key, a_null_key_shows_as_null) { EXPECT_EQ(printable_key(std::nullopt), "null"); }

TEST(printable_key, control_bytes_and_backslash_show_as_hex_escapes) {
  // A line feed in a key cannot forge a second log line; '\' cannot forge an escape.
  EXPECT_EQ(printable_key(std::string_view("a\nb\\c\xff")), "'a\\x0ab\\x5cc\\xff'");
  EXPECT_FALSE(printable_as_is("a\nb"));
  EXPECT_FALSE(printable_as_is("a\\b"));
  EXPECT_FALSE(printable_as_is("caf\xc3\xa9"));
}

TEST(printable_key, a_long_key_is_cut_at_100_bytes) {
  const std::string hundred(100, 'k');
  EXPECT_TRUE(printable_as_is(hundred));
  EXPECT_EQ(printable_key(std::string_view(hundred)), "'" + hundred + "'");
  const std::string longer = hundred + "tail";
  EXPECT_FALSE(printable_as_is(longer));
  EXPECT_EQ(printable_key(std::string_view(longer)), "'" + hundred + "...'");
}

}  // namespace
}  // namespace sluice
