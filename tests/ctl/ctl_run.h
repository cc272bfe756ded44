/* Runs the built ordergatectl as a child process and captures what it says. */
#ifndef OG_TESTS_CTL_RUN_H
#define OG_TESTS_CTL_RUN_H

#include <jansson.h>

struct ctl_result {
    int status;   /* exit status; 128 + signal when killed */
    char *out;    /* stdout, NUL-terminated */
    char *err;    /* stderr, NUL-terminated */
    json_t *json; /* stdout parsed when it is one JSON object, else NULL */
};

/* ctl_run(&r, "show", "A1", "--db", conninfo, NULL): arguments after the
 * program name, NULL-terminated. Fails the test when the program cannot be
 * started. */
void ctl_run(struct ctl_result *r, ...);
/* The same with a NULL-terminated array. */
void ctl_runv(struct ctl_result *r, const char *const *args);
void ctl_result_free(struct ctl_result *r);

/* Members of r->json (fail the test when missing or of another type). */
const char *ctl_json_s(const json_t *obj, const char *key);
long long ctl_json_i(const json_t *obj, const char *key);

#endif
