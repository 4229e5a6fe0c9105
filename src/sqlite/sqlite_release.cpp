#include "sqlite/sqlite_release.h"

#include "sqlite/cycle_sql.h"
#include "sqlite/store_time.h"

namespace dlm::internal::sqlite {

ReleaseDone releaseWithin(Connection& c, std::string_view key,
                          std::string_view token, LockMode mode) {
  ReleaseDone done;
  if (mode == LockMode::SHARED) {
    // The hold's own row, conditional on its token; a released (or taken
    // over) SHARED hold leaves nothing behind, so a retry is false.
    c.statement(sql::kReleaseShared).bind(1, key).bind(2, token).run();
    done.freed = sqlite3_changes(c.handle()) > 0;
    done.released = done.freed;
    return done;
  }
  // Conditional on the acquisition's token: a holder whose lock expired
  // and was taken over cannot free the new holder's lock.
  // The lease ends now (purge judges idleness from it).
  c.statement(sql::kReleaseExclusive)
      .bind(1, key)
      .bind(2, token)
      .bind(3, nowMs())
      .run();
  done.freed = sqlite3_changes(c.handle()) > 0;
  done.released = done.freed;
  if (!done.freed) {
    // The token stays on the row after a release, so a retried release of
    // the same acquisition (its reply was lost) is true again; it frees
    // nothing, so wakes no one.
    Statement row = c.statement(sql::kReleasedAlready);
    row.bind(1, key).bind(2, token);
    done.released = row.step();
  }
  return done;
}

ReleaseDone releaseIn(Connection& c, std::string_view key,
                      std::string_view token, LockMode mode) {
  Transaction tx(c, Durability::kLazy);
  const ReleaseDone done = releaseWithin(c, key, token, mode);
  tx.commit();
  return done;
}

}  // namespace dlm::internal::sqlite
