// The help footers of dlmctl's commands (command_line.cpp): what each
// command does, its output and its exit statuses, as `dlmctl help CMD`
// prints them below the options.
#pragma once

namespace dlm::cli {

inline constexpr const char* kProgramFooter = R"(
stdout is the command's output; stderr has errors and what explains an
outcome (-q: errors only). Which database is used, and why, is said on
stderr with -v, and before an error. Exit status: 0 success,
1 failure (library errors print their message and code), 2 command-line
mistake, 77 when the database refuses the login a privilege; exec, show,
release, waiters cancel, clients unbind and schema status have their own
(see their help).
'dlmctl help COMMAND' or 'dlmctl COMMAND --help' shows a command's options.)";

inline constexpr const char* kListFooter = R"(
One row per hold (a key held SHARED by three owners is three rows): store
key, mode (EXCLUSIVE or SHARED), owner (on PostgreSQL a digest of it),
holder host and pid as the holder reported them (HOST*, PID*: not checked
by the database), the address the database saw,
fencing token, acquired-at and expires-at (UTC, the store's clock), time
left (EXPIRED for a hold past its TTL that nobody took over yet) and how
many requests wait for the key. Control characters in keys are
shown escaped (\n, \t, \xNN). --json prints a JSON array instead, one object
per hold with its "mode" and the key's waiters; keys are exact there (invalid UTF-8 bytes become
U+FFFD). Creates no database: a SQLite file that does not exist is an error.)";

inline constexpr const char* kShowFooter = R"(
KEY is a lock's key as dlmctl and the library print it
("DC#default#dlmctl#jobs.nightly", "XDC#billing#nightly.import") or a lock
id ("jobs.nightly") in the scope of --client and --farm (DC, or XDC with
--xdc). Shows the key's state, every holder (an EXCLUSIVE one, or all
SHARED ones, each with its mode; the last holder of a free key) and who
waits for it. Exit status 1 when the key was never locked; when the same id
is held under another level, farm or client, it names those keys.)";

inline constexpr const char* kWaitersFooter = R"(
One row per waiting acquireLock (its request row, until the waiter's
deadline): key waited for, mode asked for, owner, since when and
until when it waits. Older conflicting requests are served first.
--json prints a JSON array. 'dlmctl waiters cancel' removes requests.)";

inline constexpr const char* kWaitersCancelFooter = R"(
Deletes the request rows of exactly KEY (not of its ancestors or
descendants): the one of --owner OWNER (as 'dlmctl waiters' shows it), or
with --all every one. For a waiter that is stuck or forged (a request holds
newer conflicting ones back, by fair queueing, for up to 10 s unless its
waiter renews it): the key's other waiters are woken and go on in queue
order. A live waiter is not told: it records its request again at its next
renewal, at the back of the queue. KEY as for show. On PostgreSQL it needs
the admin role. Exit status 0 when requests were removed, 1 when there was
none to remove.)";

inline constexpr const char* kTopFooter = R"(
A live view of the locks, redrawn every --interval seconds until q, Ctrl-C
or SIGTERM: a header (database, the store's time, how many holds and
waiting requests), the held locks (key, mode, holder owner, host and pid,
fencing token, held since and for how long, time left) and the waiting
requests (key, mode, owner, waiting since and for how long, and what blocks
each: the conflicting hold of the same key, an ancestor or a descendant with
its holder's host and pid, or an older conflicting request queued ahead of
it). The screen is cleared and redrawn only when stdout is a terminal;
otherwise each frame is printed after a blank line. --once prints one frame
without terminal control codes and exits (for scripts); --once --json
prints it as one JSON object {"database", "now", "held": [...],
"waiters": [...]}, each waiter with its "blocked_by". --prefix filters the
rows shown; blockers are found among all keys. Creates no database.)";

inline constexpr const char* kReleaseFooter = R"(
Frees the lock whoever holds it: the operator's override for a holder that
is gone (the holder is not told; its next renewal or release finds the lock
lost). KEY as for show. --force is required: it says that you mean it.
Exit status 0 when the lock was held and is now free, 1 when nothing was
held.)";

inline constexpr const char* kClientsFooter = R"(
PostgreSQL: which role each clientId (the key namespace, --client of a
service) is bound to. Only logins that are members of that role may lock,
wait, release or see holders' secrets under it. One row per clientId: the
role, how it was bound (first use: to the first login that used it; admin:
'dlmctl clients bind'), the login that bound it, when (UTC, the store's
clock) and the hierarchy setting its first acquire recorded (the separator,
"off", or "-" before the first acquire). --json prints a JSON array of
{"client_id", "role", "first_use", "bound_by", "bound_at", "separator",
"hierarchy"}. Any dlm role may list; binding and unbinding need the admin
role. SQLite has no roles: these commands fail there.)";

inline constexpr const char* kClientsBindFooter = R"(
Binds CLIENT to the existing role ROLE, or rebinds it (its recorded
hierarchy setting stays): bind each service's clientId to its role before
the service first uses it. Every login that is a member of ROLE shares the
namespace. Needs the admin role; a role that does not exist is an error.
--purge binds and, in the same transaction, ends what logins outside ROLE
made under CLIENT (holds, EXCLUSIVE or SHARED, live or expired, and
waiting requests) and forgets its hierarchy setting: the remedy for a
clientId that another login took first. ROLE's members keep theirs, so it
is safe to repeat. The old holders are not told; their next renewal fails.
It prints how many holds and requests it ended (--json: {"client_id",
"role", "purged": {"holds", "shared_holds", "requests"}}).)";

inline constexpr const char* kClientsUnbindFooter = R"(
Forgets CLIENT's binding and its recorded hierarchy setting: the next login
that uses CLIENT is bound to it. --purge first ends everything made under
CLIENT, whoever made it (--json: {"client_id", "was_bound", "purged":
{"holds", "shared_holds", "requests"}}). Needs the admin role. Exit status
0 when there was a binding, 1 when there was none.)";

inline constexpr const char* kSchemaStatusFooter = R"(
Reads the schema-version table without changing anything: the version found,
the version this build needs, the oldest library version the database still
serves, each migration applied (when, and whether its recorded checksum
matches this build's file) and the ones pending. Exit status 0 when this
build can use the database as it is (its own version, or a newer one whose
compatible_from still serves it), 3 when migrations are pending (including
a database without dlm's schema), 4 when the database is newer and no
longer serves this build, 5 when an applied migration differs from this
build's file (drift). Creates no database.)";

inline constexpr const char* kPurgeFooter = R"(
Deletes lock rows that have been idle (free, or held but expired and not
taken) for at least DURATION and that no live request waits for, in
batches of --batch rows, each its own short transaction. A key's fencing
tokens never go back: before deleting, the store raises a high-water mark
that every row created later starts above. DURATION: 500ms, 90s, 15m, 12h,
7d, 1.5h or seconds. On PostgreSQL it needs the schema's admin role (the refusal names it). Exit
status 0; 77 when the database refuses the login (the application role may
not purge: PERMISSION_DENIED); 1 on another library error.)";

inline constexpr const char* kSchemaFooter = R"(
Its one subcommand, status, reads the schema-version table: 'dlmctl help
schema status'. Without a subcommand, schema is a command-line mistake
(exit status 2).)";

inline constexpr const char* kHelpFooter = R"(
CMD is a command, a nested one as two words ('dlmctl help waiters cancel').
Exit status 0; 2 for a command that does not exist (with the nearest name
when one is close).)";

inline constexpr const char* kMigrateFooter = R"(
Applies the migrations the database is missing, each in its own transaction,
and lists each one applied; --dry-run only lists what would be applied.
PostgreSQL: a database without dlm's schema (or older than version 3) needs
the two roles named, --client-role ROLE --admin-role ROLE (or the same as
PGOPTIONS='-c dlm.client_role=ROLE -c dlm.admin_role=ROLE'); each is
created NOLOGIN when missing, and none is made up.)";

inline constexpr const char* kDemoFooter = R"(
Applies the migrations, then forks N worker processes. For S seconds each
worker picks one of K keys (DC locks "demo.key-1" .. "demo.key-K"; with
probability P% their parent "demo", which conflicts with all of them),
acquires it, holds it about M ms and releases it, recording when it held
what. The summary shows each worker's acquisitions, each key's holds and
fencing tokens, and whether any two holds of conflicting keys overlapped in
time. Exit status 1 when holds overlapped, fencing tokens did not grow in
hold order, a release returned false, a worker failed or nothing was
acquired.)";

inline constexpr const char* kExecFooter = R"(
Takes the lock ID (DC in the scope of --client and --farm, or XDC with
--xdc; or a key as printed, "XDC#billing#nightly.import", whose level, farm
and client it uses) and runs COMMAND in its own process group while holding it, renewing
the lease every third of the TTL; releases it after the whole group ended.
COMMAND sees DLM_FENCING_TOKEN and DLM_LOCK_KEY in its environment.
Everything from the first word that is not an option on is COMMAND's.
 - EXCLUSIVE by default (-x); with -s (--shared) any number of shared
   holders run at once, and an exclusive one waits for all of them (and
   they for it), as with flock -s.
 - Waits for the lock like flock(1): until it is free, or -w seconds; -n
   makes one attempt. An earlier waiter whose lock conflicts goes first.
 - SIGINT, SIGTERM and SIGHUP to dlmctl are passed on to the group; COMMAND
   dies with dlmctl, even under kill -9.
 - A lost lease (or, with a long --kill-after, one not renewed in time):
   the group gets SIGTERM, then SIGKILL after --kill-after, before the
   lease could end.
Exit status: COMMAND's, as it is (1 of `false` included; 128+N when killed
by signal N; 127 not found, 126 not executable); dlmctl's own outcomes have
codes commands rarely use: 75 (or -E) when the lock is held elsewhere
(COMMAND not run; the holder and its mode are named on stderr); 76 when the
lock was lost (COMMAND stopped, or not run); 69 when the lock could not be
taken for an error, such as a database without dlm's schema (COMMAND not
run); 77 refused login or privilege; 128+N when signal N stopped the wait.
A SQLite
file that does not exist is created with its schema (as flock creates its
file); any other database needs its schema in place (dlmctl migrate).)";

}  // namespace dlm::cli
