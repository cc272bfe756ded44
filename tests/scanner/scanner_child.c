#include "scanner_child.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/testdb.h"
#include "support/testutil.h"

void scanner_child_start(struct scanner_child *c, const char *const *args)
{
    static int seq;
    char bin[512];
    const char *argv[64];
    int n = 0, fd;

    memset(c, 0, sizeof(*c));
    testutil_binary(bin, sizeof(bin), "scanner/ordergate-scanner");
    snprintf(c->log_path, sizeof(c->log_path), "/tmp/og-scanner-test.%d.%d.log", (int)getpid(),
             ++seq);
    argv[n++] = bin;
    for (int i = 0; args[i] != NULL && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    fd = open(c->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    c->pid = testutil_child_start(argv, &(struct child_opts){.out_fd = fd, .err_fd = fd});
    close(fd);
}

static char *scanner_output(const char *path)
{
    char *text = testutil_slurp(path);

    return text != NULL ? text : strdup("");
}

int scanner_child_wait(struct scanner_child *c, int timeout_ms)
{
    int ws = 0;
    int st = child_wait(c->pid, timeout_ms, &ws);

    if (st < 0) {
        kill(c->pid, SIGKILL);
        child_wait(c->pid, 10000, NULL);
        c->output = scanner_output(c->log_path);
        fail_msg("scanner did not exit within %d ms; output:\n%s", timeout_ms, c->output);
    }
    c->output = scanner_output(c->log_path);
    unlink(c->log_path);
    c->exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    /* Shown when a later assertion fails; cheap otherwise. */
    print_message("--- scanner exited %d:\n%s", c->exit_code, c->output);
    return c->exit_code;
}

void scanner_child_free(struct scanner_child *c)
{
    free(c->output);
    c->output = NULL;
}

int scanner_child_run(struct scanner_child *c, const char *const *args)
{
    scanner_child_start(c, args);
    return scanner_child_wait(c, 60000);
}

bool scanner_poll_at_least(PGconn *conn, const char *sql, long want, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        if (testdb_scalar(conn, sql) >= want)
            return true;
        testutil_sleep_ms(20);
    }
    return false;
}

void scanner_seed(PGconn *conn)
{
    testdb_exec(conn, "SELECT ordergate.add_stock('SKU-A', 1000000)");
}

void scanner_place(PGconn *conn, const char *prefix, int n, int offset_s)
{
    char sql[512];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM (SELECT ordergate.place_order('%s-' || g, 100, "
             "'[{\"sku\":\"SKU-A\",\"qty\":1}]', NULL, now() + make_interval(secs => %d) + g * "
             "interval '1 millisecond') AS o FROM generate_series(1, %d) g) x WHERE o = 'placed'",
             prefix, offset_s, n);
    assert_int_equal(testdb_scalar(conn, sql), n);
}

int scanner_fixture_setup(void **state, const char *tag, bool seed)
{
    struct scanner_fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    testdb_create(&f->t, tag);
    f->conn = testdb_connect(&f->t);
    snprintf(f->textfile, sizeof(f->textfile), "/tmp/og-%s.%d.prom", tag, (int)getpid());
    if (seed)
        scanner_seed(f->conn);
    *state = f;
    return 0;
}

int scanner_fixture_teardown(void **state)
{
    struct scanner_fixture *f = *state;

    PQfinish(f->conn);
    testdb_drop(&f->t);
    unlink(f->textfile);
    free(f);
    return 0;
}
