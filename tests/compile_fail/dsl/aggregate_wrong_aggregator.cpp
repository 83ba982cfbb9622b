// aggregate whose aggregator ignores the aggregate argument: must name the signature.
#include "sluice/builder.hpp"
int main() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").group_by_key().aggregate(
      [] { return std::int64_t{0}; }, [](const std::string&, const std::string&) { return std::int64_t{1}; }, "s");
}
