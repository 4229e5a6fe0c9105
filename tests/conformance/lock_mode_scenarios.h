// Scenarios of docs/guide.md "Shared locks and fair queueing": the compatibility
// matrix, SHARED holders, takeover, inspection, fair queueing and deadlock
// detection across modes. Run on every store by the conformance suite and on
// the FakeStore by the unit tests, so the fake and the stores keep one
// behaviour. Each scenario is bounded in time and reports through gtest.
#pragma once

#include <functional>
#include <memory>

#include "dlm/lock_manager.h"

namespace dlm::test::modes {

// A new initialized manager on the scenario's database. Every manager it
// makes has the same clientId and farm, so one id names one key for all of
// them; lockTtl 30 s, waitForLock 5 s, sleepBetweenRetries about 20 ms.
using ManagerFactory = std::function<std::unique_ptr<DistributedLockManager>()>;

// Held S/X x wanted S/X x (same key, held on an ancestor, held on a
// descendant, sibling), both orders, a different owner on each side.
void compatibilityMatrix(const ManagerFactory& make);
// Three SHARED holders at once: own tokens, fencing tokens one above the
// previous acquisition of the key, release and extension per holder.
void sharedHoldersTogether(const ManagerFactory& make);
// An EXCLUSIVE acquireLock waits until the last reader releases.
void exclusiveWaitsForTheLastReader(const ManagerFactory& make);
// Expired EXCLUSIVE taken by SHARED, expired SHARED taken by EXCLUSIVE; an
// expired SHARED holder is not taken over by another SHARED one.
void takeoverAcrossModes(const ManagerFactory& make);
// describeHolders / describeLock / holdersOf / listHeld / listWaiters show
// every holder and waiter with its mode.
void inspectionShowsModes(const ManagerFactory& make);
// A waiting EXCLUSIVE request on `a` refuses new SHARED `a` and SHARED or
// EXCLUSIVE `a.b` ("queued") until its waiter gives up.
void waitingExclusiveHoldsBackNewcomers(const ManagerFactory& make);
// A waiting SHARED request holds back EXCLUSIVE attempts on its path and no
// SHARED ones.
void waitingSharedHoldsBackOnlyExclusive(const ManagerFactory& make);
// A parent waiter is served while children keep arriving.
void parentServedWhileChildrenKeepArriving(const ManagerFactory& make);
// A writer is served while readers keep arriving.
void writerServedWhileReadersKeepArriving(const ManagerFactory& make);
// SHARED `a` held, EXCLUSIVE `a` asked by the same owner: DEADLOCK_DETECTED.
void upgradeIsADeadlock(const ManagerFactory& make);
// A holds SHARED `a`, B's EXCLUSIVE `a` waits, A asks SHARED `a.b`:
// DEADLOCK_DETECTED through the queue edge.
void queueEdgeClosesADeadlock(const ManagerFactory& make);

}  // namespace dlm::test::modes
