/* Shared helpers of the gate client tests: a fresh database per test (copied
 * from the template, see tests/support/testdb.h), a raw libpq connection to
 * look at side effects in SQL, a gate client, and queries with parameters.
 * Every helper fails the running test (never skips) when SQL fails. */
#ifndef OG_TESTS_GATE_FIXTURE_H
#define OG_TESTS_GATE_FIXTURE_H

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>

#include "common/db.h"
#include "common/gate.h"
#include "support/testdb.h"

/* The application_name of the gate client: the actor of automatic transitions. */
#define GFX_APP "test_gate_client"

struct gfx {
    struct testdb t;
    PGconn *sql;     /* raw connection, superuser, for checks and setup */
    struct db *db;   /* the gate client under test */
    FILE *log;       /* captured ordergate log lines (db_retry...) */
    char text[4096]; /* what the last text helper of a test returned (gfx_order_status...) */
};

/* Creates the database og_<tag>_<pid>, connects both ways, captures logs. */
struct gfx *gfx_new(const char *tag);
/* Restores logging, closes, drops the database. NULL is a no-op. */
void gfx_free(struct gfx *g);
/* cmocka teardown: frees the fixture a failed test left behind (its
 * database included), so a failure does not leak databases. */
int gfx_teardown(void **state);

/* Query helpers: params are a NULL-terminated list of strings (SQL NULL
 * cannot be passed here; use gfx_raw for that). */
long gfx_long(PGconn *c, const char *sql, ...) __attribute__((sentinel));
/* First column of the first row as text into buf ("" for NULL). */
const char *gfx_text(PGconn *c, char *buf, size_t size, const char *sql, ...)
    __attribute__((sentinel));
void gfx_exec(PGconn *c, const char *sql, ...) __attribute__((sentinel));
/* Runs sql with n parameters (entries may be NULL) and returns the result,
 * success or not; the caller PQclear()s it. */
PGresult *gfx_raw(PGconn *c, const char *sql, int n, const char *const *params);
/* SQLSTATE of a failed result, "" on success. */
const char *gfx_sqlstate(const PGresult *res);

/* md5 over every row of every table in schema ordergate and every sequence
 * position: equal before and after a call means the call changed nothing. */
void gfx_checksum(PGconn *c, char *out, size_t size);

/* Setup through the superuser connection: initial stock and coupons. */
void gfx_stock(struct gfx *g, const char *sku, long available);
void gfx_coupon(struct gfx *g, const char *coupon_id);
/* A timestamptz literal for now() + offset on the database clock, e.g. "-1 minute". */
const char *gfx_ts(struct gfx *g, char *buf, size_t size, const char *offset);
/* Places an order through the gate client and asserts the outcome is placed.
 * expire_offset as for gfx_ts; coupon may be NULL. */
void gfx_place(struct gfx *g, const char *order_no, int64_t amount, const char *items,
               const char *coupon, const char *expire_offset);
/* Claims one order through the gate client; asserts OG_OK and returns the outcome. */
enum gate_outcome gfx_cancel1(struct gfx *g, const char *order_no, enum gate_source source);
enum gate_outcome gfx_pay(struct gfx *g, const char *order_no, const char *txn, int64_t amount,
                          struct gate_payment_result *out);

/* An order's status, "absent" when there is no such order; in g->text. */
const char *gfx_order_status(struct gfx *g, const char *order_no);
/* The one exception of a transaction (asserted: exactly one) as
 * "kind|resolution|state|amount_cents|currency|order_no"; in g->text. */
const char *gfx_exception(struct gfx *g, const char *txn_no);
/* Fails the test unless the checksum of every table (gfx_checksum) is still `before`. */
#define GFX_ASSERT_UNCHANGED(g, before)                                                            \
    do {                                                                                           \
        char after_[1024];                                                                         \
        gfx_checksum((g)->sql, after_, sizeof(after_));                                            \
        assert_string_equal(before, after_);                                                       \
    } while (0)

/* Counts the captured log lines containing every one of the given
 * substrings (NULL-terminated). */
int gfx_log_count(struct gfx *g, ...) __attribute__((sentinel));

/* Fails the test unless every row reconcile() returns has zero violations. */
void gfx_reconcile_clean(PGconn *c);

#endif
