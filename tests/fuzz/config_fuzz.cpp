// Fuzzes the configuration parser: properties text (config::from_string) and --set
// arguments (config::from_args), then every typed read of the sluice keys. The input is the
// properties text, then optionally a line "--" followed by one --set argument per line.
// Properties: parsing and each read return or throw sluice::error (invalid_config or io);
// every key set reads back as set.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"

namespace {

template <class F>
void expect_value_or_config_error(F&& read) {
  try {
    read();
  } catch (const sluice::error& e) {
    SLUICE_FUZZ_CHECK(e.code() == sluice::errc::invalid_config);
  }
}

void read_everything(const sluice::config& c) {
  expect_value_or_config_error([&] { (void)c.application_id(); });
  expect_value_or_config_error([&] { (void)c.guarantee(); });
  expect_value_or_config_error([&] { (void)c.commit_interval(); });
  expect_value_or_config_error([&] { (void)c.num_stream_threads(); });
  expect_value_or_config_error([&] { (void)c.state_dir(); });
  expect_value_or_config_error([&] { (void)c.bootstrap_servers(); });
  expect_value_or_config_error([&] { (void)c.dead_letter_topic(); });
  expect_value_or_config_error([&] { (void)c.get_ms("poll.ms"); });
  expect_value_or_config_error([&] { (void)c.get_int("state.memory.budget.bytes", 0, INT64_MAX); });
  expect_value_or_config_error([&] { (void)c.embedded(); });
  expect_value_or_config_error([&] { (void)c.get_error_policy("processing.error.handler"); });
  expect_value_or_config_error([&] { (void)c.get_error_policy("deserialization.error.handler"); });
  for (const char* client : {"consumer", "producer", "admin"})
    expect_value_or_config_error([&] { (void)c.client_properties(client); });
  for (const auto& [key, value] : c.values()) SLUICE_FUZZ_CHECK(c.get(key) == value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto split = input.find("\n--\n");
  const auto text = input.substr(0, split);

  sluice::config from_text;
  try {
    from_text = sluice::config::from_string(text, "fuzz.properties");
  } catch (const sluice::error& e) {
    SLUICE_FUZZ_CHECK(e.code() == sluice::errc::invalid_config);
    return 0;
  }
  read_everything(from_text);
  if (split == std::string_view::npos) return 0;

  // Each later line is one --set argument (never --help or --config: those exit or read files).
  std::vector<std::string> args{"fuzz-job"};
  std::string_view rest = input.substr(split + 4);
  while (!rest.empty()) {
    auto nl = rest.find('\n');
    args.push_back("--set=" + std::string(rest.substr(0, nl)));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  }
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  sluice::config from_args;
  try {
    from_args = sluice::config::from_args(static_cast<int>(argv.size()), argv.data()).settings;
  } catch (const sluice::error& e) {
    SLUICE_FUZZ_CHECK(e.code() == sluice::errc::invalid_config);
    return 0;
  }
  read_everything(from_args);
  return 0;
}
