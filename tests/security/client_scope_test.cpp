// Every key belongs to one non-empty client, and an attempt's scans stay in
// it (V12). Until V11 a key of another shape ('DC', 'DC#default#orders',
// 'XDC#orders') belonged to the client '', which first use bound with
// whatever separator came first, '#' included: one call then named other
// tenants' keys, row-locked their holds and took over their expired ones.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <thread>

#include "security/neighbour_fixture.h"
#include "schema/migration.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

// dlm_try_acquire as a neighbour would call it, with any keys and range.
std::string tryAcquireSql(const std::string& keys, const std::string& begin,
                          const std::string& end) {
  return fmt::format(
      "SELECT acquired, blocked_by FROM dlm_try_acquire(ARRAY[{}], "
      "array_fill(0::bigint, ARRAY[cardinality(ARRAY[{}])]), {}, {}, 'o', "
      "'t', 60000, 'h', 1, false)",
      keys, keys, begin, end);
}

class ClientScope : public Neighbours {
 protected:
  // `orders` holds DC#farm1#orders#payroll and waits for nothing; billing
  // holds XDC#billing#invoice.
  void holdTheirKeys() {
    orders_m_ = managerAs(orders_.name(), "orders");
    payroll_.emplace(orders_m_->getLockInstance("payroll", LockLevel::DC));
    orders_m_->tryAcquireLock(*payroll_, 60s);
    billing_m_ = managerAs(billing_.name(), "billing");
    invoice_.emplace(billing_m_->getLockInstance("invoice", LockLevel::XDC));
    billing_m_->tryAcquireLock(*invoice_, 60s);
  }
  std::string qualified(const std::string& name) {
    return schema_.admin().quote_name(schema_.name()) + "." + name;
  }
  long long count(const std::string& sql) {
    return execSql(schema_.admin(), sql)[0][0].as<long long>();
  }

  std::unique_ptr<DistributedLockManager> orders_m_, billing_m_;
  std::optional<Lock> payroll_, invoice_;
};

// A forged call: the keys (ancestors first), the key itself, the range.
struct Forged {
  std::string keys, key, begin, end;
};

TEST_F(ClientScope, KeysOfNoClientAreRefusedBeforeAnythingIsRead) {
  holdTheirKeys();
  // Was: acquired, or blocked_by = another tenant's key, by name; the
  // client '' bound to the neighbour with the separator '#'.
  const Forged forged[] = {
      {"'DC'", "'DC'", "'DC#'", "'DC$'"},
      {"'DC#farm1'", "'DC#farm1'", "'DC#farm1#'", "'DC#farm1$'"},
      {"'DC#farm1', 'DC#farm1#orders'", "'DC#farm1#orders'",
       "'DC#farm1#orders#'", "'DC#farm1#orders$'"},
      {"'XDC'", "'XDC'", "'XDC#'", "'XDC$'"},
      {"'XDC#billing'", "'XDC#billing'", "'XDC#billing#'", "'XDC#billing$'"},
      {"'DC##orders#x'", "'DC##orders#x'", "NULL", "NULL"},
      {"'DC#farm1##x'", "'DC#farm1##x'", "NULL", "NULL"},
      {"'DC#farm1#orders#'", "'DC#farm1#orders#'", "NULL", "NULL"},
  };
  for (const Forged& f : forged) {
    SCOPED_TRACE(f.keys);
    EXPECT_EQ(stateOf(neighbour_.name(), tryAcquireSql(f.keys, f.begin, f.end)),
              "22023");
    EXPECT_EQ(stateOf(neighbour_.name(),
                      fmt::format("SELECT dlm_register_wait({}, '{{}}', {}, "
                                  "{}, 'o', 60000, false)",
                                  f.key, f.begin, f.end)),
              "22023");
    EXPECT_EQ(stateOf(neighbour_.name(),
                      fmt::format("SELECT dlm_wait_cycle({}, 'o')", f.key)),
              "22023");
  }
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_clients") +
                  " WHERE client_id = '' OR position('#' IN client_id) > 0"),
            0);
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_lock_requests")),
            0);
  // Their holds are untouched and still theirs.
  EXPECT_TRUE(orders_m_->releaseLock(*payroll_));
  EXPECT_TRUE(billing_m_->releaseLock(*invoice_));
}

TEST_F(ClientScope, EveryFunctionTakingOneKeyRefusesTextOfNoClient) {
  // Was (until V16): release false, extend NULL, guard DLM01, describe and
  // an exact dlm_holders no row: "not held" instead of "not a key".
  for (const char* key : {"DC", "DC#farm1", "DC#farm1#orders", "XDC#billing",
                          "DC##orders#x", "XDC##x", "XDC#billing#"}) {
    SCOPED_TRACE(key);
    const std::string k = std::string("'") + key + "'";
    for (const std::string& sql : {
             fmt::format("SELECT dlm_release({}, 't', '{{}}', NULL, NULL)", k),
             fmt::format("SELECT dlm_release_shared({}, 't', '{{}}', NULL, "
                         "NULL)",
                         k),
             fmt::format("SELECT dlm_extend({}, 't', 1000)", k),
             fmt::format("SELECT dlm_extend_shared({}, 't', 1000)", k),
             fmt::format("SELECT dlm_describe({})", k),
             fmt::format("SELECT count(*) FROM dlm_holders({}, true)", k),
             fmt::format("BEGIN; SELECT dlm_guard_within({}, 't', false)", k),
             fmt::format("BEGIN; SELECT dlm_release_within({}, 't', '{{}}', "
                         "NULL, NULL)",
                         k),
         }) {
      EXPECT_EQ(stateOf(neighbour_.name(), sql), "22023") << sql;
    }
  }
  // A prefix listing is not a key: it stays a prefix.
  EXPECT_EQ(stateOf(neighbour_.name(),
                    "SELECT count(*) FROM dlm_holders('DC#farm1#', false)"),
            "");
}

TEST_F(ClientScope, AHashSeparatorIsRefusedAndNothingIsRecorded) {
  auto n = sqlAs(neighbour_.name());
  const std::string key = keyOf("nb", "x");
  // Was: recorded for the client, and its descendant range reached into
  // every key of the scope's parent.
  EXPECT_EQ(stateOf(neighbour_.name(),
                    tryAcquireSql("'" + key + "'", "'" + key + "#'",
                                  "'" + key + "$'")),
            "22023");
  EXPECT_EQ(stateOf(neighbour_.name(),
                    tryAcquireSql("'" + key + "'", "'" + key + "\x01'",
                                  "'" + key + "\x02'")),
            "22023");
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_clients") +
                  " WHERE client_id = 'nb' AND hierarchy IS NOT NULL"),
            0);
  // The table refuses one too, whoever writes it.
  EXPECT_THROW(execSql(schema_.admin(),
                       "INSERT INTO " + qualified("dlm_clients") +
                           " (client_id, role_oid, role_name, first_use, "
                           "bound_by, separator, hierarchy) VALUES ('x', 10, "
                           "'r', true, 'r', '#', true)"),
               std::exception);
  EXPECT_THROW(execSql(schema_.admin(),
                       "INSERT INTO " + qualified("dlm_clients") +
                           " (client_id, role_oid, role_name, first_use, "
                           "bound_by) VALUES ('', 10, 'r', true, 'r')"),
               std::exception);
}

TEST_F(ClientScope, ATakeoverLeavesHoldsOutsideTheAttemptsClientAlone) {
  // orders' hold of `ledger` expired; a takeover given a range over every
  // DC key of farm1 (as a forged call once reached it) must not touch it.
  auto orders = managerAs(orders_.name(), "orders");
  Lock ledger = orders->getLockInstance("ledger", LockLevel::DC);
  orders->tryAcquireLock(ledger, 50ms);
  std::this_thread::sleep_for(100ms);
  const std::string call = fmt::format(
      "SELECT {}(ARRAY['DC#farm1#nb#a'], 'DC#farm1#nb#a.', 'DC#farm1#nb#a/', "
      "false) IS NULL",
      qualified("dlm_take_over_expired"));
  // In the range of the attempt's own scope only: its own keys.
  execSql(schema_.admin(), call);
  const std::string wide = fmt::format(
      "SELECT {}(ARRAY[]::text[], 'DC#farm1#', 'DC#farm1$', false)",
      qualified("dlm_take_over_expired"));
  execSql(schema_.admin(), wide);
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_locks") +
                  " WHERE resource = 'DC#farm1#orders#ledger' AND status = "
                  "'HELD'"),
            1)
      << "a takeover outside the attempt's client freed another tenant's hold";
  // Its holder can still release it (nobody took it over).
  EXPECT_TRUE(orders->releaseLock(ledger));
}

TEST_F(ClientScope, TheMigrationRepairsWhatASquatterRecorded) {
  holdTheirKeys();
  // The state a neighbour could leave before V12: the client '' bound to
  // it with the separator '#', a hold and a request under keys of no
  // client, and a client whose recorded separator is '#'.
  const std::string clients = qualified("dlm_clients");
  execSql(schema_.admin(),
          "ALTER TABLE " + clients +
              " DROP CONSTRAINT dlm_clients_client_id_shape_check, DROP "
              "CONSTRAINT dlm_clients_separator_shape_check");
  // `client` bound to the neighbour by first use, with the separator '#'.
  const auto squat = [&](const std::string& client) {
    execSql(schema_.admin(),
            fmt::format("INSERT INTO {} (client_id, role_oid, role_name, "
                        "first_use, bound_by, separator, hierarchy) SELECT "
                        "'{}', oid, rolname, true, rolname, '#', true FROM "
                        "pg_roles WHERE rolname = '{}'",
                        clients, client, neighbour_.name()));
  };
  squat("");
  squat("squatted");
  execSql(schema_.admin(),
          "INSERT INTO " + qualified("dlm_locks") +
              " (resource, resource_crc, status, owner_id, token, "
              "fencing_token, acquired_at, ttl_ms, expires_at) VALUES "
              "('DC#farm1', 0, "
              "'HELD', 'x', 't', 1, now(), 31536000000, now() + interval "
              "'365 days')");
  execSql(schema_.admin(),
          "INSERT INTO " + qualified("dlm_lock_requests") +
              " (resource, owner_id, requested_at, expires_at) VALUES "
              "('DC', 'x', now(), now() + interval '1 hour')");

  {
    pqxx::connection& admin = schema_.admin();
    pqxx::work tx(admin);
    tx.exec("SET LOCAL search_path = " + admin.quote_name(schema_.name()));
    for (const internal::Migration& m : internal::postgresMigrations()) {
      if (m.version == 12) tx.exec(std::string(m.sql));
    }
    tx.commit();
  }
  EXPECT_EQ(count("SELECT count(*) FROM " + clients + " WHERE client_id = ''"),
            0);
  EXPECT_EQ(count("SELECT count(*) FROM " + clients +
                  " WHERE client_id = 'squatted' AND separator IS NULL AND "
                  "hierarchy IS NULL"),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_locks") +
                  " WHERE resource = 'DC#farm1' AND status = 'HELD'"),
            0);
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_lock_requests") +
                  " WHERE resource = 'DC'"),
            0);
  // The services' own holds are untouched.
  EXPECT_EQ(count("SELECT count(*) FROM " + qualified("dlm_locks") +
                  " WHERE status = 'HELD' AND resource IN "
                  "('DC#farm1#orders#payroll', 'XDC#billing#invoice')"),
            2);
  EXPECT_TRUE(orders_m_->releaseLock(*payroll_));
  EXPECT_TRUE(billing_m_->releaseLock(*invoice_));
}

}  // namespace
}  // namespace dlm::test
