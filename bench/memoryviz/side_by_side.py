#!/usr/bin/env python3
"""Launch -> rendered, side by side: PyTorch's MemoryViz (the page behind pytorch.org/memory_viz)
in headless Chromium, loading the snapshot through its own file input (or, in newer MemoryViz.js
revisions that have none, a drop of the file on the page, as a user drags it there), against fraglab-gui's
headless screenshot of the same snapshot (recorded lane, active memory view, cursor at the peak).

  bench/memoryviz/side_by_side.py SNAPSHOT.pickle --memoryviz path/to/MemoryViz.js \
      --d3 path/to/d3@5/dist/d3.min.js [--gui build/gui/fraglab-gui] [--runs 3]

MemoryViz.js comes from a PyTorch install (torch/utils/viz/MemoryViz.js); its d3 imports
(skypack URLs, or bare "d3" names in vendored copies) are pointed at a local d3 v5 UMD build
(`npm install d3@5`), so the page works offline; nothing else of it changes. MemoryViz reads
uncompressed pickles only, so pass the .pickle (fraglab-gui reads it too).

MemoryViz counts as rendered when its Active Memory Timeline (the default view) has drawn its
polygons and two animation frames have passed; fraglab-gui when its screenshot is written
(it draws once, when every view it shows is ready). Memory: the largest Chromium renderer's RSS
and all Chromium processes' RSS at that moment; fraglab-gui's peak RSS (/usr/bin/time).
"""
import argparse
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>MemoryViz</title></head><body>
<script src="d3.min.js"></script>
<script type="module">
import "./MemoryViz.js";
const blob = await (await fetch("snapshot.pickle")).blob();
const files = new DataTransfer();
files.items.add(new File([blob], "%(name)s"));
// Older MemoryViz pages load through a file input, newer ones only through a drop on the page.
const input = document.querySelector("input[type=file]");
if (input) {
  input.files = files.files;
  input.dispatchEvent(new Event("change"));
} else {
  document.body.dispatchEvent(new DragEvent("drop", {dataTransfer: files, bubbles: true, cancelable: true}));
}
const poll = setInterval(() => {
  const n = document.querySelectorAll("svg polygon").length;
  if (n === 0) return;
  clearInterval(poll);
  requestAnimationFrame(() => requestAnimationFrame(() => console.log("MEMORYVIZ_RENDERED " + n)));
}, 20);
</script></body></html>
"""


def patch_imports(code):
    """MemoryViz imports d3 modules from a CDN (or by bare name); take them from window.d3."""
    code = re.sub(r'import \* as d3 from "[^"]*";', "const d3 = window.d3;", code)
    code = re.sub(r'import \{([^}]*)\} from "[^"]*d3[^"]*";', r"const {\1} = window.d3;", code)
    if re.search(r"^import ", code, re.M):
        raise SystemExit("MemoryViz.js: an import left unpatched")
    return code


def serve(directory):
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=directory, **k)  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def rss_kib(pids):
    total = 0
    largest = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        kib = int(line.split()[1])
                        total += kib
                        largest = max(largest, kib)
        except OSError:
            pass
    return largest, total


def descendants(root):
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout.split("\n")
    children = {}
    for line in out:
        if line.strip():
            pid, ppid = map(int, line.split())
            children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def run_memoryviz(chromium, url, timeout):
    profile = tempfile.mkdtemp(prefix="mv-profile-")
    t0 = time.monotonic()
    proc = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                             "--v=0", f"--user-data-dir={profile}", "--window-size=1400,860", url],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, errors="replace")
    result = None
    deadline = t0 + timeout
    for line in proc.stderr:
        if "MEMORYVIZ_RENDERED" in line:
            elapsed = time.monotonic() - t0
            renderer, total = rss_kib(descendants(proc.pid))
            result = (elapsed, renderer, total, re.search(r"MEMORYVIZ_RENDERED (\d+)", line).group(1))
            break
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.wait()
    shutil.rmtree(profile, ignore_errors=True)
    return result


def run_fraglab(gui, snapshot, out):
    cmd = ["/usr/bin/time", "-f", "FRAGLAB_RSS %M", "xvfb-run", "-a", "-s", "-screen 0 1920x1200x24", gui, snapshot,
           "--policy", "recorded", "--view", "memory", "--at", "peak", "--width", "1400", "--height", "860",
           "--screenshot", out]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit("fraglab-gui failed: " + done.stderr)
    rss = int(re.search(r"FRAGLAB_RSS (\d+)", done.stderr).group(1))
    return elapsed, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshot")
    ap.add_argument("--memoryviz", required=True, help="torch/utils/viz/MemoryViz.js")
    ap.add_argument("--d3", required=True, help="d3 v5 dist/d3.min.js")
    ap.add_argument("--gui", default="build/gui/fraglab-gui")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--skip-memoryviz", action="store_true")
    a = ap.parse_args()

    site = tempfile.mkdtemp(prefix="mv-site-")
    with open(a.memoryviz) as f:
        code = patch_imports(f.read())
    with open(os.path.join(site, "MemoryViz.js"), "w") as f:
        f.write(code)
    shutil.copy(a.d3, os.path.join(site, "d3.min.js"))
    os.symlink(os.path.abspath(a.snapshot), os.path.join(site, "snapshot.pickle"))
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(PAGE % {"name": os.path.basename(a.snapshot)})
    server = serve(site)
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"

    print(f"snapshot {a.snapshot} ({os.path.getsize(a.snapshot) / 2**20:.0f} MiB)")
    for run in range(a.runs):
        if not a.skip_memoryviz:
            r = run_memoryviz(a.chromium, url, a.timeout)
            if r is None:
                print(f"run {run + 1}: MemoryViz did not render within {a.timeout:.0f} s")
            else:
                print(f"run {run + 1}: MemoryViz   launch -> rendered {r[0]:6.2f} s   renderer {r[1] / 1024:6.0f} MB   "
                      f"all Chromium {r[2] / 1024:6.0f} MB   ({r[3]} polygons)")
        out = os.path.join(site, "fraglab.png")
        elapsed, rss = run_fraglab(a.gui, a.snapshot, out)
        print(f"run {run + 1}: fraglab-gui launch -> screenshot {elapsed:6.2f} s   peak RSS {rss / 1024:6.0f} MB")
        sys.stdout.flush()
    server.shutdown()
    shutil.rmtree(site, ignore_errors=True)


if __name__ == "__main__":
    main()
