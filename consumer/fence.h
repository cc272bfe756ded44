/* A fenced group.instance.id (FENCED_INSTANCE_ID): a takeover, or a coordinator that stopped
 * answering.
 *
 * The broker fences a static member when another JoinGroup with its group.instance.id replaced
 * its member id. Two causes look the same to the fenced process:
 *   - a takeover: another live process runs with the same id (a misconfiguration). Restarting
 *     would fence the other one in turn, so the process exits 2 (docs/consumer.md, "Takeover");
 *   - the coordinator stopped answering for longer than the session timeout (its broker died,
 *     or it was left without the in-sync replicas to write the group's offsets): librdkafka
 *     2.0.2 times the session out, joins again, and its next OffsetCommit is refused with
 *     FENCED_INSTANCE_ID with nobody else holding the id. Both consumers of the three-broker
 *     drill's group stopped so (tests/drill/cluster.sh, fault isr).
 * The process tells them apart by rejoining: the first fence drops everything the member held
 * (batch, window, retries, pauses: their offsets were never stored, so they are delivered
 * again) and, FENCE_BACKOFF_MS later, joins with a new handle under the same id. A fence of
 * its own making is over then. A live twin answers the rejoin the same way: it is fenced by
 * it, rejoins FENCE_BACKOFF_MS later and fences this process again, within FENCE_QUIET_MS of
 * its rejoin, which is the takeover's proof: exit 2, and the twin, whose rejoin stood, keeps
 * the id. Two fences of the coordinator's making within FENCE_QUIET_MS of a rejoin are read as
 * a takeover too: exit 2 where a restart would have helped.
 *
 * Never two claimants of one partition's offsets: a fenced handle can commit no offset (the
 * broker refuses the member id, librdkafka refuses every commit after the fatal error), the
 * loop makes no claim from the fence until the new member is assigned partitions, and the
 * old handle is destroyed without a final commit. What a twin's claim in flight may still do
 * is decided by the database gate, as on any redelivery.
 *
 * This file owns the decision and the replacement of the group member; the loop
 * (consumer/loop.c) asks for the decision on a fatal error and subscribes the new member. */
#ifndef OG_CONSUMER_FENCE_H
#define OG_CONSUMER_FENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* From the fence to the new member's JoinGroup: long enough for the coordinator to settle on
 * the fenced join, short against the session timeout the partitions are idle for anyway. */
#define FENCE_BACKOFF_MS 1000
/* A fence this soon after a rejoin is a live twin's answer to it. A twin answers within its
 * own FENCE_BACKOFF_MS plus a handle's start and a JoinGroup (1.5 s in consumer_static); in the
 * three-broker drill each consumer was fenced at most once per fault, and a rolling restart,
 * one node every 26-43 s, fenced none. */
#define FENCE_QUIET_MS 30000

struct consumer;

struct fence {
    bool pending;         /* fenced: no claim; a new member joins at rejoin_at_ms */
    int64_t rejoin_at_ms; /* monotonic */
    int64_t joined_ms;    /* monotonic, when the last rejoin was made; 0: none yet */
    unsigned rejoins;     /* rejoins made in this process's life */
};

enum fence_action {
    FENCE_REJOIN, /* f->pending is set: drop what the member held, join again at rejoin_at_ms */
    FENCE_EXIT    /* a takeover: exit 2 */
};

/* What to do on a FENCED_INSTANCE_ID at now_ms (monotonic). Called once per fence: not while
 * f->pending. */
enum fence_action fence_decide(struct fence *f, int64_t now_ms);

/* Replaces c's fenced group member: forgets what it held (its assignment's batch entries,
 * window, retries and pauses), builds a new handle (consumer_member_new), destroys the old one
 * without a final commit or LeaveGroup, and clears f->pending. The caller subscribes the new
 * member. On failure c keeps the old (fenced) handle, err says why, and the caller stops. */
enum og_status fence_rejoin(struct consumer *c, int64_t now_ms, struct og_error *err);

#endif
