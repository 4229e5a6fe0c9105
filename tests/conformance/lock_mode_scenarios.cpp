#include "conformance/lock_mode_scenarios.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlm/lock_store_admin.h"
#include "support/error_code.h"
#include "support/eventually.h"
#include "support/joining_thread.h"
#include "support/owners.h"

namespace dlm::test::modes {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr LockLevel kLevel = LockLevel::DC;
constexpr LockMode kShared = LockMode::SHARED;
constexpr LockMode kExclusive = LockMode::EXCLUSIVE;

// One tryAcquireLock under `owner`: granted, or the refusal's message.
struct Attempt {
  bool granted = false;
  std::string message;
  bool queued() const {
    return !granted && message.find("queued") != std::string::npos;
  }
};

Attempt tryAs(DistributedLockManager& m, Lock& lock, const std::string& owner,
              milliseconds ttl = seconds(30)) {
  return asOwner(owner, [&] {
    try {
      m.tryAcquireLock(lock, ttl);
      return Attempt{true, ""};
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE) << e.what();
      return Attempt{false, e.what()};
    }
  });
}

// acquireLock(lock, ttl 30 s, timeout) under `owner`, on the calling
// thread: nullopt when it acquired, else the code it threw.
std::optional<ErrorCode> acquireAs(DistributedLockManager& m, Lock& lock,
                                   const std::string& owner,
                                   milliseconds timeout) {
  try {
    asOwner(owner, [&] { m.acquireLock(lock, seconds(30), timeout); });
    return std::nullopt;
  } catch (const DLMException& e) {
    return e.code();
  }
}

// Waits (bounded) until `owner` has a live request row on `lock`'s key in
// `mode`, and then until the store's clock has moved past its recording, so
// that every later request or attempt is younger (ties in the recording time
// would be ordered by owner).
bool requestRecorded(DistributedLockManager& m, const Lock& lock,
                     const std::string& owner, LockMode mode) {
  StoreTime recordedAt;
  const bool seen = eventually([&] {
    for (const WaitRecord& w :
         adminOf(m.store()).listWaiters(lock.storeKey())) {
      if (w.key == lock.storeKey() && w.owner == m.listedOwner(owner) && w.mode == mode) {
        recordedAt = w.requestedAt;
        return true;
      }
    }
    return false;
  });
  return seen && eventually([&] { return m.store().now() > recordedAt; },
                            seconds(10), milliseconds(1));
}

// Waits (bounded) until the store's clock is past the lock's expiry.
bool expired(DistributedLockManager& m, const Lock& lock) {
  return eventually([&] { return m.store().now() > lock.expiresAt(); },
                    seconds(10), milliseconds(5));
}

std::string describe(LockMode held, LockMode wanted, const char* relation,
                     bool heldFirst) {
  return std::string("held ") + lockModeName(held) + " " + relation +
         ", wanted " + lockModeName(wanted) +
         (heldFirst ? " (held taken first)" : " (wanted taken first)");
}

}  // namespace

void compatibilityMatrix(const ManagerFactory& make) {
  auto holder = make();
  auto asker = make();
  struct Relation {
    const char* name;
    const char* heldId;  // the wanted lock is always "<root>.a.b"
  };
  const Relation relations[] = {{"on the same key", "a.b"},
                                {"on an ancestor", "a"},
                                {"on a descendant", "a.b.c"},
                                {"on a sibling", "a.c"}};
  int round = 0;
  for (LockMode held : {kShared, kExclusive}) {
    for (LockMode wanted : {kShared, kExclusive}) {
      for (const Relation& rel : relations) {
        for (bool heldFirst : {true, false}) {
          const std::string root = "matrix" + std::to_string(round++);
          Lock h =
              holder->getLockInstance(root + "." + rel.heldId, kLevel, held);
          Lock w = asker->getLockInstance(root + ".a.b", kLevel, wanted);
          const bool compatible = std::string(rel.name) == "on a sibling" ||
                                  (held == kShared && wanted == kShared);
          const std::string what = describe(held, wanted, rel.name, heldFirst);
          Attempt first = heldFirst ? tryAs(*holder, h, "owner-held")
                                    : tryAs(*asker, w, "owner-wanted");
          ASSERT_TRUE(first.granted) << what << ": " << first.message;
          Attempt second = heldFirst ? tryAs(*asker, w, "owner-wanted")
                                     : tryAs(*holder, h, "owner-held");
          EXPECT_EQ(second.granted, compatible)
              << what << ": " << second.message;
          EXPECT_FALSE(second.queued()) << what << ": " << second.message;
          if (h.isAcquired()) {
            EXPECT_TRUE(holder->releaseLock(h)) << what;
          }
          if (w.isAcquired()) {
            EXPECT_TRUE(asker->releaseLock(w)) << what;
          }
        }
      }
    }
  }
}

void sharedHoldersTogether(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  Lock writer = m->getLockInstance("doc", kLevel, kExclusive);
  ASSERT_TRUE(tryAs(*m, writer, "writer").granted);
  const std::int64_t base = writer.fencingToken();
  ASSERT_TRUE(m->releaseLock(writer));

  std::vector<Lock> readers;
  for (int i = 0; i < 3; ++i) {
    DistributedLockManager& mm = i % 2 == 0 ? *m : *other;
    readers.push_back(mm.getLockInstance("doc", kLevel, kShared));
    const Attempt a = tryAs(mm, readers.back(), "reader-" + std::to_string(i));
    ASSERT_TRUE(a.granted) << "reader " << i << ": " << a.message;
    EXPECT_EQ(readers.back().fencingToken(), base + 1 + i)
        << "each acquisition takes the key's next fencing token";
  }
  Lock probe = other->getLockInstance("doc", kLevel, kExclusive);
  auto holders = other->describeHolders(probe);
  ASSERT_EQ(holders.size(), 3U);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(holders[i].mode, kShared);
    EXPECT_EQ(holders[i].owner, m->listedOwner("reader-" + std::to_string(i)));
    EXPECT_EQ(holders[i].fencingToken, readers[i].fencingToken());
    EXPECT_TRUE(holders[i].held);
  }

  // Release of one reader leaves the others.
  ASSERT_TRUE(other->releaseLock(readers[1]));
  holders = other->describeHolders(probe);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].owner, m->listedOwner("reader-0"));
  EXPECT_EQ(holders[1].owner, m->listedOwner("reader-2"));

  // Extension is per holder: reader-0's moves, reader-2's stays.
  m->extendLock(readers[0], seconds(120));
  holders = other->describeHolders(probe);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_GT(holders[0].expiresAt, holders[1].expiresAt + seconds(60));

  // A further reader still joins, with the next token.
  Lock late = other->getLockInstance("doc", kLevel, kShared);
  ASSERT_TRUE(tryAs(*other, late, "reader-3").granted);
  EXPECT_EQ(late.fencingToken(), base + 4);
  EXPECT_EQ(other->describeHolders(probe).size(), 3U);

  // A writer is refused while any of them holds.
  EXPECT_FALSE(tryAs(*other, probe, "writer").granted);
  EXPECT_TRUE(m->releaseLock(readers[0]));
  EXPECT_TRUE(m->releaseLock(readers[2]));
  EXPECT_FALSE(tryAs(*other, probe, "writer").granted);
  EXPECT_TRUE(other->releaseLock(late));
  ASSERT_TRUE(tryAs(*other, probe, "writer").granted);
  EXPECT_EQ(probe.fencingToken(), base + 5);
  EXPECT_TRUE(other->releaseLock(probe));
}

void exclusiveWaitsForTheLastReader(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  Lock r0 = m->getLockInstance("book", kLevel, kShared);
  Lock r1 = m->getLockInstance("book", kLevel, kShared);
  ASSERT_TRUE(tryAs(*m, r0, "reader-0").granted);
  ASSERT_TRUE(tryAs(*m, r1, "reader-1").granted);

  Lock w = other->getLockInstance("book", kLevel, kExclusive);
  std::atomic<bool> done{false};
  std::optional<ErrorCode> failed;
  JoiningThread writer([&] {
    failed = acquireAs(*other, w, "writer", seconds(8));
    done = true;
  });
  ASSERT_TRUE(requestRecorded(*m, w, "writer", kExclusive));
  ASSERT_TRUE(m->releaseLock(r0));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(done.load()) << "the writer got in while a reader held";
  ASSERT_TRUE(m->releaseLock(r1));
  writer.join();
  ASSERT_FALSE(failed.has_value())
      << "the writer failed with code " << static_cast<int>(*failed);
  EXPECT_TRUE(w.isAcquired());
  EXPECT_GT(w.fencingToken(), r1.fencingToken());
  EXPECT_TRUE(other->releaseLock(w));
}

void takeoverAcrossModes(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  const milliseconds shortTtl(150);

  // An expired EXCLUSIVE holder is taken over by a SHARED acquisition.
  Lock x = m->getLockInstance("t1", kLevel, kExclusive);
  ASSERT_TRUE(tryAs(*m, x, "old", shortTtl).granted);
  ASSERT_TRUE(expired(*m, x));
  Lock s = other->getLockInstance("t1", kLevel, kShared);
  ASSERT_TRUE(tryAs(*other, s, "new").granted);
  EXPECT_GT(s.fencingToken(), x.fencingToken());
  EXPECT_EQ(codeOf([&] { m->extendLock(x); }), ErrorCode::LOCK_NOT_HELD);
  auto holders = other->describeHolders(s);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].mode, kShared);
  EXPECT_EQ(holders[0].owner, m->listedOwner("new"));
  EXPECT_TRUE(other->releaseLock(s));

  // An expired SHARED holder is taken over by an EXCLUSIVE acquisition.
  Lock s2 = m->getLockInstance("t2", kLevel, kShared);
  ASSERT_TRUE(tryAs(*m, s2, "old", shortTtl).granted);
  ASSERT_TRUE(expired(*m, s2));
  Lock x2 = other->getLockInstance("t2", kLevel, kExclusive);
  ASSERT_TRUE(tryAs(*other, x2, "new").granted);
  EXPECT_GT(x2.fencingToken(), s2.fencingToken());
  EXPECT_EQ(codeOf([&] { m->extendLock(s2); }), ErrorCode::LOCK_NOT_HELD);
  holders = other->describeHolders(x2);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].mode, kExclusive);
  EXPECT_TRUE(other->releaseLock(x2));

  // Another SHARED acquisition does not take an expired SHARED hold over:
  // its holder may still extend it, as an expired lock nobody took.
  Lock s3 = m->getLockInstance("t3", kLevel, kShared);
  ASSERT_TRUE(tryAs(*m, s3, "old", shortTtl).granted);
  ASSERT_TRUE(expired(*m, s3));
  Lock s4 = other->getLockInstance("t3", kLevel, kShared);
  ASSERT_TRUE(tryAs(*other, s4, "new").granted);
  m->extendLock(s3, seconds(30));
  EXPECT_EQ(other->describeHolders(s4).size(), 2U);
  EXPECT_TRUE(m->releaseLock(s3));
  EXPECT_TRUE(other->releaseLock(s4));
}

void inspectionShowsModes(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  Lock r0 = m->getLockInstance("shelf", kLevel, kShared);
  Lock r1 = other->getLockInstance("shelf", kLevel, kShared);
  Lock packer = m->getLockInstance("crate", kLevel, kExclusive);
  ASSERT_TRUE(tryAs(*m, r0, "reader-0").granted);
  ASSERT_TRUE(tryAs(*other, r1, "reader-1").granted);
  ASSERT_TRUE(tryAs(*m, packer, "packer").granted);

  Lock probe = other->getLockInstance("shelf", kLevel, kExclusive);
  auto holders = other->describeHolders(probe);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].owner, m->listedOwner("reader-0"));
  EXPECT_EQ(holders[1].owner, m->listedOwner("reader-1"));
  for (const auto& h : holders) EXPECT_EQ(h.mode, kShared);
  auto first = other->describeLock(probe);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->owner, other->listedOwner("reader-0"));
  EXPECT_EQ(first->mode, kShared);
  EXPECT_EQ(first->fencingToken, r0.fencingToken());
  auto crate =
      other->describeHolders(other->getLockInstance("crate", kLevel, kShared));
  ASSERT_EQ(crate.size(), 1U);
  EXPECT_EQ(crate[0].mode, kExclusive);
  EXPECT_EQ(crate[0].owner, m->listedOwner("packer"));

  auto stored = adminOf(other->store()).holdersOf(r0.storeKey());
  ASSERT_EQ(stored.size(), 2U);
  EXPECT_EQ(stored[0].mode, kShared);
  EXPECT_EQ(stored[1].mode, kShared);
  EXPECT_EQ(stored[0].key, r0.storeKey());

  const std::string& shelfKey = r0.storeKey();
  const std::string prefix = shelfKey.substr(0, shelfKey.size() - 5);
  auto held = adminOf(other->store()).listHeld(prefix);
  ASSERT_EQ(held.size(), 3U);
  EXPECT_EQ(held[0].key, packer.storeKey());
  EXPECT_EQ(held[0].mode, kExclusive);
  EXPECT_EQ(held[0].owner, m->listedOwner("packer"));
  EXPECT_EQ(held[1].key, shelfKey);
  EXPECT_EQ(held[1].mode, kShared);
  EXPECT_EQ(held[1].owner, m->listedOwner("reader-0"));
  EXPECT_EQ(held[2].mode, kShared);
  EXPECT_EQ(held[2].owner, m->listedOwner("reader-1"));
  for (const auto& h : held) EXPECT_TRUE(h.held);

  // Waiters in both modes.
  Lock mover = other->getLockInstance("shelf", kLevel, kExclusive);
  Lock counter = other->getLockInstance("crate", kLevel, kShared);
  std::atomic<int> failures{0};
  auto wait = [&](Lock& lock, const char* owner) {
    asOwner(owner, [&] {
      try {
        other->acquireLock(lock, seconds(30), seconds(8));
      } catch (const DLMException&) {
        ++failures;
      }
    });
  };
  {
    JoiningThread a([&] { wait(mover, "mover"); });
    JoiningThread b([&] { wait(counter, "counter"); });
    EXPECT_TRUE(requestRecorded(*m, mover, "mover", kExclusive));
    EXPECT_TRUE(requestRecorded(*m, counter, "counter", kShared));
    auto waiters = adminOf(m->store()).listWaiters(prefix);
    ASSERT_EQ(waiters.size(), 2U);
    EXPECT_EQ(waiters[0].key, packer.storeKey());
    EXPECT_EQ(waiters[0].owner, m->listedOwner("counter"));
    EXPECT_EQ(waiters[0].mode, kShared);
    EXPECT_EQ(waiters[1].key, shelfKey);
    EXPECT_EQ(waiters[1].owner, m->listedOwner("mover"));
    EXPECT_EQ(waiters[1].mode, kExclusive);
    EXPECT_TRUE(m->releaseLock(packer));
    EXPECT_TRUE(m->releaseLock(r0));
    EXPECT_TRUE(other->releaseLock(r1));
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(mover.isAcquired() && counter.isAcquired());
  EXPECT_TRUE(other->releaseLock(mover));
  EXPECT_TRUE(other->releaseLock(counter));
  EXPECT_TRUE(adminOf(m->store()).listWaiters(prefix).empty());
}

void waitingExclusiveHoldsBackNewcomers(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  Lock reader = m->getLockInstance("a", kLevel, kShared);
  ASSERT_TRUE(tryAs(*m, reader, "reader").granted);

  // The writer waits for the reader, which keeps its lock: it gives up.
  Lock w = other->getLockInstance("a", kLevel, kExclusive);
  const milliseconds patience(1500);
  ErrorCode writerCode = ErrorCode::INTERNAL_ERROR;
  JoiningThread writer([&] {
    writerCode = codeOf([&] {
      asOwner("writer", [&] { other->acquireLock(w, seconds(30), patience); });
    });
  });
  ASSERT_TRUE(requestRecorded(*m, w, "writer", kExclusive));

  Lock sa = m->getLockInstance("a", kLevel, kShared);
  Lock sab = m->getLockInstance("a.b", kLevel, kShared);
  Lock xab = m->getLockInstance("a.b", kLevel, kExclusive);
  Lock unrelated = m->getLockInstance("b", kLevel, kExclusive);
  for (Lock* l : {&sa, &sab}) {
    const Attempt a = tryAs(*m, *l, "newcomer");
    EXPECT_FALSE(a.granted) << l->id() << " " << lockModeName(l->lockMode())
                            << " granted past the queued writer";
    EXPECT_TRUE(a.queued()) << a.message;
    EXPECT_NE(a.message.find(w.storeKey()), std::string::npos)
        << "names the key the earlier waiter waits for: " << a.message;
  }
  // (Also in the way of the reader's hold on the ancestor.)
  EXPECT_FALSE(tryAs(*m, xab, "newcomer").granted);
  ASSERT_TRUE(tryAs(*m, unrelated, "newcomer").granted);
  EXPECT_TRUE(m->releaseLock(unrelated));

  writer.join();
  EXPECT_EQ(writerCode, ErrorCode::LOCK_UNAVAILABLE);
  // The writer gave up: nothing queued any more.
  EXPECT_TRUE(tryAs(*m, sa, "newcomer").granted);
  EXPECT_TRUE(tryAs(*m, sab, "newcomer").granted);
  EXPECT_TRUE(m->releaseLock(sa));
  EXPECT_TRUE(m->releaseLock(sab));
  EXPECT_TRUE(m->releaseLock(reader));
}

void waitingSharedHoldsBackOnlyExclusive(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  Lock holder = m->getLockInstance("s.b", kLevel, kExclusive);
  ASSERT_TRUE(tryAs(*m, holder, "writer").granted);
  Lock r = other->getLockInstance("s", kLevel, kShared);
  std::optional<ErrorCode> readerFailed;
  JoiningThread reader(
      [&] { readerFailed = acquireAs(*other, r, "reader", seconds(8)); });
  ASSERT_TRUE(requestRecorded(*m, r, "reader", kShared));

  Lock sc = m->getLockInstance("s.c", kLevel, kShared);
  Lock scd = m->getLockInstance("s.c.d", kLevel, kShared);
  Lock xc = m->getLockInstance("s.c", kLevel, kExclusive);
  Attempt a = tryAs(*m, sc, "newcomer");
  EXPECT_TRUE(a.granted) << "a waiting SHARED request held back a SHARED "
                            "attempt: "
                         << a.message;
  a = tryAs(*m, scd, "newcomer-2");
  EXPECT_TRUE(a.granted) << a.message;
  if (sc.isAcquired()) {
    EXPECT_TRUE(m->releaseLock(sc));
  }
  if (scd.isAcquired()) {
    EXPECT_TRUE(m->releaseLock(scd));
  }
  a = tryAs(*m, xc, "newcomer");
  EXPECT_FALSE(a.granted);
  EXPECT_TRUE(a.queued()) << a.message;

  ASSERT_TRUE(m->releaseLock(holder));
  reader.join();
  EXPECT_FALSE(readerFailed.has_value());
  EXPECT_TRUE(r.isAcquired());
  EXPECT_TRUE(other->releaseLock(r));
}

namespace {

// One grant to an arriving acquirer: when its attempt started, when it had
// the lock.
struct Grant {
  steady_clock::time_point started;
  steady_clock::time_point granted;
};

// Arrivals keep taking `arrivalIds` in `arrivalMode` (each hold a few ms,
// overlapping) while one acquireLock of `waiterId` in EXCLUSIVE waits: the
// waiter must be served, and no arrival whose attempt started after the
// waiter's request was recorded may be granted before the waiter.
void servedWhileOthersArrive(const ManagerFactory& make,
                             const std::string& waiterId,
                             const std::string& pinId,
                             const std::vector<std::string>& arrivalIds,
                             LockMode arrivalMode) {
  auto m = make();
  // A lock of the arrivals' kind held until the waiter is queued, so it
  // certainly waits.
  Lock pin = m->getLockInstance(pinId, kLevel, arrivalMode);
  ASSERT_TRUE(tryAs(*m, pin, "pin").granted);

  std::atomic<bool> stop{false};
  std::atomic<int> total{0};
  std::vector<std::vector<Grant>> grants(arrivalIds.size());
  std::vector<std::unique_ptr<DistributedLockManager>> managers;
  for (std::size_t i = 0; i < arrivalIds.size(); ++i) {
    managers.push_back(make());
  }
  const auto giveUp = steady_clock::now() + seconds(30);
  std::vector<std::unique_ptr<JoiningThread>> arrivals;
  for (std::size_t i = 0; i < arrivalIds.size(); ++i) {
    arrivals.push_back(std::make_unique<JoiningThread>([&, i] {
      OwnerScope scope("arrival-" + std::to_string(i));
      DistributedLockManager& mm = *managers[i];
      while (!stop.load() && steady_clock::now() < giveUp) {
        Lock l = mm.getLockInstance(arrivalIds[i], kLevel, arrivalMode);
        const auto started = steady_clock::now();
        try {
          mm.tryAcquireLock(l);
        } catch (const DLMException&) {
          std::this_thread::sleep_for(milliseconds(1));
          continue;
        }
        grants[i].push_back({started, steady_clock::now()});
        ++total;
        std::this_thread::sleep_for(milliseconds(4 + static_cast<int>(i)));
        try {
          mm.releaseLock(l);
        } catch (const DLMException&) {
          // Expires by its TTL; the waiter's bound catches a leak.
        }
      }
    }));
  }
  EXPECT_TRUE(eventually([&] { return total.load() >= 10; }))
      << "the arrivals never got going";

  auto waiterManager = make();
  Lock waiter = waiterManager->getLockInstance(waiterId, kLevel, kExclusive);
  steady_clock::time_point servedAt{};
  std::string waiterError;
  {
    JoiningThread w([&] {
      asOwner("waiter", [&] {
        try {
          waiterManager->acquireLock(waiter, seconds(30), seconds(5));
          servedAt = steady_clock::now();
          std::this_thread::sleep_for(milliseconds(20));
          waiterManager->releaseLock(waiter);
        } catch (const DLMException& e) {
          waiterError = e.what();
        }
      });
    });
    const bool recorded = requestRecorded(*m, waiter, "waiter", kExclusive);
    const auto queuedAt = steady_clock::now();
    EXPECT_TRUE(recorded) << "the waiter never recorded its request";
    EXPECT_TRUE(m->releaseLock(pin));
    w.join();
    stop = true;
    for (auto& t : arrivals) t->join();

    ASSERT_TRUE(waiterError.empty()) << "the waiter was not served while "
                                        "others kept arriving: "
                                     << waiterError;
    int before = 0;
    int overtook = 0;
    for (const auto& list : grants) {
      for (const Grant& g : list) {
        if (g.granted < queuedAt) ++before;
        if (g.started > queuedAt && g.granted < servedAt) ++overtook;
      }
    }
    EXPECT_EQ(overtook, 0)
        << "arrivals that started after the waiter's request was recorded "
           "were granted before it";
    EXPECT_GT(before, 0);
  }
}

}  // namespace

void parentServedWhileChildrenKeepArriving(const ManagerFactory& make) {
  servedWhileOthersArrive(make, "p", "p.c0", {"p.c1", "p.c2", "p.c3", "p.c4"},
                          kExclusive);
}

void writerServedWhileReadersKeepArriving(const ManagerFactory& make) {
  servedWhileOthersArrive(make, "r", "r", {"r", "r", "r", "r"}, kShared);
}

void upgradeIsADeadlock(const ManagerFactory& make) {
  auto m = make();
  Lock shared = m->getLockInstance("u", kLevel, kShared);
  Lock exclusive = m->getLockInstance("u", kLevel, kExclusive);
  ASSERT_TRUE(tryAs(*m, shared, "upgrader").granted);
  const auto start = steady_clock::now();
  EXPECT_EQ(codeOf([&] {
              asOwner("upgrader", [&] {
                m->acquireLock(exclusive, seconds(30), seconds(10));
              });
            }),
            ErrorCode::DEADLOCK_DETECTED);
  EXPECT_LT(steady_clock::now() - start, seconds(3))
      << "the deadlock was found at once, not at the timeout";
  EXPECT_FALSE(exclusive.isAcquired());
  EXPECT_TRUE(m->releaseLock(shared));
}

void queueEdgeClosesADeadlock(const ManagerFactory& make) {
  auto m = make();
  auto other = make();
  Lock a = m->getLockInstance("q", kLevel, kShared);
  ASSERT_TRUE(tryAs(*m, a, "A").granted);
  Lock b = other->getLockInstance("q", kLevel, kExclusive);
  std::optional<ErrorCode> bFailed;
  JoiningThread waiterB(
      [&] { bFailed = acquireAs(*other, b, "B", seconds(10)); });
  ASSERT_TRUE(requestRecorded(*m, b, "B", kExclusive));

  Lock child = m->getLockInstance("q.b", kLevel, kShared);
  const auto start = steady_clock::now();
  const DLMException e = errorOf([&] {
    asOwner("A", [&] { m->acquireLock(child, seconds(30), seconds(10)); });
  });
  EXPECT_EQ(e.code(), ErrorCode::DEADLOCK_DETECTED) << e.what();
  EXPECT_LT(steady_clock::now() - start, seconds(3))
      << "the deadlock was found at once, not at the timeout";
  EXPECT_FALSE(child.isAcquired());

  ASSERT_TRUE(m->releaseLock(a));
  waiterB.join();
  EXPECT_FALSE(bFailed.has_value());
  EXPECT_TRUE(b.isAcquired());
  EXPECT_TRUE(other->releaseLock(b));
}

}  // namespace dlm::test::modes
