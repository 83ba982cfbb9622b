// A table-table join of windowed tables: must fail saying windowed tables cannot be joined.
#include "sluice/table_joins.hpp"
#include "sluice/windowed_stream.hpp"
int main() {
  using namespace std::chrono_literals;
  sluice::streams_builder b;
  auto per_minute = [&](const char* topic, const char* store) {
    return b.stream<std::string, std::string>(topic)
        .group_by_key()
        .windowed_by(sluice::time_windows::of_size_with_no_grace(60s))
        .count(store);
  };
  per_minute("clicks", "clicks-per-minute")
      .join(per_minute("views", "views-per-minute"), [](std::int64_t c, std::int64_t v) { return c + v; }, "both");
}
