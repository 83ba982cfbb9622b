// shop-job: runs the shop topology until SIGTERM / SIGINT.
//   shop-job --config shop.properties [--set key=value]...   (bootstrap.servers and application.id at least)
#include <spdlog/spdlog.h>

#include <iostream>

#include "shop_topology.hpp"

int main(int argc, char** argv) {
  try {
    auto command = sluice::config::from_args(argc, argv, "The shop: enriched orders, totals, orders per minute.");
    if (command.action == sluice::command_line::request::print_help) {
      std::cout << command.help;
      return 0;
    }
    sluice::app app(shop::shop_topology(), std::move(command.settings));
    return app.run();
  } catch (const std::exception& e) {
    spdlog::error("shop-job: {}", e.what());
    return 1;
  }
}
