// How the SQLite store names SQLite's result codes (white-box: the store's
// translation, since a full disk or a read-only file cannot be made for a
// test running as root without mounting a file system). Every code a
// caller can meet is one the API documents.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "dlm/error.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::sqlite_test {
namespace {

DLMException translated(int rc) {
  try {
    internal::sqlite::throwError(nullptr, "/tmp/x.sqlite", rc, "releasing", "");
  } catch (const DLMException& e) {
    return e;
  }
  return DLMException(ErrorCode::INTERNAL_ERROR, "nothing thrown");
}

TEST(SqliteErrorCodes, AFullDiskOrAnIoErrorIsATransientConnectionError) {
  for (int rc : {SQLITE_FULL, SQLITE_IOERR, SQLITE_IOERR_WRITE,
                 SQLITE_IOERR_FSYNC}) {
    const DLMException e = translated(rc);
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
    EXPECT_TRUE(e.transient()) << e.what();
  }
}

TEST(SqliteErrorCodes, AFileThatCannotBeWrittenIsAConnectionError) {
  for (int rc : {SQLITE_READONLY, SQLITE_READONLY_DBMOVED, SQLITE_CANTOPEN}) {
    const DLMException e = translated(rc);
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
    EXPECT_FALSE(e.transient()) << e.what();
    EXPECT_NE(std::string(e.what()).find("/tmp/x.sqlite"), std::string::npos);
  }
}

TEST(SqliteErrorCodes, AccessDeniedIsPermissionDenied) {
  for (int rc : {SQLITE_PERM, SQLITE_AUTH}) {
    EXPECT_EQ(translated(rc).code(), ErrorCode::PERMISSION_DENIED);
  }
}

TEST(SqliteErrorCodes, ContentionIsRetriesExhausted) {
  for (int rc : {SQLITE_BUSY, SQLITE_LOCKED}) {
    const DLMException e = translated(rc);
    EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED);
    EXPECT_TRUE(e.transient());
  }
}

}  // namespace
}  // namespace dlm::sqlite_test
