#!/usr/bin/env python3
"""How whole the drill's consumer group stayed through each fault (tests/drill/cluster.sh).

    cluster_group.py GROUP_LOG CONSUMERS DRILL_END "NAME BEGIN END"...

GROUP_LOG is og_group_watch's output (tests/support/group_watch.c): "<unix ms> <state> <members>
<partitions>" a line per change. The group is whole when it is Stable with CONSUMERS members and
as many partitions assigned as it ever had so. For each fault (times in unix seconds),
from its begin until the next fault's begin (the last: until DRILL_END, when the drill
said its triggers drained and began stopping the consumers), one line: how long the
group was not whole and when it was whole again for good, counted from the fault's end (negative:
before the broker was back). "unanswered" (no coordinator answered) counts as not whole. Prints,
never judges: the times depend on the machine's load. Counts from the moment the group was first
whole (the consumers start with the race, just before the first fault)."""
import sys


def main():
    path, n, end = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    faults = [f.split() for f in sys.argv[4:]]
    rows = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) == 4:
                rows.append((int(w[0]) / 1000.0, w[1], int(w[2]), int(w[3])))
    if not faults:
        return
    full = max([r[3] for r in rows if r[1] == "Stable" and r[2] == n], default=None)
    if full is None:
        print("group: never Stable with %d members (%d changes watched)" % (n, len(rows)))
        return

    def whole(r):
        return r is not None and r[1] == "Stable" and r[2] == n and r[3] == full

    # The consumers start with the race: the group forming is not a fault's doing.
    formed = min(r[0] for r in rows if whole(r))
    for i, (name, b, e) in enumerate(faults):
        b, e = max(float(b), formed), float(e)
        stop = float(faults[i + 1][1]) if i + 1 < len(faults) else end
        before = [r for r in rows if r[0] <= b]
        seq = ([before[-1]] if before else [None]) + [r for r in rows if b < r[0] < stop]
        times = [b] + [r[0] for r in seq[1:]] + [stop]
        broken = sum(times[k + 1] - times[k] for k in range(len(seq)) if not whole(seq[k]))
        states = " ".join(sorted({r[1] for r in seq if r is not None and not whole(r)}))
        if broken == 0:
            print("fault %s: group whole throughout (%d members, %d partitions)" % (name, n, full))
        elif whole(seq[-1]):
            k = len(seq) - 1
            while k > 0 and whole(seq[k - 1]):
                k -= 1
            print("fault %s: group not whole for %.1f s (%s); whole again for good %+.1f s after "
                  "the fault's end" % (name, broken, states, times[k] - e))
        else:
            print("fault %s: group not whole for %.1f s (%s); not whole again before %s"
                  % (name, broken, states,
                     "the next fault" if i + 1 < len(faults) else "the triggers drained"))


if __name__ == "__main__":
    main()
