// filter with a predicate over the wrong types: must fail with the expected signature.
#include "sluice/builder.hpp"
int main() {
  sluice::streams_builder b;
  b.stream<std::string, std::string>("in").filter([](int x) { return x > 0; });
}
