// process() given a processor object instead of a supplier: must say a supplier is expected.
#include "sluice/builder.hpp"
struct p : sluice::processor<std::string, std::string> {
  void process(const sluice::record<std::string, std::string>&) override {}
};
int main() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").process(42);
}
