// Everything an application needs of the dlm API except the store classes,
// which have their own headers (dlm/postgres_store.h, dlm/sqlite_store.h,
// dlm/store_url.h). The store interface itself (dlm/lock_store.h,
// dlm/lock_store_admin.h, dlm/lock_store_wrapper.h) is for those who write a
// store or a tool, and is not included here.
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
#include "dlm/lock_record.h"
#include "dlm/owner.h"
#include "dlm/version.h"
