// log_capture: the lines one of sluice's named loggers ("rdkafka" for librdkafka's bridge,
// "sluice.kafka" for the librdkafka layer) writes, kept in memory for a test to search.
//
// Lifecycle: construct before any client of the process logs through that name (the bridge
// looks its logger up once); the capture stays registered for the rest of the process, so a
// test using it is its own executable. Threading: librdkafka's threads log into it
// concurrently (a thread-safe ring buffer).
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

namespace sluice::test {

class log_capture {
 public:
  /// Registers the logger `name` writing into the capture; throws if it already exists.
  explicit log_capture(const std::string& name) : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(10'000)) {
    auto logger = std::make_shared<spdlog::logger>(name, sink_);
    logger->set_level(spdlog::level::debug);
    spdlog::register_logger(logger);
  }
  /// True when a captured line contains `text`.
  bool contains(std::string_view text) const {
    for (const auto& line : sink_->last_formatted())
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
  /// Every captured line, for a failure's message.
  std::string text() const {
    std::string out;
    for (const auto& line : sink_->last_formatted()) out += line;
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace sluice::test
