/* envhive.testing.counter._counter: the counter family on envhive's threaded batch core. */
#include "envhive/batch_module.h"

#include "_counter.h"

ENVHIVE_BATCH_MODULE(_counter, "envhive.testing.counter._counter", envhive_counter::Counter)
