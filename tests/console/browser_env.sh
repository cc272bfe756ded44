#!/usr/bin/env bash
# The browser test's Python environment: a virtualenv at DIR (on Debian's python3, with its
# site packages, for psycopg2) holding Selenium and its dependencies at the exact versions of
# requirements.txt, installed with pip from the package index pip is configured with. Does
# nothing when DIR already has them. Chromium and its driver are Debian's (tests/run.sh installs
# chromium and chromium-driver).
#
#   tests/console/browser_env.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: browser_env.sh DIR}
py=/usr/bin/python3
stamp="$dir/.requirements"
if [ -x "$dir/bin/python" ] && cmp -s "$here/requirements.txt" "$stamp" &&
    "$dir/bin/python" -c 'import selenium, psycopg2' 2>/dev/null; then
    echo "browser_env: $dir is ready"
    exit 0
fi
"$py" -m venv --system-site-packages "$dir" ||
    { echo "browser_env: $py -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r "$here/requirements.txt" ||
    { echo "browser_env: pip could not install tests/console/requirements.txt" >&2; exit 1; }
"$dir/bin/python" -c 'import selenium, psycopg2' ||
    { echo "browser_env: selenium or psycopg2 missing in $dir" >&2; exit 1; }
cp "$here/requirements.txt" "$stamp"
echo "browser_env: $dir ready (selenium $("$dir/bin/python" -c 'import selenium; print(selenium.__version__)'))"
