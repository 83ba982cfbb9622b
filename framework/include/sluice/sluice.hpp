// The umbrella header: everything an application writes against.
#pragma once

#include "sluice/app.hpp"
#include "sluice/builder.hpp"
#include "sluice/client.hpp"
#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/metrics.hpp"
#include "sluice/processor.hpp"
#include "sluice/record.hpp"
#include "sluice/serde/json.hpp"
#include "sluice/serde/serde.hpp"
#include "sluice/store.hpp"
#include "sluice/suppress.hpp"
#include "sluice/stream_joins.hpp"
#include "sluice/table_joins.hpp"
#include "sluice/topology.hpp"
#include "sluice/windowed_stream.hpp"
