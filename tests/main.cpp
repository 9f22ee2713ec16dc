#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "sim/pool_checker.h"

// As the CLI and the GUI do at start-up: the pytorch model checks the pools an importer infers.
static const bool kPoolCheckerInstalled = (fraglab::install_pool_checker(), true);
