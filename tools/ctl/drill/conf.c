/* The children's configurations: a private directory and one file per child, written by
 * common/cfg_write from a configuration made here. Owns which settings a child takes from the
 * drill's configuration and which the drill sets for it. It must not start, stop or wait for
 * a child (children.c does). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg_write.h"
#include "tools/ctl/drill/drill.h"

/* The settings a child takes from the drill's configuration as they are there: the way to the
 * database and the brokers (the password files as paths, kafka.properties whole) and the batch
 * sizes. Every other setting is the drill's (drill_conf_settings) or its default. */
static const char *const drill_conf_inherited[] = {
    "database.conninfo",   "database.password_file",   "database.pool_mode",
    "kafka.brokers",       "kafka.sasl_password_file", "kafka.properties",
    "consumer.batch_size", "consumer.linger_ms",       "outbox.batch",
    "outbox.interval_ms",  "scanner.batch_size",
};

/* The children's configuration files hold what they need, secrets included (a conninfo's
 * password, kafka.properties such as sasl.password): they live in a directory of the drill's
 * own, made by mkdtemp under $TMPDIR (else /tmp), so with mode 0700 and a name nobody can know
 * beforehand, and each is created there exclusively (O_EXCL, never through a link) with mode
 * 0600. drill_conf_remove takes the lot away when the drill ends, also when SIGINT or
 * SIGTERM stopped it (run.c). */
static enum og_status drill_conf_dir(struct drill *d, struct og_error *err)
{
    const char *tmp = getenv("TMPDIR");

    if (tmp == NULL || *tmp == '\0')
        tmp = "/tmp";
    if ((size_t)snprintf(d->conf_dir, sizeof(d->conf_dir), "%s/ordergate-drill-XXXXXX", tmp) >=
        sizeof(d->conf_dir)) {
        d->conf_dir[0] = '\0';
        return og_error_set(err, OG_ERR_CONFIG, false, "TMPDIR %.64s...: too long", tmp);
    }
    if (mkdtemp(d->conf_dir) == NULL) {
        d->conf_dir[0] = '\0';
        return og_error_set(err, OG_ERR_IO, false, "cannot make a directory in %s: %s", tmp,
                            strerror(errno));
    }
    return OG_OK;
}

/* Nothing to return to: the drill is ending. What stays behind is said on stderr. */
void drill_conf_remove(struct drill *d)
{
    for (int k = 0; k <= DRILL_MAX_CONSUMERS; k++) {
        if (d->conf_path[k][0] != '\0' && unlink(d->conf_path[k]) != 0 && errno != ENOENT)
            drill_report_finding("cannot remove %s: %s", d->conf_path[k], strerror(errno));
        d->conf_path[k][0] = '\0';
    }
    if (d->conf_dir[0] != '\0' && rmdir(d->conf_dir) != 0)
        drill_report_finding("cannot remove %s: %s", d->conf_dir, strerror(errno));
    d->conf_dir[0] = '\0';
}

/* Copies setting `name` from the drill's configuration into c (each element of a list). */
static enum og_status drill_conf_inherit(const struct og_config *from, struct og_config *c,
                                         const char *name, struct og_error *err)
{
    struct cfg_setting_info info;
    char num[32];
    const char *v;

    for (size_t i = 0; cfg_setting_info(i, &info); i++) {
        if (strcmp(info.name, name) != 0)
            continue;
        for (size_t j = 0; (v = cfg_setting_value(from, i, j, num, sizeof(num))) != NULL; j++)
            if (cfg_set(c, name, v, err) != OG_OK)
                return err->status;
        return OG_OK;
    }
    return og_error_set(err, OG_ERR_INTERNAL, false, "unknown setting %s", name);
}

/* What the drill sets for its children: its own topics and group, no HTTP endpoint, the relay
 * on the drill's outbox topics, a scanner without grace or pause that repeats every second.
 * Each consumer slot has a static group membership (kafka.group_instance_id): a consumer
 * killed and restarted in the same slot takes its partitions back at once instead of waiting
 * for the group to time the dead member out. slot -1 is the scanner. */
static enum og_status drill_conf_settings(const struct drill *d, int slot, struct og_config *c,
                                          struct og_error *err)
{
    char events[sizeof(d->topic) + 16], refunds[sizeof(events)], alerts[sizeof(events)];
    char id[sizeof(d->group) + 16];
    const struct {
        const char *name, *value;
    } set[] = {
        {"log_level", "warn"},
        {"kafka.topics", d->topics_csv},
        {"kafka.group", d->group},
        {"kafka.dead_letter_topic", d->dlq_topic},
        {"kafka.group_instance_id", slot >= 0 ? id : ""},
        {"consumer.metrics_listen", ""},
        {"outbox.enabled", "true"},
        {"outbox.topic", events},
        {"outbox.refund_topic", refunds},
        {"outbox.alert_topic", alerts},
        {"scanner.grace_s", "0"},
        {"scanner.pause_ms", "0"},
        {"scanner.every_s", "1"},
    };

    snprintf(id, sizeof(id), "%s-%d", d->group, slot);
    snprintf(events, sizeof(events), "%s.events", d->topic);
    snprintf(refunds, sizeof(refunds), "%s.refunds", d->topic);
    snprintf(alerts, sizeof(alerts), "%s.alerts", d->topic);
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
        if (cfg_set(c, set[i].name, set[i].value, err) != OG_OK) {
            err->setting[0] = '\0'; /* the drill's value: no file or flag of the operator's */
            return err->status;
        }
    return OG_OK;
}

/* Writes c into fd, a file just created at path. */
static enum og_status drill_conf_file(const struct drill *d, int fd, const char *path,
                                      const struct og_config *c, struct og_error *err)
{
    FILE *f = fdopen(fd, "w");
    enum og_status st;

    if (f == NULL) {
        close(fd);
        return og_error_set(err, OG_ERR_IO, false, "%s: %s", path, strerror(errno));
    }
    fprintf(f, "# written by ordergatectl drill %s\n", d->prefix);
    st = cfg_write(c, f, err);
    if (st != OG_OK)
        og_error_prefix(err, "%s", path);
    if (fclose(f) != 0 && st == OG_OK)
        st = og_error_set(err, OG_ERR_IO, false, "%s: %s", path, strerror(errno));
    return st;
}

/* Writes slot's configuration (-1: the scanner's, k: consumer k's) into d->conf_path. */
static enum og_status drill_conf_write(struct drill *d, int slot, struct og_error *err)
{
    char *path = d->conf_path[slot + 1];
    struct og_config c;
    enum og_status st;
    int fd;

    st = cfg_init(&c, err);
    for (size_t i = 0; i < sizeof(drill_conf_inherited) / sizeof(drill_conf_inherited[0]); i++)
        if (st == OG_OK)
            st = drill_conf_inherit(d->cfg, &c, drill_conf_inherited[i], err);
    if (st == OG_OK)
        st = drill_conf_settings(d, slot, &c, err);
    if (st == OG_OK) {
        snprintf(path, sizeof(d->conf_path[0]), "%s/%s-%d.conf", d->conf_dir,
                 slot < 0 ? "scanner" : "consumer", slot + 1);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            st = og_error_set(err, OG_ERR_IO, false, "cannot create %s: %s", path, strerror(errno));
            path[0] = '\0'; /* not ours: never removed */
        } else {
            st = drill_conf_file(d, fd, path, &c, err);
        }
    }
    cfg_free(&c);
    if (st != OG_OK && slot < 0)
        og_error_prefix(err, "the scanner's configuration");
    else if (st != OG_OK)
        og_error_prefix(err, "consumer %d's configuration", slot + 1);
    return st;
}

enum og_status drill_conf_make(struct drill *d, struct og_error *err)
{
    if (drill_conf_dir(d, err) != OG_OK)
        return err->status;
    for (int k = -1; k < (d->o.no_kafka ? 0 : d->o.consumers); k++)
        if (drill_conf_write(d, k, err) != OG_OK)
            return err->status;
    return OG_OK;
}
