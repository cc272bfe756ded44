/* PostgreSQL access with one retry policy.
 *
 * Every statement ordergate sends is a constant in a struct db_stmt (calls of
 * the functions in schema/); values travel only as parameters. Statements are
 * prepared once per connection, lazily, and prepared again after a reconnect;
 * behind a transaction-pooling PgBouncer (db_session.transaction_pool) they
 * are sent unnamed instead, and nothing is kept in the session.
 *
 * Transient failures (serialization failure 40001, deadlock 40P01, lost or
 * refused connection, server shutting down) are retried here and nowhere
 * else: db_call() reconnects and repeats the statement with exponential
 * backoff up to the configured bound. Because each gate function is one
 * idempotent round trip, repeating it after an unknown commit outcome is safe:
 * the gate answers "already_cancelled" or "duplicate" instead of acting twice. */
#ifndef OG_COMMON_DB_H
#define OG_COMMON_DB_H

#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>

#include "common/error.h"

struct db_stmt {
    const char *name; /* prepared statement name, unique per program */
    const char *sql;  /* constant text: never built from input */
    int nparams;
};

struct db_retry {
    int max_attempts;
    int base_ms;
    int cap_ms;
};

/* Bounds on every transaction of a struct db, so that a row lock held by an order service or
 * a statement that never ends cannot hold the caller without limit: PostgreSQL ends the wait
 * with 55P03 (lock_not_available, retried like any transient failure) or the statement with
 * 57014 (query_canceled). 0 leaves the setting as the server, the role or the conninfo's
 * options= define it.
 *
 * The bounds are always transaction-local (set_config(..., true)), never set on the session,
 * whatever transaction_pool says: a pooler in front may lend the server connection to other
 * clients between transactions (PgBouncer's pool_mode = transaction), and a session-level
 * setting would stay there for them. Outside an explicit transaction a call is one pipeline
 * (set_config(..., true) for the bounds, the statement, one Sync: a single implicit
 * transaction, one round trip); a transaction opened with db_exec gets them for its own
 * duration (set_config(..., true) right after it opened).
 *
 * transaction_pool (database.pool_mode = "transaction"): nothing else may live in the session
 * either, so statements go unnamed (Parse/Bind/Execute with each call, no PQprepare). */
struct db_session {
    int lock_timeout_ms;
    int statement_timeout_ms;
    bool transaction_pool;
};

/* Called with begin = true before every db_run, db_exec and db_connect (connecting, preparing
 * and the round trip all count), and with begin = false after it; from the calling thread.
 * The consumer feeds its health endpoint with it (common/metrics.h, metrics_call_begin). */
typedef void (*db_call_hook)(void *arg, bool begin);

/* TCP keepalives and tcp_user_timeout that every connection asks for unless its conninfo names
 * them (the conninfo's own values win): an idle connection to a host that died is found within
 * DB_KEEPALIVES_IDLE + DB_KEEPALIVES_INTERVAL * DB_KEEPALIVES_COUNT = 25 s, one whose request is
 * not acknowledged within DB_TCP_USER_TIMEOUT_MS (20 s). Ignored on Unix-domain sockets. */
#define DB_KEEPALIVES_IDLE     "10"
#define DB_KEEPALIVES_INTERVAL "5"
#define DB_KEEPALIVES_COUNT    "3"
#define DB_TCP_USER_TIMEOUT_MS "20000"
/* A call waits for the server's reply at most database.statement_timeout_ms + this long (not at
 * all bounded when the statement timeout is 0): past it the connection is taken as lost, dropped,
 * and the call fails transiently (08006), so db_call repeats it on a new connection. This bounds
 * a server that keeps the TCP connection up and stops answering, which keepalives and
 * tcp_user_timeout cannot see (a proxy or pooler in front acknowledges for it). */
#define DB_REPLY_SLACK_MS 10000

struct db;

/* conninfo: libpq conninfo string or URI; NULL or "" uses libpq's environment.
 * password: NULL unless read from a secret file. app_name is recorded by the
 * gate as the actor of every transition. stop: optional flag that aborts
 * retries when shutdown is requested. Returns NULL only when out of memory. */
struct db *db_new(const char *conninfo, const char *password, const char *app_name,
                  const struct db_retry *retry, volatile sig_atomic_t *stop);
void db_free(struct db *db);

/* The longest password a password file may hold; a longer one is refused (never cut). */
#define DB_PASSWORD_MAX 1023

/* Reads a password file: its content without trailing newlines, at most
 * DB_PASSWORD_MAX bytes (a longer one is OG_ERR_CONFIG naming the file, and
 * nothing is kept). path NULL or "" means no file: *password is NULL and the
 * status OG_OK. Otherwise *password is set only on OG_OK; the caller releases it
 * with db_password_free. */
enum og_status db_password_read(const char *path, char **password, struct og_error *err);
/* Overwrites a password with zeros (explicit_bzero, so the compiler cannot
 * drop it); NULL is fine. */
void db_password_wipe(char *password);
/* Wipes, then frees; NULL is fine. */
void db_password_free(char *password);
/* db_new with the password read from password_file (NULL or "": none); the
 * password read is wiped before this returns. *out is NULL unless OG_OK. */
enum og_status db_new_passfile(const char *conninfo, const char *password_file,
                               const char *app_name, const struct db_retry *retry,
                               volatile sig_atomic_t *stop, struct db **out, struct og_error *err);

/* Bounds for every transaction from now on (sent with each, never to the session). Without
 * this call: none (0, 0). Sends nothing and cannot fail; err is unused. */
enum og_status db_set_session(struct db *db, const struct db_session *session,
                              struct og_error *err);
/* One more setting (a custom one a caller's statements read: common/hook_timing.h's
 * ordergate.hook_timing) for every transaction from now on, sent like the bounds
 * (set_config(name, value, true) with each call, or right after BEGIN), never to the session.
 * name NULL removes it; name and value must outlive db. */
void db_set_local(struct db *db, const char *name, const char *value);
/* Logs in as user (libpq's user=, after the conninfo's; NULL: the conninfo's own) from the next
 * connection on: a program that connects as each person who uses it (the operator's console). */
enum og_status db_set_user(struct db *db, const char *user, struct og_error *err);
/* Wipes and drops the password given to db_new: the connection open now stays, and a reconnect
 * falls back to libpq's own sources (which the console leaves empty, so a lost connection ends
 * the person's session instead of keeping their password in memory). */
void db_forget_password(struct db *db);
/* Installs (fn NULL: removes) the call hook. */
void db_set_call_hook(struct db *db, db_call_hook fn, void *arg);

/* Called while db_run waits for the server's answer to a statement sent in one pipeline (the
 * bounded path: db_set_session gave bounds), once right after the statement went out and then
 * every every_ms while the answer is outstanding, from the calling thread: a caller's other work
 * overlaps the round trip (the consumer takes in its next messages while a claim is in flight).
 * It returns true to be called again; false when it has nothing left to do in this wait (the
 * consumer's next batch is in hand), and the thread then sleeps until the answer comes instead
 * of waking every every_ms for nothing (the next result of the same call asks it once again).
 * The hook must be short and must not use db. The wait itself keeps its bounds (the
 * statement_timeout, the keepalives); only how the thread spends it changes. */
typedef bool (*db_wait_hook)(void *arg);
/* Installs (fn NULL: removes) the wait hook; every_ms 1..1000. */
void db_set_wait_hook(struct db *db, db_wait_hook fn, void *arg, int every_ms);

/* Called with each new connection right after it opened (db_connect and the reconnects of
 * db_call alike), from the calling thread: a caller's own per-connection setup
 * (common/hook_timing.h: a notice receiver). transaction_pool: the session's
 * db_session.transaction_pool. Nothing may be left in the server session, whatever it says: a
 * pooler may lend the server connection to other clients. A failure fails the connect. */
typedef enum og_status (*db_connect_hook)(void *arg, PGconn *conn, bool transaction_pool,
                                          struct og_error *err);
/* Installs (fn NULL: removes) the connect hook; for the current connection too if connected. */
enum og_status db_set_connect_hook(struct db *db, db_connect_hook fn, void *arg,
                                   struct og_error *err);

/* Connects now (db_call connects on demand too). */
enum og_status db_connect(struct db *db, struct og_error *err);
/* Closes the connection now, if any; the next call connects anew. For a caller that stopped
 * waiting for an answer on it (consumer/claim_pool.c) and will not trust the session again. */
void db_close(struct db *db);

/* Runs a statement once, preparing it first if needed (unnamed with transaction_pool). On OG_OK
 * *res holds the result (caller PQclear()s it; res may be NULL to discard). Without
 * transaction_pool, a prepared statement the server no longer has (26000) or already has
 * (42P05) means a transaction pooler is in front: a non-retriable error naming
 * database.pool_mode.
 *
 * A connection lost (or refused) is remembered; the next statement that succeeds logs it once,
 * as one line (event db_reconnected: the statement the connection was lost in, its error, how
 * long until the database answered again, how many attempts failed meanwhile). */
enum og_status db_run(struct db *db, const struct db_stmt *stmt, const char *const *params,
                      PGresult **res, struct og_error *err);

/* db_run() with the retry policy; must not be used inside an explicit
 * transaction (the retry would repeat only part of it). */
enum og_status db_call(struct db *db, const struct db_stmt *stmt, const char *const *params,
                       PGresult **res, struct og_error *err);

/* Simple commands without parameters for transaction control. A command that opens a
 * transaction (BEGIN) is followed by the bounds for that transaction (set_config(..., true):
 * one more round trip). */
enum og_status db_exec(struct db *db, const char *sql, struct og_error *err);

/* How many times the last db_call ran its statement: 1, or more when it repeated it after a
 * transient failure. Above 1 the answer may be the gate's to a repeat of a call that had
 * already committed (a connection lost after the commit), e.g. "duplicate" for a payment whose
 * first attempt won: the caller reads first_outcome then. */
int db_last_attempts(const struct db *db);
/* Milliseconds the last db_call/db_run spent waiting for the server. */
double db_last_ms(const struct db *db);
/* The connection, for diagnostics and tests; may be NULL. */
PGconn *db_conn(struct db *db);
/* True for SQLSTATEs that are worth repeating. */
bool db_sqlstate_retriable(const char *sqlstate);
/* Sleeps for the backoff of attempt n (0-based) unless stop is raised. */
void db_backoff(const struct db_retry *retry, int attempt, volatile sig_atomic_t *stop);

#endif
