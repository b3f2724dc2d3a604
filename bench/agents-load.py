#!/usr/bin/env python3
"""Daemon CPU and RSS with N concurrent agent workers (Claude Code) streaming
from the scripted model endpoint; the CLIs' own CPU is reported apart.

    go build -o /tmp/fleet ./cmd/fleet && go build -o /tmp/modelmock ./cmd/modelmock
    python3 bench/agents-load.py --fleet /tmp/fleet --modelmock /tmp/modelmock \
        --claude ~/.cache/agents-fleet/agent-clis/node_modules/.bin/claude --workers 8 --turns 30

Each worker runs TURNS model turns, each a Bash tool call (`seq 1 LINES`)
whose output the CLI streams back, then a final text. One socket client
watches every frame, as a console would. Prints one JSON line.
Loopback only; everything it starts is stopped by pid at the end.
"""
import argparse, json, os, shutil, signal, socket, subprocess, sys, tempfile, time

CLK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])  # utime + stime
    except OSError:
        return None


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def marked(mark):
    """pids whose environment carries AGENTS_FLEET_SESSION=mark."""
    out = []
    needle = ("AGENTS_FLEET_SESSION=" + mark).encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            out.append(int(d))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleet", required=True)
    ap.add_argument("--modelmock", required=True)
    ap.add_argument("--claude", required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--port", type=int, default=18090)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="fal")
    home, repo, cli_home = (os.path.join(tmp, x) for x in ("h", "r", "c"))
    for d in (home, repo, cli_home):
        os.makedirs(d, mode=0o700)
    subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run(["git", "-C", repo, "-c", "user.email=b@b", "-c", "user.name=b", "commit", "-q", "--allow-empty", "-m", "root"], check=True)

    turn = {"toolCalls": [{"name": "Bash", "input": {"command": f"seq 1 {a.lines}", "description": "count"}}],
            "usage": {"input": 100, "output": 10}}
    script = {"rules": [{"name": "load", "match": "load:", "turns": [turn] * a.turns + [{"text": "done", "usage": {"input": 100, "output": 1}}]}]}
    with open(os.path.join(tmp, "script.json"), "w") as f:
        json.dump(script, f)
    url = f"http://127.0.0.1:{a.port}"
    cfg = {"providers": {"claude": {"path": a.claude, "args": ["--allowedTools", "Bash"],
                                     "env": {"HOME": cli_home, "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-bench"}}}}
    with open(os.path.join(home, "config.json"), "w") as f:
        json.dump(cfg, f)

    procs = []
    try:
        mm = subprocess.Popen([a.modelmock, "--addr", f"127.0.0.1:{a.port}", "--script", os.path.join(tmp, "script.json"),
                               "--max-requests", "100000", "--lifetime", "30m"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(mm)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_FLEET_")}
        env["AGENTS_FLEET_HOME"] = home
        fl = subprocess.Popen([a.fleet, "run", "--headless", "--control-socket", "--provider", "claude", "--workers", str(a.workers)],
                              cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "fleet.log"), "w"))
        procs.append(fl)
        desc = None
        for _ in range(500):
            ds = [x for x in os.listdir(os.path.join(home, "sockets"))] if os.path.isdir(os.path.join(home, "sockets")) else []
            if ds:
                desc = json.load(open(os.path.join(home, "sockets", ds[0])))
                break
            time.sleep(0.02)
        if not desc:
            sys.exit("the fleet did not register")
        s = socket.socket(socket.AF_UNIX)
        s.connect(desc["socketPath"])
        token = open(desc["tokenPath"]).read().strip()
        s.sendall((json.dumps({"type": "hello", "token": token, "clientKind": "other", "clientName": "bench"}) + "\n").encode())
        buf = bytearray()

        def readline(block=True):
            while True:
                i = buf.find(b"\n")
                if i >= 0:
                    line = bytes(buf[:i])
                    del buf[:i + 1]
                    return line
                try:
                    chunk = s.recv(1 << 16)
                except (socket.timeout, TimeoutError):
                    if block:
                        continue
                    return b""
                if not chunk:
                    raise SystemExit("the fleet closed the connection")
                buf.extend(chunk)

        session = None
        while True:
            m = json.loads(readline())
            if m["type"] == "welcome":
                session = m["sessionId"]
            if m["type"] == "replayEnd":
                break
        c0 = cpu_ticks(fl.pid)
        t0 = time.time()
        for i in range(a.workers):
            s.sendall((json.dumps({"type": "prompt", "text": f"/spawn load: job {i}"}) + "\n").encode())
        settled, frames, peak_rss, cli_cpu = 0, 0, 0, {}
        last_sample = 0.0
        s.settimeout(0.2)
        while settled < a.workers and time.time() - t0 < a.timeout:
            line = readline(block=False)
            if line:
                frames += 1
                m = json.loads(line)
                if m.get("type") == "hubEvent" and m.get("kind") in ("completed", "failed"):
                    settled += 1
            now = time.time()
            if now - last_sample > 0.2:
                last_sample = now
                peak_rss = max(peak_rss, rss_kib(fl.pid))
                for pid in marked(session):
                    t = cpu_ticks(pid)
                    if t is not None:
                        cli_cpu[pid] = max(cli_cpu.get(pid, 0), t)
        wall = time.time() - t0
        c1 = cpu_ticks(fl.pid)
        peak_rss = max(peak_rss, rss_kib(fl.pid))
        daemon_s = (c1 - c0) / CLK
        print(json.dumps({
            "workers": a.workers, "turns": a.turns, "lines": a.lines, "settled": settled, "frames": frames,
            "wall_s": round(wall, 2), "daemon_cpu_s": round(daemon_s, 2),
            "daemon_cpu_pct_of_core": round(100 * daemon_s / wall, 2),
            "daemon_peak_rss_mib": round(peak_rss / 1024, 1),
            "clis_cpu_s": round(sum(cli_cpu.values()) / CLK, 1), "cli_processes_seen": len(cli_cpu),
        }))
        s.close()
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
