// Everything of the dlm API except the store classes, which have their own
// headers (dlm/postgres_store.h, dlm/sqlite_store.h).
#pragma once

#include "dlm/app_transaction.h"
#include "dlm/clock.h"
#include "dlm/clustered_lock_service.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/lock.h"
#include "dlm/lock_configuration.h"
#include "dlm/lock_events.h"
#include "dlm/lock_guard.h"
#include "dlm/lock_manager.h"
#include "dlm/lock_metrics.h"
#include "dlm/lock_store.h"
#include "dlm/owner.h"
#include "dlm/version.h"
