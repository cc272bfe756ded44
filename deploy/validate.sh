#!/usr/bin/env bash
# Validates ordergate's deployment files, as far as this machine can without a cluster, a Docker
# daemon or a running systemd:
#
#   - YAML: every deploy/**/*.yaml parses (PyYAML);
#   - ordergate.conf: names every setting of the table in common/cfg.c with its default; every
#     other config (compose, Kubernetes ConfigMap) uses only known names; all of them pass a
#     binary's --check-config, and a broken file is refused with exit 2 and FILE:LINE;
#   - systemd: `systemd-analyze verify` on copies of the units whose ExecStart points at stubs
#     (any warning fails), and `systemd-analyze security --offline` stays at "OK";
#   - Prometheus: `promtool check rules` and `promtool test rules`; every alert has a severity, a
#     summary and a runbook_url whose anchor exists in docs/operations.md; every metric an alert
#     or the dashboard uses is documented there;
#   - Grafana: the dashboard is JSON with unique panel ids on the ${datasource} variable;
#   - Kubernetes: `kubectl kustomize` renders the directory, `kubernetes-validate --strict` checks
#     each manifest against the API schemas, plus consistency (no namespace, selectors match
#     labels, probes, non-root, CronJob policies, referenced ConfigMaps and Secret keys exist);
#   - Compose and Dockerfile: references resolve (services, secrets, files), `docker compose
#     config` when the plugin exists, the packages the Dockerfile installs exist in this Debian's
#     archive, and the built binaries need no shared library outside the runtime stage's packages.
#
# Usage: deploy/validate.sh [--build-dir DIR] [--offline]
#   --build-dir DIR  where the binaries were built (default $ORDERGATE_BUILD_DIR, else build/)
#   --offline        install and download nothing (also ORDERGATE_VALIDATE_OFFLINE=1)
#
# Tools: python3 with PyYAML is required; when missing it is installed (Debian's python3-yaml as
# root, else PyPI's PyYAML into a venv under the cache directory), or the script fails saying so.
# promtool comes from Debian's prometheus package: used from PATH, else extracted (not installed:
# no server is set up) from the package downloaded with `apt-get download` into the cache.
# kubernetes-validate comes from PyPI into a venv in the cache. Either one missing and not
# obtainable is reported as skipped, never as passed. Cache: $ORDERGATE_CACHE_DIR, default
# ~/.cache/ordergate.
#
# Exit status: 0 when every check ran passed (skipped ones are listed), 1 when one failed, 2 on
# bad usage. Last line: "validate: N passed, N failed, N skipped".
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/.." && pwd -P)
BUILD_DIR=${ORDERGATE_BUILD_DIR:-$REPO/build}
OFFLINE=${ORDERGATE_VALIDATE_OFFLINE:-0}
: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
CACHE=${ORDERGATE_CACHE_DIR:-$HOME/.cache/ordergate}

while (($#)); do
    case $1 in
        --build-dir) BUILD_DIR=${2:?--build-dir needs a directory}; shift 2 ;;
        --build-dir=*) BUILD_DIR=${1#*=}; shift ;;
        --offline) OFFLINE=1; shift ;;
        -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "validate: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

PASS=0 FAIL=0 SKIP=0
ok() { PASS=$((PASS + 1)); printf 'ok    %s\n' "$*"; }
bad() { FAIL=$((FAIL + 1)); printf 'FAIL  %s\n' "$*"; }
skip() { SKIP=$((SKIP + 1)); printf 'skip  %s\n' "$*"; }
note() { printf '      %s\n' "$*"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ordergate-validate.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Runs "$@" with output captured; on failure shows the last lines of it.
run_quiet() {
    local out=$TMP/run.out rc=0
    "$@" >"$out" 2>&1 || rc=$?
    ((rc == 0)) || tail -n 25 "$out" | sed 's/^/      | /'
    return "$rc"
}

may_install() { [[ $OFFLINE != 1 ]]; }

# ---------------------------------------------------------------------------------------------
# python3 with PyYAML (required)
# ---------------------------------------------------------------------------------------------
PY=
find_python() {
    local c
    for c in python3 /usr/bin/python3 "$CACHE/validate-venv/bin/python"; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import yaml' >/dev/null 2>&1; then
            PY=$(command -v "$c")
            return 0
        fi
    done
    return 1
}
if ! find_python && may_install; then
    echo "validate: python3 with PyYAML not found; installing it" >&2
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >&2 ||
            { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >&2; }
    fi
    if ! find_python && command -v python3 >/dev/null; then
        python3 -m venv "$CACHE/validate-venv" >&2 && "$CACHE/validate-venv/bin/pip" install -q PyYAML >&2
    fi
    find_python || true
fi
if [[ -z $PY ]]; then
    bad "python3 with PyYAML is required (Debian: apt-get install python3-yaml; or pip install PyYAML)"
    echo "validate: $PASS passed, $FAIL failed, $SKIP skipped"
    exit 1
fi

# ---------------------------------------------------------------------------------------------
# YAML parse
# ---------------------------------------------------------------------------------------------
mapfile -t YAMLS < <(cd "$REPO" && find deploy -path deploy/local -prune -o \
    \( -name '*.yaml' -o -name '*.yml' \) -type f -print | sort)
for f in "${YAMLS[@]}"; do
    if msg=$("$PY" -c 'import sys, yaml
with open(sys.argv[1]) as fh:
    docs = [d for d in yaml.safe_load_all(fh)]
if not docs or any(d is None for d in docs):
    sys.exit("empty document")' "$REPO/$f" 2>&1); then
        ok "yaml parses: $f"
    else
        bad "yaml parse: $f: $(tail -n 3 <<<"$msg")"
    fi
done

# ---------------------------------------------------------------------------------------------
# Structure and consistency checks (python); prints "ok|FAIL|skip<TAB>message" lines
# ---------------------------------------------------------------------------------------------
cat >"$TMP/checks.py" <<'PY'
import json, os, re, sys
import yaml

repo, tmp = sys.argv[1], sys.argv[2]
def out(kind, msg): print(f"{kind}\t{msg}")
def check(cond, msg, detail=""):
    out("ok" if cond else "FAIL", msg + ("" if cond or not detail else f": {detail}"))
    return cond
def rd(p): return open(os.path.join(repo, p)).read()

# ---- the settings table of common/cfg.c ----
table = {}
for m in re.finditer(r'\{\s*"([a-z_.]+)"\s*,\s*CFG_(STR|INT|BOOL|STRLIST)\s*,\s*S\(\w+\)\s*,\s*'
                     r'"((?:[^"\\]|\\.)*)"', rd("common/cfg.c")):
    table[m.group(1)] = (m.group(2), m.group(3))
check(len(table) >= 20, f"common/cfg.c: settings table read ({len(table)} settings)")

def parse_conf(text):
    """The subset of libconfig the shipped files use: groups, scalars, string lists."""
    found, stack = {}, []
    for ln, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith(("#", "//", "@include")):
            continue
        m = re.match(r'(\w+)\s*[=:]\s*\{\s*$', s)
        if m:
            stack.append(m.group(1)); continue
        if re.match(r'\}\s*;?\s*$', s):
            stack.pop(); continue
        m = re.match(r'(\w+)\s*[=:]\s*(.*)$', s)
        if not m:
            raise ValueError(f"line {ln}: cannot read '{s}'")
        name, rest = m.group(1), m.group(2)
        if rest.startswith('"'):
            v = re.match(r'"((?:[^"\\]|\\.)*)"\s*;', rest); val = v.group(1)
        elif rest.startswith('['):
            v = re.match(r'\[(.*?)\]\s*;', rest)
            val = [x for x in re.findall(r'"((?:[^"\\]|\\.)*)"', v.group(1))]
        else:
            v = re.match(r'([^;]+);', rest); val = v.group(1).strip()
        found[".".join(stack + [name])] = (val, ln)
    return found

def norm(kind, val):
    if isinstance(val, list):
        return ",".join(val)
    return val

conf = parse_conf(rd("deploy/ordergate.conf"))
missing = [n for n in table if n not in conf]
check(not missing, "deploy/ordergate.conf names every setting of common/cfg.c", f"missing {missing}")
unknown = [n for n in conf if n not in table]
check(not unknown, "deploy/ordergate.conf names no unknown setting", f"unknown {unknown}")
wrong = [f"{n} = {conf[n][0]!r} (line {conf[n][1]}), default {table[n][1]!r}"
         for n in table if n in conf and norm(table[n][0], conf[n][0]) != table[n][1]]
check(not wrong, "deploy/ordergate.conf shows each setting's default", "; ".join(wrong))
text = rd("deploy/ordergate.conf")
for group in ("database", "kafka", "consumer", "outbox", "scanner"):
    check(re.search(rf'^{group} = \{{', text, re.M) is not None, f"deploy/ordergate.conf has the group {group}")
check(not re.search(r'password\s*=|sasl\.password=\S|PGPASSWORD=\S', text),
      "deploy/ordergate.conf holds no inline password")

# ---- other config files: only known names; extract the ConfigMap's copy for --check-config ----
confs = {"deploy/docker/ordergate.compose.conf": rd("deploy/docker/ordergate.compose.conf")}
cm = [d for d in yaml.safe_load_all(open(os.path.join(repo, "deploy/k8s/configmap.yaml")))
      if d.get("kind") == "ConfigMap"]
if check(len(cm) == 1 and "ordergate.conf" in cm[0].get("data", {}),
         "deploy/k8s/configmap.yaml carries ordergate.conf"):
    confs["deploy/k8s/configmap.yaml#ordergate.conf"] = cm[0]["data"]["ordergate.conf"]
    with open(os.path.join(tmp, "configmap-ordergate.conf"), "w") as fh:
        fh.write(cm[0]["data"]["ordergate.conf"])
for name, body in confs.items():
    try:
        names = parse_conf(body)
        unk = [n for n in names if n not in table]
        check(not unk, f"{name}: only known settings", f"unknown {unk}")
        check("database.password_file" not in names or names["database.password_file"][0].startswith("/"),
              f"{name}: password from a file, not inline")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: readable", str(e))

# ---- docs: anchors and the metrics table ----
docs = rd("docs/operations.md")
def slug(h):
    h = h.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')
anchors = {slug(m.group(1)) for m in re.finditer(r'^#{1,6}\s+(.*)$', docs, re.M)}
documented = set(re.findall(r'^\|\s*`(ordergate_[a-z0-9_]+)', docs, re.M))
check(len(documented) >= 15, f"docs/operations.md: metrics table read ({len(documented)} metrics)")
for m in re.finditer(r'\]\(#([^)]+)\)', docs):
    check(m.group(1) in anchors, f"docs/operations.md: internal link #{m.group(1)} resolves")

def metric_names(expr):
    names = set()
    for n in re.findall(r'\b(ordergate_[a-z0-9_]+)', expr):
        names.add(re.sub(r'_(bucket|sum|count)$', '', n) if re.sub(r'_(bucket|sum|count)$', '', n) in documented else n)
    return names

# ---- alert rules ----
rules = yaml.safe_load(open(os.path.join(repo, "deploy/prometheus/alerts.yaml")))
alerts = {}
for g in rules.get("groups", []):
    for r in g.get("rules", []):
        if "alert" in r:
            alerts[r["alert"]] = r
for name, r in alerts.items():
    ann, lab = r.get("annotations", {}), r.get("labels", {})
    url = ann.get("runbook_url", "")
    problems = []
    if lab.get("severity") not in ("critical", "warning"): problems.append("severity")
    if not ann.get("summary") or not ann.get("description"): problems.append("summary/description")
    if url != f"docs/operations.md#{name.lower()}": problems.append(f"runbook_url {url!r}")
    elif name.lower() not in anchors: problems.append(f"no heading '### {name}' in docs/operations.md")
    undoc = sorted(metric_names(r["expr"]) - documented)
    if undoc: problems.append(f"undocumented metrics {undoc}")
    check(not problems, f"alert {name}: severity, summary, runbook anchor, documented metrics", ", ".join(problems))
needed = {"scanner found missed orders": "ordergate_scanner_missed_orders",
          "due-but-not-fired growing": "ordergate_consumer_due_not_fired",
          "open exceptions": "ordergate_exceptions_open",
          "outbox backlog": "ordergate_relay_outbox_backlog",
          "dead letters": "ordergate_consumer_dead_lettered_total",
          "consumer down": 'up{job="ordergate-consumer"}',
          "scanner not run recently": "ordergate_scanner_last_run_timestamp_seconds",
          "reconcile violations": "ordergate_reconcile_violations"}
for what, needle in needed.items():
    check(any(needle in r["expr"] for r in alerts.values()), f"alerts cover: {what}")

# ---- Grafana dashboard ----
dash = json.load(open(os.path.join(repo, "deploy/grafana/ordergate.json")))
panels = dash.get("panels", [])
ids = [p.get("id") for p in panels]
check(len(ids) == len(set(ids)) and None not in ids, "dashboard: unique panel ids")
exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
check(len(exprs) >= 10, f"dashboard: {len(exprs)} queries")
undoc = sorted(set().union(*(metric_names(e) for e in exprs)) - documented)
check(not undoc, "dashboard: every metric is documented", f"{undoc}")
ds = {json.dumps(p.get("datasource")) for p in panels if p.get("type") != "row"}
check(ds == {json.dumps({"type": "prometheus", "uid": "${datasource}"})}, "dashboard: panels use the ${datasource} variable")
check(any(v.get("name") == "datasource" and v.get("type") == "datasource"
          for v in dash.get("templating", {}).get("list", [])), "dashboard: datasource variable defined")

# ---- Kubernetes ----
kdir = os.path.join(repo, "deploy/k8s")
kfiles = sorted(f for f in os.listdir(kdir) if f.endswith(".yaml") and f != "kustomization.yaml")
kust = yaml.safe_load(open(os.path.join(kdir, "kustomization.yaml")))
check(sorted(kust.get("resources", [])) == kfiles, "k8s: kustomization lists every manifest",
      f"{sorted(kust.get('resources', []))} vs {kfiles}")
objs = []
for f in kfiles:
    for d in yaml.safe_load_all(open(os.path.join(kdir, f))):
        objs.append((f, d))
check(all("namespace" not in d.get("metadata", {}) for _, d in objs), "k8s: namespace-free")
by_kind = {}
for f, d in objs:
    by_kind.setdefault(d["kind"], []).append(d)
cms = {d["metadata"]["name"]: d for d in by_kind.get("ConfigMap", [])}
secrets = {d["metadata"]["name"]: d for d in by_kind.get("Secret", [])}
def pod_specs():
    for d in by_kind.get("Deployment", []) + by_kind.get("Job", []):
        yield d["metadata"]["name"], d["spec"]["template"]["spec"], d
    for d in by_kind.get("CronJob", []):
        yield d["metadata"]["name"], d["spec"]["jobTemplate"]["spec"]["template"]["spec"], d
for name, spec, _ in pod_specs():
    probs = []
    if not spec.get("securityContext", {}).get("runAsNonRoot"): probs.append("runAsNonRoot")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc = c.get("securityContext", {})
        if not sc.get("readOnlyRootFilesystem") or sc.get("allowPrivilegeEscalation") is not False:
            probs.append(f"{c['name']}: securityContext")
        if "memory" not in c.get("resources", {}).get("limits", {}):
            probs.append(f"{c['name']}: memory limit")
        mounts = {m["name"] for m in c.get("volumeMounts", [])}
        vols = {v["name"] for v in spec.get("volumes", [])}
        if mounts - vols: probs.append(f"{c['name']}: mounts {sorted(mounts - vols)} without volumes")
    for v in spec.get("volumes", []):
        if "configMap" in v and v["configMap"]["name"] not in cms:
            probs.append(f"ConfigMap {v['configMap']['name']} missing")
        if "secret" in v:
            s = secrets.get(v["secret"]["secretName"])
            keys = set((s or {}).get("stringData", {})) | set((s or {}).get("data", {}))
            for it in v["secret"].get("items", []):
                if it["key"] not in keys: probs.append(f"Secret key {it['key']} missing")
    check(not probs, f"k8s {name}: non-root, read-only, limits, volumes resolve", ", ".join(probs))
for d in by_kind.get("Deployment", []):
    sel = d["spec"]["selector"]["matchLabels"]
    tl = d["spec"]["template"]["metadata"]["labels"]
    check(all(tl.get(k) == v for k, v in sel.items()), f"k8s Deployment {d['metadata']['name']}: selector matches its pods")
    c = d["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"] for p in c.get("ports", [])}
    check(c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz"
          and c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz"
          and c["livenessProbe"]["httpGet"]["port"] in ports,
          f"k8s Deployment {d['metadata']['name']}: /healthz liveness, /readyz readiness on a declared port")
    check("preStop" in c.get("lifecycle", {}) and d["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 0) >= 30,
          f"k8s Deployment {d['metadata']['name']}: preStop and a termination grace period")
    for other in by_kind.get("PodDisruptionBudget", []) + by_kind.get("Service", []):
        osel = other["spec"]["selector"]
        osel = osel.get("matchLabels", osel)
        check(all(tl.get(k) == v for k, v in osel.items()),
              f"k8s {other['kind']} {other['metadata']['name']}: selector matches the consumer pods")
for d in by_kind.get("CronJob", []):
    s = d["spec"]
    check(s.get("concurrencyPolicy") == "Forbid" and isinstance(s.get("startingDeadlineSeconds"), int),
          f"k8s CronJob {d['metadata']['name']}: concurrencyPolicy Forbid, startingDeadlineSeconds")
sched = {d["metadata"]["name"]: d["spec"]["schedule"] for d in by_kind.get("CronJob", [])}
check(sched.get("ordergate-scanner") == "* * * * *", "k8s: scanner CronJob every minute")
check(re.match(r'^\d+ \d+ \* \* \*$', sched.get("ordergate-reconcile", "")) is not None, "k8s: reconcile CronJob daily")
check(any("migrate" in c.get("args", []) for d in by_kind.get("Job", [])
          for c in d["spec"]["template"]["spec"]["containers"]), "k8s: migrate Job runs ordergatectl migrate")

# ---- Compose ----
cdir = os.path.join(repo, "deploy/docker")
comp = yaml.safe_load(open(os.path.join(cdir, "compose.yaml")))
svcs = comp.get("services", {})
probs = []
for n, s in svcs.items():
    for dep in (s.get("depends_on") or {}):
        if dep not in svcs: probs.append(f"{n} depends on unknown {dep}")
    for sec in s.get("secrets", []):
        sec = sec if isinstance(sec, str) else sec.get("source")
        if sec not in comp.get("secrets", {}): probs.append(f"{n} uses undefined secret {sec}")
    for v in s.get("volumes", []):
        src = v.split(":")[0] if isinstance(v, str) else v.get("source", "")
        if src.startswith(".") and not os.path.exists(os.path.join(cdir, src)):
            probs.append(f"{n} mounts missing {src}")
        elif not src.startswith(("/", ".")) and src not in (comp.get("volumes") or {}):
            probs.append(f"{n} uses undefined volume {src}")
    b = s.get("build")
    if b and not os.path.exists(os.path.join(cdir, b["context"], b["dockerfile"])):
        probs.append(f"{n}: build {b} not found")
check(not probs, "compose: dependencies, secrets, volumes and build paths resolve", "; ".join(probs))
cmds = {n: " ".join(map(str, s.get("command") or [])) for n, s in svcs.items()}
consumers = [n for n, c in cmds.items() if c.startswith("ordergate-consumer")]
check(len(consumers) >= 2, f"compose: two consumers ({consumers})")
check(any(c.startswith("ordergate-scanner") and "--every 60" in c for c in cmds.values()), "compose: scanner with --every 60")
check(any("migrate" in c and "ordergatectl" in c for c in cmds.values()), "compose: one-shot ordergatectl migrate")
kafka = [s for s in svcs.values() if str(s.get("image", "")).startswith("apache/kafka")
         and "controller" in str((s.get("environment") or {}).get("KAFKA_PROCESS_ROLES", ""))]
check(len(kafka) == 1, "compose: Kafka in KRaft mode from apache/kafka")
check(any(str(s.get("image")) == "postgres:15" for s in svcs.values()), "compose: postgres:15")
check(all("healthcheck" in svcs[n] for n in consumers), "compose: consumers have a health check")

# ---- Dockerfile ----
df = rd("deploy/docker/Dockerfile")
stages = re.findall(r'^FROM\s+(\S+)(?:\s+AS\s+(\S+))?', df, re.M | re.I)
check(len(stages) >= 2, f"Dockerfile: multi-stage ({len(stages)} stages)")
check("debian:bookworm" in df, "Dockerfile: Debian bookworm")
users = re.findall(r'^USER\s+(\S+)', df, re.M)
check(bool(users) and not users[-1].startswith(("0", "root")), f"Dockerfile: runs as non-root ({users[-1] if users else 'no USER'})")
probs = []
for m in re.finditer(r'^COPY\s+(?!--from)(.+)$', df, re.M):
    for src in m.group(1).split()[:-1]:
        if not src.startswith("--") and not os.path.exists(os.path.join(repo, src)):
            probs.append(src)
check(not probs, "Dockerfile: every COPY source exists", f"missing {probs}")
installs = re.findall(r'apt-get install[^\n]*((?:\\\n[^\n]*)+)', df)
runtime = installs[-1] if installs else ""
pk = set(re.findall(r'\b([a-z0-9][a-z0-9.+-]+)\b', runtime))
need = {"librdkafka1", "libpq5", "libconfig9", "libjansson4", "libmicrohttpd12"}
check(need <= pk and not any(p.endswith("-dev") for p in pk), "Dockerfile: runtime stage has the runtime libraries and no -dev package", f"{sorted(need - pk)}")
with open(os.path.join(tmp, "packages"), "w") as fh:
    for inst in installs:
        for p in re.findall(r'(?<![-\w])([a-z0-9][a-z0-9.+]*(?:-[a-z0-9.+]+)*)', inst.replace("\\\n", " ")):
            if p not in ("y", "no", "install", "recommends", "rm", "rf", "var", "lib", "apt", "lists") and not p.startswith("-"):
                fh.write(p + "\n")
with open(os.path.join(tmp, "runtime-packages"), "w") as fh:
    fh.write("\n".join(sorted(pk)) + "\n")

# ---- systemd (what systemd-analyze cannot judge) ----
sd = os.path.join(repo, "deploy/systemd")
def unit(n): return open(os.path.join(sd, n)).read()
c = unit("ordergate-consumer.service")
check("Type=notify" in c and re.search(r'^WatchdogSec=\d+', c, re.M) and "EnvironmentFile=" in c
      and "NoNewPrivileges=yes" in c and "ProtectSystem=strict" in c,
      "systemd: consumer is Type=notify with WatchdogSec, EnvironmentFile and hardening")
t = unit("ordergate-scanner.timer")
check("OnCalendar=minutely" in t and "Persistent=true" in t and "RandomizedDelaySec=" in t,
      "systemd: scanner timer every minute, Persistent, RandomizedDelaySec")
check("Type=oneshot" in unit("ordergate-scanner.service") and "--reconcile" in unit("ordergate-reconcile.service"),
      "systemd: scanner and reconcile are oneshot runs")
PY
while IFS=$'\t' read -r kind msg; do
    case $kind in
        ok) ok "$msg" ;;
        FAIL) bad "$msg" ;;
        skip) skip "$msg" ;;
        *) bad "checks.py: $kind $msg" ;;
    esac
done < <("$PY" "$TMP/checks.py" "$REPO" "$TMP" 2>&1 || echo "FAIL	checks.py stopped with an error (see above)")

# ---------------------------------------------------------------------------------------------
# --check-config through a built binary
# ---------------------------------------------------------------------------------------------
CHECKER=
for b in consumer/ordergate-consumer scanner/ordergate-scanner tools/ordergatectl; do
    if [[ -x $BUILD_DIR/$b ]]; then CHECKER=$BUILD_DIR/$b; break; fi
done
if [[ -z $CHECKER ]]; then
    skip "--check-config: no ordergate binary built in $BUILD_DIR (pass --build-dir)"
else
    [[ $CHECKER == */ordergate-consumer ]] || note "ordergate-consumer is not built; checking with $(basename "$CHECKER") (same config table)"
    for f in "$REPO/deploy/ordergate.conf" "$REPO/deploy/docker/ordergate.compose.conf" "$TMP/configmap-ordergate.conf"; do
        name=${f#"$REPO"/}
        [[ $f == "$TMP"/* ]] && name="deploy/k8s/configmap.yaml (ordergate.conf)"
        if [[ ! -f $f ]]; then bad "--check-config $name: file missing"; continue; fi
        if run_quiet "$CHECKER" --config "$f" --check-config; then
            ok "--check-config accepts $name ($(basename "$CHECKER"))"
        else
            bad "--check-config refuses $name"
        fi
    done
    # A broken file must be refused with exit 2 and FILE:LINE, or the check above proves nothing.
    printf 'log_level = "info";\nconsumer = {\n    batchsize = 10;\n};\n' >"$TMP/broken.conf"
    "$CHECKER" --config "$TMP/broken.conf" --check-config >"$TMP/broken.out" 2>&1
    rc=$?
    if [[ $rc -eq 2 ]] && grep -q "broken.conf:3" "$TMP/broken.out"; then
        ok "--check-config refuses an unknown setting with exit 2 and FILE:LINE"
    else
        bad "--check-config on a broken file: exit $rc, output: $(head -c 300 "$TMP/broken.out")"
    fi
fi

# ---------------------------------------------------------------------------------------------
# systemd
# ---------------------------------------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
    skip "systemd-analyze not found (Debian: package systemd): units not verified"
else
    SD=$TMP/systemd
    mkdir -p "$SD/bin"
    for b in ordergate-consumer ordergate-scanner ordergatectl; do
        printf '#!/bin/sh\nexit 0\n' >"$SD/bin/$b"
        chmod +x "$SD/bin/$b"
    done
    units=()
    for f in "$REPO"/deploy/systemd/*.service "$REPO"/deploy/systemd/*.timer; do
        sed "s#/usr/local/bin/#$SD/bin/#g" "$f" >"$SD/$(basename "$f")"
        case $f in
            *@.service) units+=("$SD/$(basename "${f%@.service}")@a.service") ;;
            *) units+=("$SD/$(basename "$f")") ;;
        esac
    done
    for u in "${units[@]}"; do
        out=$(cd "$SD" && systemd-analyze verify "$u" 2>&1)
        rc=$?
        if [[ $rc -eq 0 && -z $out ]]; then
            ok "systemd-analyze verify $(basename "$u")"
        else
            bad "systemd-analyze verify $(basename "$u") (exit $rc): $out"
        fi
    done
    for u in ordergate-consumer.service ordergate-scanner.service ordergate-reconcile.service; do
        # Exposure 0..10 is reported; --threshold is the same scale times ten. 2.0 and below is "OK".
        if out=$(systemd-analyze security --offline=true --threshold=20 "$SD/$u" 2>&1); then
            ok "systemd-analyze security $u: $(grep -o 'exposure level[^:]*: [0-9.]* [A-Z]*' <<<"$out" | sed 's/.*: //')"
        elif grep -q 'Overall exposure' <<<"$out"; then
            bad "systemd-analyze security $u: $(grep 'Overall exposure' <<<"$out")"
        else
            skip "systemd-analyze security --offline not supported here: $(tail -n 1 <<<"$out")"
        fi
    done
fi

# ---------------------------------------------------------------------------------------------
# promtool (Debian's prometheus package)
# ---------------------------------------------------------------------------------------------
PROMTOOL=$(command -v promtool || true)
PT_CACHED=$CACHE/promtool/root/usr/bin/promtool
[[ -n $PROMTOOL || ! -x $PT_CACHED ]] || PROMTOOL=$PT_CACHED
if [[ -z $PROMTOOL ]] && may_install && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
    # Download the package and extract promtool only: nothing is installed, no server is set up.
    echo "validate: fetching promtool from Debian's prometheus package into $CACHE/promtool" >&2
    mkdir -p "$CACHE/promtool"
    if (cd "$CACHE/promtool" && rm -f prometheus_*.deb && timeout 300 apt-get download -q prometheus >&2 &&
        rm -rf root && dpkg-deb -x prometheus_*.deb root && rm -f prometheus_*.deb) && [[ -x $PT_CACHED ]]; then
        PROMTOOL=$PT_CACHED
    else
        note "apt-get download prometheus failed (run apt-get update first?)"
    fi
fi
if [[ -z $PROMTOOL ]]; then
    skip "promtool not available (Debian: apt-get install prometheus, or run without --offline): rules not checked by promtool"
else
    note "promtool: $PROMTOOL ($("$PROMTOOL" --version 2>&1 | head -n 1))"
    if run_quiet "$PROMTOOL" check rules "$REPO/deploy/prometheus/alerts.yaml"; then
        ok "promtool check rules deploy/prometheus/alerts.yaml"
    else
        bad "promtool check rules deploy/prometheus/alerts.yaml"
    fi
    if run_quiet bash -c 'cd "$1" && "$2" test rules alerts.test.yaml' _ "$REPO/deploy/prometheus" "$PROMTOOL"; then
        ok "promtool test rules deploy/prometheus/alerts.test.yaml"
    else
        bad "promtool test rules deploy/prometheus/alerts.test.yaml"
    fi
fi

# ---------------------------------------------------------------------------------------------
# Kubernetes: kustomize render, schema validation
# ---------------------------------------------------------------------------------------------
if command -v kubectl >/dev/null; then
    if run_quiet timeout 120 kubectl kustomize "$REPO/deploy/k8s"; then
        ok "kubectl kustomize deploy/k8s renders ($(grep -c '^kind:' "$TMP/run.out") objects)"
    else
        bad "kubectl kustomize deploy/k8s"
    fi
else
    skip "kubectl not found: kustomization not rendered"
fi
KV=$(command -v kubernetes-validate || true)
[[ -n $KV || ! -x $CACHE/validate-venv/bin/kubernetes-validate ]] || KV=$CACHE/validate-venv/bin/kubernetes-validate
if [[ -z $KV ]] && may_install && command -v python3 >/dev/null; then
    echo "validate: installing kubernetes-validate (PyPI) into $CACHE/validate-venv" >&2
    { [[ -x $CACHE/validate-venv/bin/pip ]] || python3 -m venv "$CACHE/validate-venv"; } >&2 &&
        timeout 600 "$CACHE/validate-venv/bin/pip" install -q kubernetes-validate PyYAML >&2 &&
        KV=$CACHE/validate-venv/bin/kubernetes-validate
    [[ -x ${KV:-/nonexistent} ]] || { KV=; note "pip install kubernetes-validate failed"; }
fi
if [[ -z $KV ]]; then
    skip "kubernetes-validate not available (pip install kubernetes-validate): manifests not checked against the API schemas"
else
    mapfile -t KFILES < <(find "$REPO/deploy/k8s" -name '*.yaml' ! -name kustomization.yaml | sort)
    if run_quiet "$KV" --strict --quiet "${KFILES[@]}"; then
        ok "kubernetes-validate --strict: ${#KFILES[@]} manifests match the API schemas ($("$KV" --version 2>&1 | tail -n 1))"
    else
        bad "kubernetes-validate --strict deploy/k8s"
    fi
fi

# ---------------------------------------------------------------------------------------------
# Compose and the image
# ---------------------------------------------------------------------------------------------
if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
    mkdir -p "$TMP/compose/secrets"
    cp "$REPO/deploy/docker/compose.yaml" "$REPO/deploy/docker/ordergate.compose.conf" "$TMP/compose/"
    : >"$TMP/compose/secrets/postgres_password"
    : >"$TMP/compose/secrets/ordergate_app_password"
    sed -i "s#context: \.\./\.\.#context: $REPO#" "$TMP/compose/compose.yaml"
    if run_quiet docker compose -f "$TMP/compose/compose.yaml" config -q; then
        ok "docker compose config deploy/docker/compose.yaml"
    else
        bad "docker compose config deploy/docker/compose.yaml"
    fi
else
    skip "docker compose plugin not available: compose.yaml checked by the structure checks only"
fi

if command -v apt-cache >/dev/null && [[ -n $(apt-cache policy librdkafka1 2>/dev/null | grep -m1 'Candidate: [0-9]') ]]; then
    missing=()
    while read -r p; do
        [[ -n $p ]] || continue
        # No `| grep -q`: under pipefail, apt-cache's SIGPIPE would count as "missing".
        [[ $(apt-cache policy "$p" </dev/null 2>/dev/null) == *"Candidate: "[0-9]* ]] || missing+=("$p")
    done < <(sort -u "$TMP/packages")
    if ((${#missing[@]} == 0)); then
        ok "Dockerfile: all $(sort -u "$TMP/packages" | wc -l) packages exist in this machine's Debian archive ($(. /etc/os-release && echo "$VERSION_CODENAME"))"
    else
        bad "Dockerfile: packages not in this Debian archive: ${missing[*]}"
    fi
else
    skip "apt-cache has no package lists (apt-get update): Dockerfile package names not checked"
fi

# The runtime stage must carry every shared library the binaries link directly (their NEEDED
# entries; what those need in turn comes with the packages' own dependencies): map each to its
# Debian package, which must be one the runtime stage installs, or libc6/libgcc-s1.
built=()
for b in consumer/ordergate-consumer scanner/ordergate-scanner tools/ordergatectl; do
    [[ -x $BUILD_DIR/$b ]] && built+=("$BUILD_DIR/$b")
done
if ((${#built[@]} == 0)) || ! command -v dpkg >/dev/null || ! command -v ldd >/dev/null ||
    ! command -v objdump >/dev/null; then
    skip "runtime libraries: no built binary in $BUILD_DIR (or no dpkg, ldd, objdump)"
else
    probs=()
    for b in "${built[@]}"; do
        ldd "$b" </dev/null | awk '$2 == "=>" {print $1, $3}' >"$TMP/ldd"
        while read -r lib; do
            path=$(awk -v l="$lib" '$1 == l {print $2}' "$TMP/ldd")
            [[ $path == /* ]] || { probs+=("$(basename "$b"): $lib not found"); continue; }
            pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
            [[ -n $pkg ]] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
            case $pkg in
                libc6 | libgcc-s1) ;;
                *) grep -qx "$pkg" "$TMP/runtime-packages" || probs+=("$(basename "$b"): $lib from ${pkg:-?}") ;;
            esac
        done < <(objdump -p "$b" | awk '$1 == "NEEDED" {print $2}')
    done
    if ((${#probs[@]} == 0)); then
        ok "runtime libraries: ${#built[@]} built binaries need only packages of the runtime stage"
    else
        bad "runtime libraries missing from the Dockerfile's runtime stage: ${probs[*]}"
    fi
fi

echo "validate: $PASS passed, $FAIL failed, $SKIP skipped"
((FAIL == 0))
