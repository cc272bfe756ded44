#include "ctl/ctl_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/testutil.h"

#define CTL_RUN_MAX_ARGS 64
/* Longer than any command the tests run, shorter than the test's timeout. */
#define CTL_RUN_TIMEOUT_MS 240000

static char *ctl_run_slurp(FILE *f)
{
    long size;
    char *buf;

    fflush(f);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)size + 1);
    assert_non_null(buf);
    if (size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size)
        fail_msg("short read of captured output");
    return buf;
}

void ctl_run(struct ctl_result *r, ...)
{
    const char *args[CTL_RUN_MAX_ARGS + 1];
    const char *a;
    int n = 0;
    va_list ap;

    va_start(ap, r);
    while ((a = va_arg(ap, const char *)) != NULL) {
        assert_true(n < CTL_RUN_MAX_ARGS);
        args[n++] = a;
    }
    va_end(ap);
    args[n] = NULL;
    ctl_runv(r, args);
}

void ctl_runv(struct ctl_result *r, const char *const *args)
{
    char bin[1024];
    char *argv[CTL_RUN_MAX_ARGS + 2];
    int argc = 0;
    FILE *out = tmpfile(), *err = tmpfile();
    pid_t pid;

    memset(r, 0, sizeof(*r));
    assert_non_null(out);
    assert_non_null(err);
    testutil_binary(bin, sizeof(bin), "tools/ordergatectl");
    argv[argc++] = bin;
    for (; *args != NULL; args++) {
        assert_true(argc <= CTL_RUN_MAX_ARGS);
        argv[argc++] = (char *)*args;
    }
    argv[argc] = NULL;

    pid = testutil_child_start((const char *const *)argv,
                               &(struct child_opts){.out_fd = fileno(out), .err_fd = fileno(err)});
    r->status = testutil_child_wait(pid, CTL_RUN_TIMEOUT_MS, "ordergatectl");
    r->out = ctl_run_slurp(out);
    r->err = ctl_run_slurp(err);
    fclose(out);
    fclose(err);
    if (r->out[0] == '{')
        r->json = json_loads(r->out, 0, NULL);
    /* Shown in the test log, so a failure explains itself. */
    fprintf(stderr, "$ ordergatectl");
    for (int i = 1; i < argc; i++)
        fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n[exit %d]\n%s%s", r->status, r->out, r->err);
}

void ctl_result_free(struct ctl_result *r)
{
    free(r->out);
    free(r->err);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

const char *ctl_json_s(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    if (!json_is_string(v))
        fail_msg("JSON member '%s' is not a string", key);
    return json_string_value(v);
}

long long ctl_json_i(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    if (!json_is_integer(v))
        fail_msg("JSON member '%s' is not an integer", key);
    return (long long)json_integer_value(v);
}
