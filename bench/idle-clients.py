#!/usr/bin/env python3
"""Memory per idle attached client: start `fleet run --control-socket
--headless`, attach N clients (hello, read through replayEnd, then stay
idle), and report the daemon's RSS growth per client.

usage: bench/idle-clients.py [N] [path/to/fleet]     (defaults: 1000, /tmp/fleet)
"""
import glob, json, os, resource, signal, socket, subprocess, sys, tempfile, time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
fleet = sys.argv[2] if len(sys.argv) > 2 else "/tmp/fleet"
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 256)), hard))

home = tempfile.mkdtemp(prefix="fi", dir="/tmp")
os.makedirs(home + "/cwd")
env = dict(os.environ, AGENTS_FLEET_HOME=home)
proc = subprocess.Popen([fleet, "run", "--control-socket", "--headless", "--log-level", "warn"],
                        cwd=home + "/cwd", env=env, stderr=subprocess.DEVNULL,
                        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard)))
try:
    while not glob.glob(home + "/sockets/*.json"):
        time.sleep(0.01)
    desc = json.load(open(glob.glob(home + "/sockets/*.json")[0]))
    token = open(desc["tokenPath"]).read().strip()

    def rss_kib():
        for line in open(f"/proc/{proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

    time.sleep(1.5)  # first snapshots out, steady state
    before = rss_kib()
    conns = []
    hello = json.dumps({"type": "hello", "token": token, "clientKind": "other", "clientName": "idle"}) + "\n"
    for i in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(desc["socketPath"])
        s.sendall(hello.encode())
        buf = b""
        while b'"replayEnd"' not in buf:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise SystemExit(f"client {i}: connection closed during attach")
            buf += chunk
        conns.append(s)
    time.sleep(3)  # idle: periodic frames only when something changed
    after = rss_kib()
    print(json.dumps({"clients": n, "rss_before_kib": before, "rss_after_kib": after,
                      "rss_per_client_kib": round((after - before) / n, 2)}))
finally:
    proc.send_signal(signal.SIGTERM)
    proc.wait()
