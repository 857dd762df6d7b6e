#!/bin/sh
# report_check.sh [DIR | PAGE.html]: render a report (DIR/report.html by
# default) in headless Chromium and fail on what a reader would see broken:
#   - an image that did not load (naturalWidth 0),
#   - a relative link whose file does not exist beside the page,
#   - an in-page link (#name) with no element of that id or name,
#   - a JavaScript error or any console error (the browser's log).
# Prints each problem and exits 1; 0 with a one-line summary when clean;
# 2 for a usage error or when Chromium cannot be had.
#
# Chromium is driven through chromedriver's WebDriver HTTP interface
# (python3's standard library speaks it: no npm). Debian's packages:
# `apt-get install -y chromium chromium-driver` (/usr/bin/chromium,
# /usr/bin/chromedriver); installed by scripts/install-deps.sh --browser
# when missing and root or sudo is available. CHROMIUM and CHROMEDRIVER
# name other binaries.
set -u
target=${1:-}
if [ -z "$target" ] || [ $# -gt 1 ]; then
	echo "usage: scripts/report_check.sh DIR|PAGE.html   (DIR holds report.html)" >&2
	exit 2
fi
if [ -d "$target" ]; then
	page=$target/report.html
else
	page=$target
fi
if [ ! -f "$page" ]; then
	echo "report-check: $page: no such page (make it with gpumemsim report --db F -o DIR)" >&2
	exit 2
fi
chromium=${CHROMIUM:-/usr/bin/chromium}
driver=${CHROMEDRIVER:-/usr/bin/chromedriver}

if [ ! -x "$chromium" ] || [ ! -x "$driver" ]; then
	# one place installs packages: install-deps.sh (root or sudo)
	if ! "$(dirname "$0")/install-deps.sh" --browser >&2 || [ ! -x "$chromium" ] || [ ! -x "$driver" ]; then
		echo "report-check: $chromium or $driver is missing and could not be installed:" \
			"apt-get install -y chromium chromium-driver (or scripts/install-deps.sh --browser)" >&2
		exit 2
	fi
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "report-check: python3 is needed to drive chromedriver" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/report-check.XXXXXX") || exit 2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$driver" --port="$port" >"$tmp/chromedriver.log" 2>&1 &
dpid=$!
# stop the chromedriver started here (and with it any browser it runs)
cleanup() {
	kill "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

python3 - "$port" "$page" "$chromium" "$tmp/profile" <<'EOF'
import json, os, sys, time, urllib.error, urllib.parse, urllib.request

port, page, chromium, profile = sys.argv[1:5]
base = "http://127.0.0.1:%s" % port
page = os.path.abspath(page)
folder = os.path.dirname(page)


def call(method, path, body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode() or "{}").get("value")
    except urllib.error.HTTPError as e:
        msg = e.read().decode(errors="replace")
        raise RuntimeError("%s %s: HTTP %d: %s" % (method, path, e.code, msg[:400]))


for _ in range(100):
    try:
        if call("GET", "/status", timeout=2).get("ready"):
            break
    except Exception:
        pass
    time.sleep(0.1)
else:
    print("report-check: chromedriver did not start (see its log)", file=sys.stderr)
    sys.exit(2)

caps = {"capabilities": {"alwaysMatch": {
    "browserName": "chrome",
    "goog:chromeOptions": {"binary": chromium, "args": [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--allow-file-access-from-files", "--user-data-dir=" + profile,
        "--window-size=1400,1000"]},
    "goog:loggingPrefs": {"browser": "ALL"}}}}
try:
    sess = call("POST", "/session", caps)["sessionId"]
except Exception as e:
    print("report-check: cannot start Chromium: %s" % e, file=sys.stderr)
    sys.exit(2)
S = "/session/" + sess
problems = []
try:
    call("POST", S + "/timeouts", {"script": 300000, "pageLoad": 300000, "implicit": 0})
    call("POST", S + "/url", {"url": "file://" + urllib.parse.quote(page)})
    # every image settled (loaded or failed), then what is broken
    script = r"""
const done = arguments[arguments.length - 1];
const imgs = Array.from(document.images);
Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
  i.addEventListener('load', r); i.addEventListener('error', r); }))).then(() => {
  const bad = [], rel = [];
  imgs.forEach((im, k) => {
    if (!im.complete || im.naturalWidth === 0)
      bad.push('image ' + (k + 1) + ' did not load: ' +
               (im.alt || im.getAttribute('src') || '').slice(0, 120));
  });
  const links = Array.from(document.querySelectorAll('a[href]'));
  links.forEach(a => {
    const h = a.getAttribute('href');
    if (h.startsWith('#')) {
      const id = decodeURIComponent(h.slice(1));
      if (!id || (!document.getElementById(id) && document.getElementsByName(id).length === 0))
        bad.push('in-page link ' + h + ' has no target');
    } else if (!/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(h) && !h.startsWith('//')) {
      rel.push(h);
    }
  });
  done({bad: bad, rel: rel, images: imgs.length, links: links.length,
        title: document.title});
});
"""
    res = call("POST", S + "/execute/async", {"script": script, "args": []})
    problems += res["bad"]
    for h in res["rel"]:
        target = urllib.parse.unquote(h.split("#", 1)[0].split("?", 1)[0])
        if target and not os.path.exists(os.path.join(folder, target)):
            problems.append("link %s: no such file beside the page" % h)
    log = None
    for path in (S + "/se/log", S + "/log"):
        try:
            log = call("POST", path, {"type": "browser"})
            break
        except Exception:
            continue
    if log is None:
        problems.append("cannot read the browser's log (JavaScript errors unchecked)")
    for entry in log or []:
        if entry.get("level") == "SEVERE":
            problems.append("console error: %s" % entry.get("message", "")[:300])
finally:
    try:
        call("DELETE", S, timeout=30)
    except Exception:
        pass

if problems:
    for p in problems:
        print("report-check: %s: %s" % (page, p), file=sys.stderr)
    print("report-check: FAILED: %d problem(s)" % len(problems), file=sys.stderr)
    sys.exit(1)
print("report-check: OK: %s: %d images loaded, %d links resolved, no JavaScript or console "
      "error" % (page, res["images"], res["links"]))
EOF
