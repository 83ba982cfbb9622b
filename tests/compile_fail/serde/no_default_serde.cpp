// Must NOT compile: a plain struct (not described with BOOST_HANA_DEFINE_STRUCT) has no
// default serde. tests/unit/serde/CMakeLists.txt checks the static_assert's message.
#include "sluice/serde/serde.hpp"

struct undescribed {
  int x = 0;
};

int main() {
  std::string out;
  sluice::default_serde<undescribed>::serialize(undescribed{}, out);
}
