#!/usr/bin/env python3
"""The documentation's code, run as written.

  docs_test.py cpp SOURCE_DIR LIBRARY CXX
      Compiles every ```cpp block of README.md and docs/*.md against the
      built library (LIBRARY: the path of libdlm.so) and runs the blocks
      marked <!-- run --> in a fresh temporary directory.
  docs_test.py sh SOURCE_DIR DLMCTL
      Runs the ```sh blocks marked <!-- run --> of docs/dba.md, then of
      docs/operations.md, in order, in one bash (set -euo pipefail), against
      the server named by the PG* variables (PGUSER a superuser). The block
      marked <!-- names --> is run first and each variable it sets gets a
      unique suffix, so the run does not meet other tests' databases and
      roles; afterwards the database and roles named there are dropped.

Markers are HTML comments on the line right before a block's opening fence:
  <!-- fragment -->               statements: compiled inside a function
                                  (manager, lock, store in scope) with the
                                  usual includes; in docs/guide.md also run,
                                  unless it uses an application database
                                  (appDb: libpqxx, appConn: a PGconn*, db:
                                  sqlite3*), with the manager the README's
                                  first program builds (its builder as
                                  written, SQLite) and `lock` its lock,
                                  acquired;
  <!-- run -->                    cpp: compiled as a program and run;
                                  sh: run by the sh test;
  <!-- not compiled: WHY -->      skipped (say why; keep these rare);
  <!-- names -->                  sh: the shell variables the steps use.
A cpp block without a marker is a translation unit: compiled (and linked
when it has a main) with the usual includes in front.
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*(.*?)\s*-->\s*$")

INCLUDES = """\
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <libpq-fe.h>
#include <pqxx/pqxx>
#include <sqlite3.h>

#include <dlm/dlm.h>
#include <dlm/lock_store.h>
#include <dlm/lock_store_admin.h>
#include <dlm/lock_store_wrapper.h>
#include <dlm/postgres_store.h>
#include <dlm/sqlite_store.h>
#include <dlm/store_url.h>
"""

# What a fragment may use without declaring it: the application's own
# names that the guides' fragments stand for (a thread pool, a logger, its
# work), then a manager, a lock, a store and connections.
FRAGMENT_PROLOGUE = """\
struct DocsPool { template <class F> void post(F&&) {} };
inline DocsPool pool;
struct DocsLogger {
  template <class... A> void warn(A&&...) {}
  template <class... A> void info(A&&...) {}
};
inline DocsLogger* logger = nullptr;
inline int id = 123;
inline std::string body;
inline bool moreWork() { return false; }
template <class T> void doSomeWork(T) {}
template <class T> int runReport(T) { return 0; }
inline void bootstrap() {}
inline std::vector<std::string> readCatalog() { return {}; }

[[maybe_unused]] static void docs_fragment(
    [[maybe_unused]] std::shared_ptr<dlm::LockStore> store,
    [[maybe_unused]] std::unique_ptr<dlm::DistributedLockManager>& manager,
    [[maybe_unused]] dlm::Lock& lock,
    [[maybe_unused]] pqxx::connection& appDb,
    [[maybe_unused]] PGconn* appConn,
    [[maybe_unused]] sqlite3* db) {
  using namespace std::chrono_literals;
  {
"""
FRAGMENT_EPILOGUE = """
  }
}
"""


def blocks(path):
    """Yields (language, marker, first line number, text) per fenced block."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang = m.group(1)
        marker = ""
        # The marker is the last non-blank line before the fence.
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0:
            mm = MARKER.match(lines[j].strip())
            if mm:
                marker = mm.group(1)
        start = i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            sys.exit(f"{path}:{start}: code block not closed")
        i += 1
        yield lang, marker, start, "\n".join(body) + "\n"


GUIDE = os.path.join("docs", "guide.md")
APP_DATABASE = re.compile(r"\b(appDb|appConn|db)\b")


def readme_builder(source):
    """The builder expression of README's first <!-- run --> program, as
    written, and the id of the lock it takes."""
    for lang, marker, _, text in blocks(os.path.join(source, "README.md")):
        if lang == "cpp" and marker == "run":
            b = re.search(r"dlm::DistributedLockManager::builder\(\)[\s\S]*?\.build\(\)", text)
            i = re.search(r'getLockInstance\(("[^"]*")', text)
            if b and i:
                return b.group(0), i.group(1)
    sys.exit("README.md: no <!-- run --> program with a builder and getLockInstance")


def runnable_fragment(readme, rel, line, text):
    """A guide fragment as a program: README's manager (readme_builder's
    pair), its lock acquired."""
    builder, lock_id = readme
    prologue = FRAGMENT_PROLOGUE.split("[[maybe_unused]] static void docs_fragment(")[0]
    return (INCLUDES + prologue + f"""
int main() {{
  using namespace std::chrono_literals;
  try {{
    [[maybe_unused]] std::shared_ptr<dlm::LockStore> store =
        dlm::openStore("sqlite:locks.sqlite");
    [[maybe_unused]] auto manager = {builder};
    manager->initialize();
    [[maybe_unused]] dlm::Lock lock = manager->getLockInstance({lock_id});
    manager->acquireLock(lock);
    {{
#line {line + 1} "{rel}"
{text}
    }}
  }} catch (const dlm::DLMException& e) {{
    std::cerr << e.what() << "\\n";
    return 1;
  }}
}}
""")


def run_fresh(tmp, exe, label):
    """Runs exe in a new directory of its own, without the PG* variables and
    DLM_DATABASE_URL (a program names its database itself)."""
    rundir = os.path.join(tmp, label)
    os.mkdir(rundir)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PG") and k != "DLM_DATABASE_URL"}
    return subprocess.run([exe], cwd=rundir, capture_output=True, text=True,
                          env=env, timeout=60)


def markdown_files(source):
    files = [os.path.join(source, "README.md")]
    docs = os.path.join(source, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return files


def cpp(source, library, cxx):
    libdir = os.path.dirname(os.path.abspath(library))
    base = [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
            "-I", os.path.join(source, "include")]
    base += shlex.split(subprocess.check_output(
        ["pkg-config", "--cflags", "libpqxx", "libpq", "sqlite3"], text=True))
    libs = [os.path.abspath(library), "-Wl,-rpath," + libdir]
    libs += shlex.split(subprocess.check_output(
        ["pkg-config", "--libs", "libpqxx", "libpq", "sqlite3"], text=True))
    failures = []
    count = skipped = ran = 0
    readme = readme_builder(source)
    with tempfile.TemporaryDirectory(prefix="dlm-docs-cpp.") as tmp:
        for md in markdown_files(source):
            rel = os.path.relpath(md, source)
            for lang, marker, line, text in blocks(md):
                if lang != "cpp":
                    continue
                where = f"{rel}:{line}"
                if marker.startswith("not compiled"):
                    if ":" not in marker or not marker.split(":", 1)[1].strip():
                        failures.append(f"{where}: '<!-- not compiled -->' must say why")
                    skipped += 1
                    continue
                count += 1
                name = re.sub(r"[^A-Za-z0-9]", "_", where)
                src = os.path.join(tmp, name + ".cpp")
                has_main = re.search(r"\bint\s+main\s*\(", text) is not None
                with open(src, "w", encoding="utf-8") as f:
                    if marker == "fragment":
                        f.write(INCLUDES + FRAGMENT_PROLOGUE + f"#line {line + 1} \"{rel}\"\n" +
                                text + FRAGMENT_EPILOGUE)
                    elif marker == "run" or has_main:
                        # A complete program: exactly as the reader copies it.
                        f.write(f"#line {line + 1} \"{rel}\"\n" + text)
                    else:
                        f.write(INCLUDES + f"#line {line + 1} \"{rel}\"\n" + text)
                exe = os.path.join(tmp, name)
                if has_main:
                    cmd = base + [src, "-o", exe] + libs
                elif marker == "fragment":
                    # A fragment's results are for the reader, not used.
                    cmd = base + ["-Wno-unused-variable", "-c", src, "-o", exe + ".o"]
                else:
                    cmd = base + ["-c", src, "-o", exe + ".o"]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append(f"{where}: does not compile:\n{r.stderr}")
                    print(f"FAIL compile {where}", flush=True)
                    continue
                print(f"ok   compile {where}", flush=True)
                if marker == "fragment" and rel == GUIDE and not APP_DATABASE.search(text):
                    prog = os.path.join(tmp, name + "_readme.cpp")
                    with open(prog, "w", encoding="utf-8") as f:
                        f.write(runnable_fragment(readme, rel, line, text))
                    r = subprocess.run(base + ["-Wno-unused-variable", prog, "-o", exe + "_readme"]
                                       + libs, capture_output=True, text=True)
                    if r.returncode != 0:
                        failures.append(f"{where}: does not compile with README's builder:\n{r.stderr}")
                        print(f"FAIL compile {where} (README's builder)", flush=True)
                        continue
                    r = run_fresh(tmp, exe + "_readme", name + ".readme")
                    ran += 1
                    if r.returncode != 0:
                        failures.append(f"{where}: fails with README's builder (exit "
                                        f"{r.returncode}):\n{r.stdout}{r.stderr}")
                        print(f"FAIL run     {where} (README's builder)", flush=True)
                    else:
                        print(f"ok   run     {where} (README's builder)", flush=True)
                if marker == "run":
                    if not has_main:
                        failures.append(f"{where}: marked run but has no main")
                        continue
                    r = run_fresh(tmp, exe, name + ".run")
                    ran += 1
                    if r.returncode != 0:
                        failures.append(f"{where}: exit status {r.returncode} on a fresh "
                                        f"directory:\n{r.stdout}{r.stderr}")
                        print(f"FAIL run     {where}", flush=True)
                    else:
                        print(f"ok   run     {where}: {r.stdout.strip()}", flush=True)
    print(f"{count} cpp blocks compiled, {ran} run, {skipped} marked not compiled")
    if count == 0:
        failures.append("no cpp block found")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


SH_DOCS = ["docs/dba.md", "docs/operations.md"]
ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=")


def sh(source, dlmctl):
    for var in ("PGHOST", "PGPORT", "PGUSER"):
        if not os.environ.get(var):
            sys.exit(f"{var} is not set: this test needs the PG* variables of a "
                     "server with a superuser login (scripts/test.sh sets them)")
    names_block = None
    steps = []
    for rel in SH_DOCS:
        for lang, marker, line, text in blocks(os.path.join(source, rel)):
            if lang != "sh":
                continue
            if marker == "names":
                names_block = (rel, line, text)
            elif marker == "run":
                steps.append((rel, line, text))
    if names_block is None:
        sys.exit("docs/dba.md has no <!-- names --> block")
    if not steps:
        sys.exit("no <!-- run --> sh block in " + ", ".join(SH_DOCS))
    names = [m.group(1) for m in map(ASSIGN.match, names_block[2].split("\n")) if m]
    suffix = f"d{os.getpid()}"
    script = ["set -euo pipefail", "cd \"$DLM_DOCS_WORKDIR\""]
    script.append(f"echo '--- {names_block[0]}:{names_block[1]} (names)'")
    script.append(names_block[2])
    # Unique names: NAME=value becomes value_<suffix> (lower case, as SQL folds).
    for n in names:
        script.append(f'{n}="${{{n}}}_{suffix}"; export {n}')
    script.append('echo "names: ' + " ".join(f"{n}=${n}" for n in names) + '"')
    for rel, line, text in steps:
        script.append(f"echo '--- {rel}:{line}'")
        script.append("set -x")
        script.append(text)
        script.append("{ set +x; } 2>/dev/null")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(dlmctl)) + os.pathsep + env["PATH"]
    env.pop("DLM_DATABASE_URL", None)
    env.pop("PGDATABASE", None)
    env.pop("PGOPTIONS", None)
    with tempfile.TemporaryDirectory(prefix="dlm-docs-sh.") as tmp:
        # The steps run from the source tree's root (schema/postgres.sql).
        env["DLM_DOCS_WORKDIR"] = source
        with open(os.path.join(tmp, "steps.sh"), "w") as f:
            f.write("\n".join(script) + "\n")
        r = subprocess.run(["bash", os.path.join(tmp, "steps.sh")], env=env, timeout=300)
        # Clean up whatever the names block named: the database, then roles.
        values = subprocess.run(
            ["bash", "-c", names_block[2] + "\n" + "\n".join(
                f'echo "{n}=${{{n}}}_{suffix}"' for n in names)],
            capture_output=True, text=True).stdout.split()
        env.pop("PGDATABASE", None)
        for kv in values:
            n, v = kv.split("=", 1)
            if n == "DB":
                subprocess.run(["dropdb", "--if-exists", "--force", "--maintenance-db=postgres", v],
                               env=env)
        for kv in values:
            n, v = kv.split("=", 1)
            if n != "DB" and not n.endswith("PASSWORD"):
                subprocess.run(["psql", "-q", "-d", "postgres", "-c",
                                f'DROP ROLE IF EXISTS "{v}"'], env=env,
                               capture_output=True)
    if r.returncode != 0:
        print(f"a documented step failed (exit status {r.returncode}); see the last "
              "'---' line above for the block", file=sys.stderr)
        return 1
    print(f"{len(steps)} sh blocks ran as written")
    return 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "cpp":
        return cpp(sys.argv[2], sys.argv[3], sys.argv[4])
    if len(sys.argv) == 4 and sys.argv[1] == "sh":
        return sh(sys.argv[2], sys.argv[3])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
