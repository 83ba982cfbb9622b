// The error category of sluice::errc, so errors compare and print like std::error_code.
#include "sluice/error.hpp"

namespace sluice {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "sluice"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::ok: return "ok";
      case errc::invalid_config: return "invalid configuration";
      case errc::invalid_topology: return "invalid topology";
      case errc::kafka: return "Kafka error";
      case errc::kafka_fatal: return "fatal Kafka error";
      case errc::transaction_aborted: return "transaction aborted";
      case errc::fenced: return "producer fenced by a newer instance";
      case errc::serialization: return "serialization error";
      case errc::processing: return "processing error";
      case errc::state: return "state store error";
      case errc::timeout: return "timed out";
      case errc::io: return "I/O error";
    }
    return "unknown sluice error";
  }
};

}  // namespace

const std::error_category& sluice_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace sluice
