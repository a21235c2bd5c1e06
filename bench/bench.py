#!/usr/bin/env python3
"""make bench: chatgpt-credential's hot paths timed side by side with the C reference helpers.

Runs inside a throwaway D-Bus session with an unlocked gnome-keyring (scripts/with-keyring).
Commands are timed by hyperfine in rounds with a rotating order, so that machine noise hits every
command alike (the file-store group with `hyperfine -N`, no shell); peak RSS comes from GNU time.
Writes bench/results.md (or, with --smoke, a few runs to stdout only: no targets asserted).
"""
import json, os, platform, shutil, statistics, subprocess, sys, tempfile, threading, time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMOKE = "--smoke" in sys.argv
RUNS = 4 if SMOKE else 300
WARMUP = 1 if SMOKE else 20
CONC_ROUNDS = 1 if SMOKE else 5


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed ({r.returncode}): {r.stderr.decode(errors='replace') if isinstance(r.stderr, bytes) else r.stderr}")
    return r


def release_binary():
    out = sh(["swift", "build", "-c", "release", "--static-swift-stdlib", "--show-bin-path"], cwd=ROOT, text=True)
    path = os.path.join(out.stdout.strip(), "chatgpt-credential")
    if not os.access(path, os.X_OK):
        sys.exit("bench: build the release binary first (make release)")
    return path


def quote(a):
    return "'" + a.replace("'", "'\\''") + "'"


def measure(cases, env, shell, runs=RUNS, warmup=WARMUP):
    """cases: list of (name, argv, stdin_path). Timing by hyperfine in ROUNDS rounds whose command
    order rotates, so slow drift hits every command alike. Peak RSS by GNU time, the largest of a
    few runs.

    shell=False: `hyperfine -N`, each command exec'ed directly (stdin /dev/null): nothing to
    subtract, sound down to a fraction of a millisecond. shell=True: each command runs through
    `sh -c` with its stdin redirected (git's and docker's helpers read their request on stdin,
    and hyperfine 1.15 has no --input); hyperfine subtracts its estimate of the shell's own
    start-up, which adds a little noise (~0.1 ms) to every command of the group alike."""
    rounds = 1 if SMOKE else 5
    per_round = max(2, runs // rounds)
    times = {c[0]: [] for c in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            k = r % len(cases)
            order = cases[k:] + cases[:k]
            if shell:
                cmds = [" ".join(quote(a) for a in argv) + " < " + quote(stdin or "/dev/null") + " > /dev/null" for _, argv, stdin in order]
            else:
                assert all(stdin is None for _, _, stdin in order), "hyperfine -N cannot redirect stdin"
                cmds = [" ".join(quote(a) for a in argv) for _, argv, _ in order]
            out = os.path.join(tmp, f"round{r}.json")
            subprocess.run(["hyperfine", "--style", "none", "--warmup", str(warmup), "--runs", str(per_round),
                            "--export-json", out] + (["-N"] if not shell else []) + cmds, env=env, check=True, capture_output=True)
            for (name, _, _), result in zip(order, json.load(open(out))["results"]):
                times[name].extend(result["times"])
    res = {}
    for name, argv, stdin in cases:
        peak, failures = 0, 0
        for _ in range(3 if SMOKE else 10):
            with open(stdin or "/dev/null") as inp:
                p = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, env=env, stdin=inp,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            failures += p.returncode != 0
            peak = max(peak, int(p.stderr.strip().splitlines()[-1]))
        v = sorted(times[name])
        res[name] = {"median_ms": statistics.median(v) * 1000, "p90_ms": v[int(len(v) * 0.9) - 1] * 1000,
                     "rss_kib": peak, "failures": failures, "runs": len(v)}
    return res


class Issuer:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "Tests/TestIssuer/test_issuer.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        assert line.startswith("PORT="), line
        self.url = "http://127.0.0.1:" + line.split("=", 1)[1]

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def stats(self):
        with urllib.request.urlopen(self.url + "/__admin/stats", timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    binary = release_binary()
    load_before = os.getloadavg()
    work = tempfile.mkdtemp(prefix="ccred-bench-")
    issuer = None
    try:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "DBUS_SESSION_BUS_ADDRESS", "LANG")}
        env.update(HOME=f"{work}/home", XDG_DATA_HOME=f"{work}/data", XDG_CONFIG_HOME=f"{work}/config",
                   XDG_RUNTIME_DIR=f"{work}/run", CHATGPT_CREDENTIAL_NONINTERACTIVE="1")
        for d in ("home", "data", "config", "run"):
            os.makedirs(f"{work}/{d}", mode=0o700)
        issuer = Issuer()
        env["CHATGPT_CREDENTIAL_ISSUER"] = issuer.url

        # Reference helper: git's own libsecret helper, built from the source Debian ships.
        src = "/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c"
        gcl = f"{work}/git-credential-libsecret"
        flags = sh(["pkg-config", "--cflags", "--libs", "libsecret-1", "glib-2.0"], text=True).stdout.split()
        sh(["cc", "-O2", "-o", gcl, src] + flags)

        def store(profile, store_kind, expires_in):
            tokens = issuer.post("/__admin/seed", {"expires_in": expires_in})
            subprocess.run([binary, "--store", store_kind, "--profile", profile, "store"], env=env, check=True,
                           input=json.dumps(tokens).encode(), capture_output=True)

        store("default", "secret-service", 86400)
        stored = sh(["secret-tool", "lookup", "service", "chatgpt-credential", "profile", "default"], env=env).stdout
        size = len(stored)
        secret = (os.urandom(size).hex())[:size]
        with open(f"{work}/git-get", "w") as f:
            f.write("protocol=https\nhost=bench.example\n\n")
        # git-credential-libsecret's own `store` reads lines of at most 1023 bytes, shorter than our
        # document, so its item is written with secret-tool under the schema and attributes it searches.
        sh(["secret-tool", "store", "--label", "bench git", "xdg:schema", "org.gnome.keyring.NetworkPassword",
            "user", "u", "protocol", "https", "server", "bench.example"], env=env, input=secret.encode())
        with open(f"{work}/docker-url", "w") as f:
            f.write("https://bench.example")
        subprocess.run(["docker-credential-secretservice", "store"], env=env, check=True, capture_output=True,
                       input=json.dumps({"ServerURL": "https://bench.example", "Username": "u", "Secret": secret}).encode())
        subprocess.run(["secret-tool", "store", "--label", "bench", "service", "bench"], env=env, check=True,
                       input=secret.encode(), capture_output=True)

        ss = measure([
            ("chatgpt-credential get (Secret Service)", [binary, "--store", "secret-service", "get"], None),
            ("git-credential-libsecret get", [gcl, "get"], f"{work}/git-get"),
            ("docker-credential-secretservice get", [shutil.which("docker-credential-secretservice"), "get"], f"{work}/docker-url"),
            ("secret-tool lookup", [shutil.which("secret-tool"), "lookup", "service", "bench"], None),
        ], env, shell=True)

        store("filebench", "file", 86400)
        age_file = f"{work}/data/chatgpt-credential/filebench.age"
        identity = f"{work}/config/chatgpt-credential/identity"
        fs = measure([
            ("chatgpt-credential get (file store)", [binary, "--store", "file", "--profile", "filebench", "get"], None),
            ("age -d -i identity", [shutil.which("age"), "-d", "-i", identity, age_file], None),
        ], env, shell=False)

        # One refresh, then 50 concurrent gets on an expired token: wall time and issuer requests.
        single, conc, refreshes, distinct, failures = [], [], [], [], 0
        for r in range(CONC_ROUNDS):
            store(f"one{r}", "file", 0)
            t0 = time.perf_counter()
            subprocess.run([binary, "--store", "file", "--profile", f"one{r}", "get"], env=env, check=True, capture_output=True)
            single.append(time.perf_counter() - t0)
            store(f"conc{r}", "file", 0)
            before = issuer.stats()["refresh_requests"]
            t0 = time.perf_counter()
            procs = [subprocess.Popen([binary, "--store", "file", "--profile", f"conc{r}", "get"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for _ in range(50)]
            outs = [p.communicate()[0] for p in procs]
            conc.append(time.perf_counter() - t0)
            failures += sum(1 for p in procs if p.returncode != 0)
            refreshes.append(issuer.stats()["refresh_requests"] - before)
            distinct.append(len(set(outs)))

        # Device login with instant approval; the poll interval is excluded by setting it to 0.
        issuer.post("/__admin/config", {"approve_after": 0, "interval": 0})
        logins = []
        for i in range(3 if SMOKE else 20):
            t0 = time.perf_counter()
            p = subprocess.run([binary, "--store", "file", "--profile", f"login{i}", "login", "--device"], env=env,
                               capture_output=True)
            logins.append((time.perf_counter() - t0, p.returncode))

        machine = f"{platform.node()}: {platform.machine()}, {os.cpu_count()} cores, " + \
            (open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip() if os.path.exists("/proc/cpuinfo") else "?") + \
            f", {platform.platform()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        load_after = os.getloadavg()
        load = "load average (1/5/15 min) %.2f/%.2f/%.2f at the start, %.2f/%.2f/%.2f at the end" % (load_before + load_after)
        lines = ["# Benchmarks", "", f"Machine: {machine}", "", f"Load: {load}.", "",
                 f"`make bench`: about {RUNS} runs of each command, timed by hyperfine in rounds whose command order "
                 "rotates; the Secret Service group runs every command through a shell with its stdin redirected "
                 "(the git and docker helpers read stdin; hyperfine subtracts the shell's start-up), the file-store "
                 "group runs both commands without a shell (`hyperfine -N`). Peak RSS by GNU time (largest of 10 runs). "
                 "Medians.", ""]

        def table(title, res, ref):
            lines.extend([f"## {title}", "", "| command | median ms | p90 ms | ratio to ours | peak RSS KiB | failed runs |",
                          "|---|---:|---:|---:|---:|---:|"])
            ours = res[ref]
            for name, r in res.items():
                ratio = ours["median_ms"] / r["median_ms"]
                lines.append(f"| {name} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
                             f"{'—' if name == ref else f'ours/theirs = {ratio:.2f}×'} | {r['rss_kib']} | {r['failures']} |")
            lines.append("")

        table("Secret Service, fresh token (same secret size: %d bytes)" % size, ss, "chatgpt-credential get (Secret Service)")
        table("Encrypted file store vs age", fs, "chatgpt-credential get (file store)")
        lines.extend(["## Refresh under concurrency (file store, test issuer on loopback)", "",
                      "| measure | value |", "|---|---|",
                      f"| single refreshing `get`, median wall | {statistics.median(single)*1000:.1f} ms |",
                      f"| 50 concurrent `get`s on an expired token, median wall | {statistics.median(conc)*1000:.1f} ms |",
                      f"| ratio concurrent / single | {statistics.median(conc)/statistics.median(single):.2f}× |",
                      f"| issuer refresh requests per round | {refreshes} |",
                      f"| distinct tokens printed per round | {distinct} |",
                      f"| failed gets | {failures} |", ""])
        ok_logins = [t for t, c in logins if c == 0]
        lines.extend(["## Device login, instant approval (poll interval 0)", "",
                      f"median {statistics.median(ok_logins)*1000:.1f} ms over {len(ok_logins)} of {len(logins)} successful logins" if ok_logins
                      else f"login failed in all {len(logins)} runs", ""])
        g, l = ss["chatgpt-credential get (Secret Service)"], ss["git-credential-libsecret get"]
        f, a = fs["chatgpt-credential get (file store)"], fs["age -d -i identity"]
        lines.extend(["## Targets", "", "| target | measured | held |", "|---|---|---|",
                      f"| Secret Service hot path ≤ 1.0× git-credential-libsecret | {g['median_ms']/l['median_ms']:.2f}× | {'yes' if g['median_ms'] <= l['median_ms'] else 'no'} |",
                      f"| file store ≤ 1.5× age -d | {f['median_ms']/a['median_ms']:.2f}× | {'yes' if f['median_ms'] <= 1.5*a['median_ms'] else 'no'} |",
                      f"| file store < 5 ms | {f['median_ms']:.2f} ms | {'yes' if f['median_ms'] < 5 else 'no'} |",
                      f"| 50 concurrent: exactly 1 refresh | {refreshes} | {'yes' if all(x == 1 for x in refreshes) else 'no'} |",
                      f"| 50 concurrent wall ≤ 2× single refresh | {statistics.median(conc)/statistics.median(single):.2f}× | {'yes' if statistics.median(conc) <= 2*statistics.median(single) else 'no'} |",
                      f"| peak RSS ≤ 1.5× git-credential-libsecret | {g['rss_kib']/l['rss_kib']:.2f}× | {'yes' if g['rss_kib'] <= 1.5*l['rss_kib'] else 'no'} |", ""])
        report = "\n".join(lines)
        print(report)
        if not SMOKE:
            with open(os.path.join(ROOT, "bench/results.md"), "w") as out:
                out.write(report)
            print("wrote bench/results.md")
    finally:
        if issuer:
            issuer.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
