/* A hook's failure in a claim, told apart from the gate's own, and the bisection that keeps one
 * order a hook fails from failing the rest of its batch (gate.h). A file of its own so that a
 * test can stand in for gate_claim_cancel underneath (the link's --wrap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gate.h"

bool gate_hook_failed(const struct og_error *err, char *hook, size_t hook_size)
{
    const char *end;

    if (err == NULL || strcmp(err->object, "ordergate.hooks") != 0)
        return false;
    if (hook != NULL && hook_size > 0) {
        /* _hooks_run's message: "hook <function>: <the hook's own message>". */
        if (strncmp(err->msg, "hook ", 5) == 0 && (end = strstr(err->msg + 5, ": ")) != NULL)
            snprintf(hook, hook_size, "%.*s", (int)(end - (err->msg + 5)), err->msg + 5);
        else
            snprintf(hook, hook_size, "unknown");
    }
    return true;
}

static int gate_str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

struct gate_range {
    size_t at, len;
};

enum og_status gate_claim_cancel_isolating(struct db *db, const char *const *order_nos, size_t n,
                                           enum gate_source source, struct gate_cancel_row *rows,
                                           size_t *nrows, struct og_error *hook_err,
                                           struct og_error *err)
{
    const char **nos = NULL;
    struct gate_range *queue = NULL;
    struct og_error e = {0}, last = {0};
    size_t nd = 0, head = 0, tail = 0, claims = 1, done = 0, got;
    bool claimed = false;
    enum og_status st;

    st = gate_claim_cancel(db, order_nos, n, source, rows, nrows, &e);
    if (st == OG_OK || !gate_hook_failed(&e, NULL, 0))
        goto out;
    last = e;
    /* The distinct orders, sorted: a part never splits one order's duplicates. */
    nos = malloc(n * sizeof(*nos));
    queue = malloc(2 * n * sizeof(*queue));
    if (nos == NULL || queue == NULL) {
        st = og_error_set(&e, OG_ERR_NOMEM, false, "out of memory isolating a hook failure");
        goto out;
    }
    memcpy(nos, order_nos, n * sizeof(*nos));
    qsort(nos, n, sizeof(*nos), gate_str_cmp);
    for (size_t i = 0; i < n; i++)
        if (nd == 0 || strcmp(nos[nd - 1], nos[i]) != 0)
            nos[nd++] = nos[i];
    if (nd > 1) {
        queue[tail++] = (struct gate_range){0, nd / 2};
        queue[tail++] = (struct gate_range){nd / 2, nd - nd / 2};
    } else {
        queue[tail++] = (struct gate_range){0, nd};
        claims = GATE_ISOLATE_CLAIMS_MAX; /* the one order has failed already */
    }
    st = OG_OK;
    while (head < tail) {
        struct gate_range r = queue[head++];

        if (claims < GATE_ISOLATE_CLAIMS_MAX) {
            claims++;
            st = gate_claim_cancel(db, nos + r.at, r.len, source, rows + done, &got, &e);
            if (st == OG_OK) {
                done += got;
                claimed = true;
                continue;
            }
            if (!gate_hook_failed(&e, NULL, 0))
                goto out;
            st = OG_OK;
            last = e;
            if (r.len > 1) {
                queue[tail++] = (struct gate_range){r.at, r.len / 2};
                queue[tail++] = (struct gate_range){r.at + r.len / 2, r.len - r.len / 2};
                continue;
            }
        }
        /* Failing alone, or the budget is spent: not claimed this time. */
        for (size_t i = r.at; i < r.at + r.len; i++) {
            snprintf(rows[done].order_no, sizeof(rows[done].order_no), "%s", nos[i]);
            rows[done].outcome = GATE_HOOK_FAILED;
            rows[done].status = ORDER_STATUS_NONE;
            done++;
        }
    }
    if (!claimed && nd > 1) {
        e = last;
        st = e.status != OG_OK ? e.status : OG_ERR_DB;
        goto out;
    }
    *nrows = done;
    if (hook_err != NULL)
        *hook_err = last;
out:
    if (st != OG_OK) {
        *nrows = 0;
        if (err != NULL)
            *err = e;
    }
    free(queue);
    free(nos);
    return st;
}
