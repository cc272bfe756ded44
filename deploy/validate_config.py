#!/usr/bin/env python3
"""Structure and consistency checks of ordergate's deployment files, run by deploy/validate.sh.

Usage: validate_config.py REPO TMP [SETTINGS]
  REPO      the repository's root
  TMP       a scratch directory; the Kubernetes ConfigMap's ordergate.conf is written there as
            configmap-ordergate.conf, for validate.sh to pass to --check-config
  SETTINGS  the output of `ordergate-consumer --list-settings` (or the scanner's): the settings
            table as the binary has it. Without it the checks against the table are skipped.

Prints one line per check, "ok|FAIL|skip<TAB>message"; validate.sh counts them. Needs PyYAML.
"""
import json, os, re, sys
import yaml

repo, tmp = sys.argv[1], sys.argv[2]
settings_path = sys.argv[3] if len(sys.argv) > 3 else ""
def out(kind, msg): print(f"{kind}\t{msg}")
def check(cond, msg, detail=""):
    out("ok" if cond else "FAIL", msg + ("" if cond or not detail else f": {detail}"))
    return cond
def rd(p): return open(os.path.join(repo, p)).read()

# ---- the settings table, as a built binary lists it (--list-settings) ----
# One line per setting: name, flag, type, default, bounds (tab-separated). Without a built
# binary there is no table to compare with: those checks are reported as skipped.
table = {}
if settings_path:
    for line in open(settings_path).read().splitlines():
        name, flag, kind, default, bounds = line.split("\t")
        table[name] = (kind, default)
    check(len(table) >= 20, f"settings table read from the binary ({len(table)} settings)")
else:
    out("skip", "settings table: no ordergate-consumer or ordergate-scanner built (pass --build-dir)")

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
if table:
    missing = [n for n in table if n not in conf]
    check(not missing, "deploy/ordergate.conf names every setting of the table", f"missing {missing}")
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
confs = {"deploy/docker/ordergate.compose.conf": rd("deploy/docker/ordergate.compose.conf"),
         "deploy/docker/ordergate.compose-tls.conf": rd("deploy/docker/ordergate.compose-tls.conf")}
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
        if table:
            unk = [n for n in names if n not in table]
            check(not unk, f"{name}: only known settings", f"unknown {unk}")
        check("database.password_file" not in names or names["database.password_file"][0].startswith("/"),
              f"{name}: password from a file, not inline")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: readable", str(e))

# ---- docs: anchors and the metrics table ----
# docs/alerts.md holds the metrics table and a section per alert (the runbook_url anchors); every
# link between the operator pages of docs/ that names a section must find it.
def slug(h):
    h = h.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')
def headings(text):
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r'^#{1,6}\s+(.*)$', text, re.M)}
docs = rd("docs/alerts.md")
anchors = headings(docs)
documented = set(re.findall(r'^\|\s*`(ordergate_[a-z0-9_]+)', docs, re.M))
check(len(documented) >= 15, f"docs/alerts.md: metrics table read ({len(documented)} metrics)")
doc_dir = os.path.join(repo, "docs")
pages = sorted(f for f in os.listdir(doc_dir) if f.endswith(".md"))
page_anchors = {f: headings(rd(os.path.join("docs", f))) for f in pages}
for f in pages:
    links = {(m.group(1) or f, m.group(2))
             for m in re.finditer(r'\]\(([\w.-]*\.md)?#([^)\s]+)\)', rd(os.path.join("docs", f)))}
    broken = sorted(f"{t}#{a}" for t, a in links if t in page_anchors and a not in page_anchors[t])
    check(not broken, f"docs/{f}: its {len(links)} links to sections resolve", f"broken {broken}")

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
    if url != f"docs/alerts.md#{name.lower()}": problems.append(f"runbook_url {url!r}")
    elif name.lower() not in anchors: problems.append(f"no heading '### {name}' in docs/alerts.md")
    undoc = sorted(metric_names(r["expr"]) - documented)
    if undoc: problems.append(f"undocumented metrics {undoc}")
    check(not problems, f"alert {name}: severity, summary, runbook anchor, documented metrics", ", ".join(problems))
needed = {"scanner found missed orders": "ordergate_scanner_missed_orders",
          "due-but-not-fired growing": "ordergate_consumer_due_not_fired",
          "unconfirmed refunds": "ordergate_refunds_unconfirmed_overdue",
          "overdue reviews": "ordergate_reviews_overdue",
          "outbox backlog": "ordergate_relay_outbox_backlog",
          "dead letters": "ordergate_consumer_dead_lettered_total",
          "consumer down (a target known by its metrics)": "ordergate:consumer_target:known",
          "no consumer metrics at all": "absent(ordergate_consumer_",
          "scanner not run recently": "ordergate_scanner_last_run_timestamp_seconds",
          "no scanner metrics at all": "absent(ordergate_scanner_",
          "reconcile violations": "ordergate_reconcile_violations",
          "reconcile failing": "ordergate_reconcile_last_run_success",
          "no reconcile metrics at all": "absent(ordergate_reconcile_"}
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
# *.example.yaml files show objects made out of band (the Secret): never in the kustomization.
kall = sorted(f for f in os.listdir(kdir) if f.endswith(".yaml") and f != "kustomization.yaml")
kfiles = [f for f in kall if not f.endswith(".example.yaml")]
kexamples = [f for f in kall if f.endswith(".example.yaml")]
kust = yaml.safe_load(open(os.path.join(kdir, "kustomization.yaml")))
check(sorted(kust.get("resources", [])) == kfiles, "k8s: kustomization lists every manifest but the examples",
      f"{sorted(kust.get('resources', []))} vs {kfiles}")
objs = []
for f in kall:
    for d in yaml.safe_load_all(open(os.path.join(kdir, f))):
        objs.append((f, d))
# `kubectl apply -k` must never write a Secret: applied again, a placeholder would replace the
# real passwords.
applied_secrets = [f for f, d in objs if f in kfiles and d.get("kind") == "Secret"]
check(not applied_secrets and not kust.get("secretGenerator"),
      "k8s: the kustomization writes no Secret (the real one is made out of band)",
      f"Secret in {applied_secrets}" if applied_secrets else "secretGenerator present")
ex_secrets = [d for f, d in objs if f in kexamples and d.get("kind") == "Secret"]
check(bool(ex_secrets) and all(d.get("metadata", {}).get("annotations", {}).get("config.kubernetes.io/local-config") == "true"
                                 for d in ex_secrets),
      "k8s: the example Secret exists and is local-config (kustomize never renders it)")
check(all("namespace" not in d.get("metadata", {}) for _, d in objs), "k8s: namespace-free")
by_kind = {}
for f, d in objs:
    by_kind.setdefault(d["kind"], []).append(d)
cms = {d["metadata"]["name"]: d for d in by_kind.get("ConfigMap", [])}
secrets = {d["metadata"]["name"]: d for d in by_kind.get("Secret", [])}
def pod_specs():
    for d in by_kind.get("Deployment", []) + by_kind.get("StatefulSet", []) + by_kind.get("Job", []):
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
# TLS everywhere: every PostgreSQL connection verifies the server (sslmode=verify-full) against a
# CA file a mounted Secret provides; a consumer on a SASL_SSL listener gets its CA and its
# password file from mounted Secrets too.
cm_conf = parse_conf(cms["ordergate-config"]["data"]["ordergate.conf"]) if "ordergate-config" in cms else {}
def secret_files(spec, c):
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    files = set()
    for m in c.get("volumeMounts", []):
        v = vols.get(m["name"], {})
        for it in v.get("secret", {}).get("items", []):
            files.add(m["mountPath"].rstrip("/") + "/" + it["path"])
    return files
for name, spec, _ in pod_specs():
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        args = [str(x) for x in c.get("args", [])]
        if not args or not args[0].startswith("ordergate"):
            continue  # a side container (the metrics push) has no database connection
        conninfos = [args[i + 1] for i, x in enumerate(args[:-1]) if x == "--db"]
        if not conninfos and "database.conninfo" in cm_conf:
            conninfos = [cm_conf["database.conninfo"][0]]
        files = secret_files(spec, c)
        for ci in conninfos:
            kv = dict(x.split("=", 1) for x in ci.split() if "=" in x)
            check(kv.get("sslmode") == "verify-full" and kv.get("sslrootcert") in files,
                  f"k8s {name}: PostgreSQL with sslmode=verify-full and a mounted sslrootcert",
                  f"sslmode={kv.get('sslmode')} sslrootcert={kv.get('sslrootcert')} files={sorted(files)}")
props = dict(x.split("=", 1) for x in cm_conf.get("kafka.properties", ([], 0))[0])
if props.get("security.protocol", "").upper() in ("SASL_SSL", "SSL"):
    for d in by_kind.get("StatefulSet", []):
        spec = d["spec"]["template"]["spec"]
        c = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        files = secret_files(spec, c)
        pw = env.get("ORDERGATE_KAFKA_SASL_PASSWORD_FILE") or cm_conf.get("kafka.sasl_password_file", ("", 0))[0]
        check(props.get("ssl.ca.location") in files and "sasl.password" not in props
              and (not props["security.protocol"].upper().startswith("SASL") or pw in files),
              f"k8s {d['metadata']['name']}: Kafka CA and SASL password are files of mounted Secrets",
              f"ssl.ca.location={props.get('ssl.ca.location')} password file={pw} files={sorted(files)}")
def component(d): return d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
for d in [d for d in by_kind.get("Deployment", []) + by_kind.get("StatefulSet", []) if component(d) != "console"]:
    sel = d["spec"]["selector"]["matchLabels"]
    tl = d["spec"]["template"]["metadata"]["labels"]
    check(all(tl.get(k) == v for k, v in sel.items()), f"k8s {d['kind']} {d['metadata']['name']}: selector matches its pods")
    c = d["spec"]["template"]["spec"]["containers"][0]
    # Probes read the health file (--check-health, --check-ready), never the metrics port: a
    # port any peer can fill must not decide restarts.
    def probe_cmd(kind): return " ".join(map(str, c.get(kind, {}).get("exec", {}).get("command", [])))
    net_probes = [k for k in ("livenessProbe", "readinessProbe", "startupProbe")
                  if any(x in c.get(k, {}) for x in ("httpGet", "tcpSocket", "grpc"))]
    check(probe_cmd("livenessProbe").startswith("ordergate-consumer") and "--check-health" in probe_cmd("livenessProbe")
          and "--check-ready" in probe_cmd("readinessProbe") and "--check-health" in probe_cmd("startupProbe")
          and not net_probes,
          f"k8s {d['kind']} {d['metadata']['name']}: probes are --check-health/--check-ready execs, none on a port",
          f"network probes {net_probes}" if net_probes else "exec commands missing")
    hf = cm_conf.get("consumer.health_file", ("", 0))[0]
    spec = d["spec"]["template"]["spec"]
    empty = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    hdirs = [m["mountPath"].rstrip("/") for m in c.get("volumeMounts", [])
             if m["name"] in empty and not m.get("readOnly")]
    check(hf.startswith("/") and os.path.dirname(hf) in hdirs,
          f"k8s {d['kind']} {d['metadata']['name']}: consumer.health_file lies in a writable emptyDir mount",
          f"health_file={hf!r} emptyDir mounts={hdirs}")
    # Only the scraper may reach the metrics port: a NetworkPolicy selects these pods, admits
    # ingress from named peers only, on the metrics port only.
    mports = {p.get("name") for p in c.get("ports", [])} | {p.get("containerPort") for p in c.get("ports", [])}
    pols = [n for n in by_kind.get("NetworkPolicy", [])
            if all(tl.get(k) == v for k, v in n["spec"].get("podSelector", {}).get("matchLabels", {}).items())
            and n["spec"].get("podSelector", {}).get("matchLabels")]
    probs = []
    if not pols: probs.append("no NetworkPolicy selects the pods")
    for n in pols:
        sp = n["spec"]
        if "Ingress" not in sp.get("policyTypes", []): probs.append(f"{n['metadata']['name']}: not an Ingress policy")
        for r in sp.get("ingress", []):
            peers = r.get("from") or []
            if not peers or any(not (pe.get("podSelector", {}).get("matchLabels") or pe.get("ipBlock")
                                     or pe.get("namespaceSelector", {}).get("matchLabels")) for pe in peers):
                probs.append(f"{n['metadata']['name']}: a rule admits any peer")
            rports = [pp.get("port") for pp in r.get("ports") or []]
            if not rports or any(pp not in mports for pp in rports):
                probs.append(f"{n['metadata']['name']}: a rule admits ports {rports or 'all'}, not only the metrics port")
    check(not probs, f"k8s {d['kind']} {d['metadata']['name']}: a NetworkPolicy admits only named scrapers, only on the metrics port",
          "; ".join(probs))
    check("preStop" in c.get("lifecycle", {}) and d["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 0) >= 30,
          f"k8s {d['kind']} {d['metadata']['name']}: preStop and a termination grace period")
    for other in by_kind.get("PodDisruptionBudget", []) + by_kind.get("Service", []):
        osel = other["spec"]["selector"]
        osel = osel.get("matchLabels", osel)
        if osel.get("app.kubernetes.io/component") == "console":
            continue
        check(all(tl.get(k) == v for k, v in osel.items()),
              f"k8s {other['kind']} {other['metadata']['name']}: selector matches the consumer pods")
# The console: its Service and NetworkPolicy select its pods, the policy admits named peers on its
# port only, its probes ask /healthz on that port (a web server's liveness is answering), and no
# database password reaches it (it logs people in as themselves).
for d in [d for d in by_kind.get("Deployment", []) if component(d) == "console"]:
    tl = d["spec"]["template"]["metadata"]["labels"]
    spec = d["spec"]["template"]["spec"]
    c = spec["containers"][0]
    check(all(tl.get(k) == v for k, v in d["spec"]["selector"]["matchLabels"].items()),
          f"k8s Deployment {d['metadata']['name']}: selector matches its pods")
    ports = {p.get("name") for p in c.get("ports", [])} | {p.get("containerPort") for p in c.get("ports", [])}
    probes = [c.get(k, {}).get("httpGet", {}) for k in ("livenessProbe", "readinessProbe")]
    check(all(p.get("path") == "/healthz" and p.get("port") in ports for p in probes),
          f"k8s Deployment {d['metadata']['name']}: probes ask /healthz on the console's port")
    env = {e["name"] for e in c.get("env", [])}
    keys = {it["key"] for v in spec.get("volumes", []) for it in v.get("secret", {}).get("items", [])}
    whole = [v["name"] for v in spec.get("volumes", []) if "secret" in v and not v["secret"].get("items")]
    check("ORDERGATE_DB_PASSWORD_FILE" not in env and not whole and all("password" not in k for k in keys),
          f"k8s Deployment {d['metadata']['name']}: no database password reaches the console",
          f"env={sorted(env)} secret keys={sorted(keys)} whole secrets={whole}")
    svcs = [v for v in by_kind.get("Service", []) if v["spec"]["selector"].get("app.kubernetes.io/component") == "console"]
    check(svcs and all(all(tl.get(k) == v for k, v in sv["spec"]["selector"].items()) for sv in svcs),
          f"k8s Deployment {d['metadata']['name']}: a Service selects the console pods")
    pols = [n for n in by_kind.get("NetworkPolicy", [])
            if n["spec"].get("podSelector", {}).get("matchLabels")
            and all(tl.get(k) == v for k, v in n["spec"]["podSelector"]["matchLabels"].items())]
    probs = [] if pols else ["no NetworkPolicy selects the console pods"]
    for n in pols:
        for r in n["spec"].get("ingress", []):
            peers = r.get("from") or []
            if not peers or any(not (pe.get("podSelector", {}).get("matchLabels") or pe.get("ipBlock")
                                     or pe.get("namespaceSelector", {}).get("matchLabels")) for pe in peers):
                probs.append(f"{n['metadata']['name']}: a rule admits any peer")
            rports = [pp.get("port") for pp in r.get("ports") or []]
            if not rports or any(pp not in ports for pp in rports):
                probs.append(f"{n['metadata']['name']}: a rule admits ports {rports or 'all'}")
    check(not probs, f"k8s Deployment {d['metadata']['name']}: a NetworkPolicy admits only named peers, only on its port",
          "; ".join(probs))
# Static group membership: the consumer pods have stable names and pass them as instance ids.
for d in by_kind.get("StatefulSet", []):
    c = d["spec"]["template"]["spec"]["containers"][0]
    args = c.get("args", [])
    env = {e["name"]: e for e in c.get("env", [])}
    check("--group-instance-id" in args and args[args.index("--group-instance-id") + 1] == "$(POD_NAME)"
          and env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name",
          f"k8s StatefulSet {d['metadata']['name']}: the pod name is the group instance id")
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
# The health check reads the health file, not the metrics port; the metrics port is published
# on the host's loopback only.
ccfg = parse_conf(rd("deploy/docker/ordergate.compose.conf"))
hf = ccfg.get("consumer.health_file", ("", 0))[0]
probs = []
for n in consumers:
    test = " ".join(map(str, (svcs[n].get("healthcheck") or {}).get("test") or []))
    if "--check-ready" not in test and "--check-health" not in test: probs.append(f"{n}: health check {test!r}")
    if "/dev/tcp" in test or "9464" in test: probs.append(f"{n}: health check uses the metrics port")
    if not any(str(t).split(":")[0] == os.path.dirname(hf) for t in svcs[n].get("tmpfs") or []):
        probs.append(f"{n}: consumer.health_file {hf!r} not on a tmpfs of the service")
    for pub in svcs[n].get("ports") or []:
        if not str(pub).startswith("127.0.0.1:"): probs.append(f"{n}: port {pub} published beyond the host's loopback")
check(not probs, "compose: consumers' health checks read the health file; metrics published on 127.0.0.1 only", "; ".join(probs))

# The SASL_SSL overlay: only services of compose.yaml, its secrets defined, its files present;
# the Kafka password and CA reach the consumers as secret files, never inline.
over = yaml.safe_load(open(os.path.join(cdir, "compose.kafka-tls.yaml")))
osecrets = set(comp.get("secrets", {})) | set(over.get("secrets", {}))
probs = []
for n, s in (over.get("services") or {}).items():
    if n not in svcs: probs.append(f"overlay names unknown service {n}")
    for sec in s.get("secrets", []):
        sec = sec if isinstance(sec, str) else sec.get("source")
        if sec not in osecrets: probs.append(f"{n} uses undefined secret {sec}")
    for v in s.get("volumes", []):
        src = v.split(":")[0] if isinstance(v, str) else v.get("source", "")
        if src.startswith(".") and not os.path.exists(os.path.join(cdir, src)):
            probs.append(f"{n} mounts missing {src}")
check(not probs, "compose.kafka-tls.yaml: services, secrets and files resolve", "; ".join(probs))
tls_conf = parse_conf(rd("deploy/docker/ordergate.compose-tls.conf"))
tprops = dict(x.split("=", 1) for x in tls_conf.get("kafka.properties", ([], 0))[0])
tls_consumers = [n for n in consumers if n in (over.get("services") or {})]
env_ok = all((over["services"][n].get("environment") or {}).get("ORDERGATE_KAFKA_SASL_PASSWORD_FILE")
             == "/run/secrets/kafka_sasl_password" and "kafka_sasl_password" in over["services"][n].get("secrets", [])
             and "kafka_ca" in over["services"][n].get("secrets", []) for n in tls_consumers)
check(tls_consumers == consumers and env_ok and tprops.get("security.protocol") == "SASL_SSL"
      and tprops.get("ssl.ca.location") == "/run/secrets/kafka_ca" and "sasl.password" not in tprops,
      "compose.kafka-tls.yaml: every consumer on SASL_SSL, CA and password from secret files")

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
