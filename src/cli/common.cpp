#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "cli/commands.h"
#include "dlm/error.h"
#include "dlm/store_url.h"
#include "migration.h"

namespace dlm::cli {

std::string programUsage() {
  return R"(usage: dlmctl [global options] <command> [command options]

Operate dlm locks: apply schema migrations, list and force-release locks, and
run a demonstration of mutual exclusion between processes.

commands:
  migrate     apply the missing schema migrations and print the version
  demo        several worker processes contend for a few locks; checks that
              no two holders ever overlapped
  list        list held locks
  release     force-release a lock (operator override)
  exec        run a command while holding a lock
  help [CMD]  this text, or a command's usage

global options (anywhere on the line):
  --db URL        database: a postgresql:// URI, a libpq keyword string
                  ("host=db dbname=app"), sqlite:PATH or sqlite::memory:
                  (default: $DLM_DATABASE_URL, else PostgreSQL when PGHOST,
                  PGHOSTADDR, PGDATABASE or PGSERVICE is set, else the SQLite
                  file ./dlm.sqlite); each command says on stderr which
                  database it uses. list and release never create one.
  --schema NAME   PostgreSQL schema holding dlm's tables (default: search_path)
  --client ID     clientId of the locks (default "dlmctl")
  --farm ID       farmId of DC locks (default "default")
  -h, --help      show help

exit status: 0 success, 1 failure (library errors print their message and
code), 2 command-line mistake.
)";
}

std::string commandUsage(const std::string& command) {
  if (command == "migrate") {
    return R"(usage: dlmctl [global options] migrate

Applies the migrations the database is missing (each in its own
transaction), verifies the result and prints the schema version reached.
)";
  }
  if (command == "demo") {
    return R"(usage: dlmctl [global options] demo [--workers N] [--locks K]
                  [--seconds S] [--hold-ms M] [--parent-percent P]

Applies the migrations, then forks N worker processes. For S seconds each
worker picks one of K keys (DC locks "demo.key-1" .. "demo.key-K"; with
probability P% their parent "demo", which conflicts with all of them),
acquires it with a short timeout, holds it about M ms and releases it,
recording when it held what. The summary shows each worker's acquisitions,
each key's holds and fencing tokens, and whether any two holds of
conflicting keys overlapped in time (they must not).

  --workers N          worker processes (default 4)
  --locks K            keys to contend for (default 3)
  --seconds S          how long the workers run (default 5)
  --hold-ms M          how long each hold lasts (default 20)
  --parent-percent P   share of attempts on the parent key (default 10)

Exits 1 when holds overlapped, a key's fencing tokens did not grow in hold
order, a release returned false, a worker failed or nothing was acquired.
)";
  }
  if (command == "list") {
    return R"(usage: dlmctl [global options] list [--prefix P]

Lists the locks whose status is HELD, one per line: store key, owner GUID,
holder host and pid, fencing token, acquired-at and expires-at (UTC, the
store's clock) and the time left, or EXPIRED for a lock past its TTL that
nobody has taken over yet. --prefix keeps the store keys starting with P
(e.g. "DC#default#dlmctl#demo"). Creates no database: a SQLite file that
does not exist is an error.
)";
  }
  if (command == "release") {
    return R"(usage: dlmctl [global options] release [--xdc] KEY

Force-releases a lock whoever holds it (the operator's override for a holder
that is gone; the holder is not told). KEY is a store key as `list` prints
it ("DC#default#dlmctl#demo.key-1"), or a lock id ("demo.key-1") taken in
the scope of --client and --farm (a DC lock, or XDC with --xdc). Prints
whether the lock was held. Creates no database: a SQLite file that does not
exist is an error.
)";
  }
  if (command == "exec") {
    return R"(usage: dlmctl [global options] exec --lock ID [--xdc] [--ttl S]
                  [-n | -w S] [-E N] [--kill-after S] [--] COMMAND [ARG...]

Takes the lock ID (a DC lock in the scope of --client and --farm, or XDC with
--xdc), runs COMMAND in its own process group while holding it, renewing the
lease every third of the TTL, and releases it after the whole group has
ended. COMMAND sees DLM_FENCING_TOKEN (send it with writes downstream) and
DLM_LOCK_KEY in its environment. SIGINT, SIGTERM and SIGHUP to dlmctl are
passed on to the group; COMMAND dies with dlmctl (even under kill -9). If the
lock is lost, the group gets SIGTERM, then SIGKILL after --kill-after.
Everything after the first word that is not an option belongs to COMMAND.
The schema must be in place (dlmctl migrate).

  --ttl S          lease length in seconds (default 60)
  -w, --wait S     how long to wait for the lock, fractional (default 0: one
                   attempt)
  -n               one attempt (the default)
  -E, --conflict-exit-code N
                   exit status when the lock is held elsewhere (default 75)
  --kill-after S   SIGTERM to SIGKILL after a lost lock (default 1; at most
                   half the keep-alive's loss margin, a tenth of the TTL)

Exit status: COMMAND's (128+N when killed by signal N; 127 not found, 126
not executable); 75 (or -E) when the lock is held elsewhere (COMMAND not
run); 1 when the lock was lost while COMMAND ran or a library error.
)";
  }
  return "";
}

GlobalOptions settleDatabase(GlobalOptions global) {
  if (global.dbOrigin == "default") {
    // cli_args leaves the SQLite default in place; whether PG* variables
    // name a server instead is the library's rule, shared with openStore.
    const DefaultStoreUrl chosen = defaultStoreUrl();
    global.db = chosen.url;
    global.dbOrigin = chosen.origin;
  }
  std::string shown;
  try {
    shown = describeStoreUrl(global.db);
  } catch (const DLMException& e) {
    if (e.code() != ErrorCode::INVALID_ARGUMENT) throw;
    // The message is redacted and names the forms that would work.
    throw UsageError(fmt::format("{} (database from {})", e.what(),
                                 global.dbOrigin == "default"
                                     ? std::string("the default")
                                     : global.dbOrigin));
  }
  const std::string origin =
      global.dbOrigin == "default"
          ? "default: no --db, DLM_DATABASE_URL, PGHOST, PGDATABASE or "
            "PGSERVICE"
          : "from " + global.dbOrigin;
  // stderr: stdout stays the command's own output for scripts.
  fmt::print(stderr, "dlmctl: database: {} ({})\n", shown, origin);
  return global;
}

std::shared_ptr<LockStore> openCliStore(const GlobalOptions& global) {
  return openStore(global.db, global.schema);
}

void requireExistingDatabase(const GlobalOptions& global) {
  const ParsedStoreUrl parsed = parseStoreUrl(global.db);
  if (parsed.kind != StoreKind::SQLITE || parsed.location == ":memory:") {
    return;
  }
  std::error_code ec;
  if (std::filesystem::exists(parsed.location, ec) || ec) return;
  throw std::runtime_error(fmt::format(
      "there is no database at {} (no such file; nothing was created). "
      "Name the database with --db, or create it with `dlmctl migrate`",
      describeStoreUrl(global.db)));
}

std::unique_ptr<DistributedLockManager> openManager(
    const GlobalOptions& global, std::shared_ptr<LockStore> store,
    bool applyMigrations, const LockConfiguration& config) {
  auto manager = DistributedLockManager::builder()
                     .clientId(global.client)
                     .farmId(global.farm)
                     .store(std::move(store))
                     .configuration(config)
                     .applyMigrations(applyMigrations)
                     .build();
  manager->initialize();
  return manager;
}

int schemaVersionFor(const LockStore& store) {
  if (store.name() == "postgres") {
    return internal::latestVersion(internal::postgresMigrations());
  }
  return internal::latestVersion(internal::sqliteMigrations());
}

}  // namespace dlm::cli
