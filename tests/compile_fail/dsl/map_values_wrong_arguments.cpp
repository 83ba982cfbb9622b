// map_values with a mapper of three arguments: must name both accepted signatures.
#include "sluice/builder.hpp"
int main() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").map_values([](int, int, int) { return 1; });
}
