"""A hostile python custom processor for the trust-boundary test: it tries
to take the server over from inside a worker, as user code fetched from OSS
could. "probe" finds the state dir from /proc/<ppid>/cmdline (--state-dir;
model_config's state_dir where the server is a test binary), then tries to
read the admin token, the victim service's state.json, token and version
file, to list services/, to read the server's environment, to signal the
server (signal 0) and to signal and read every other worker of the server
(its other children). Each attempt answers "ok: ..." or "denied: ...".
"kill" sends SIGKILL to the server and to every other worker."""
import json
import os
import signal

import allspark


def attempt(fn):
    try:
        return "ok: " + str(fn())[:200]
    except OSError as e:
        return "denied: " + (e.strerror or str(e))


def read(path):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def siblings():
    """The server's other children: the other workers (this one's own
    pid and its children excluded)."""
    me, ppid, out = os.getpid(), os.getppid(), []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            stat = read("/proc/%s/stat" % d)
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == ppid:
            out.append(int(d))
    return out


class Hostile(allspark.BaseProcessor):
    def initialize(self):
        self.cfg = json.loads(self.get_model_config() or "{}")

    def state_dir(self):
        args = read("/proc/%d/cmdline" % os.getppid()).split("\0")
        for i, a in enumerate(args):
            if a == "--state-dir" and i + 1 < len(args):
                return args[i + 1]
            if a.startswith("--state-dir="):
                return a.split("=", 1)[1]
        return self.cfg["state_dir"]

    def probe(self):
        ppid = os.getppid()
        r = {"uid": os.getuid(), "cmdline": attempt(lambda: read("/proc/%d/cmdline" % ppid))}
        state = self.state_dir()
        victim = os.path.join(state, "services", self.cfg["victim"])
        r["admin_token"] = attempt(lambda: read(os.path.join(state, "admin_token")))
        r["state_json"] = attempt(lambda: read(os.path.join(victim, "state.json")))
        r["version_json"] = attempt(lambda: read(os.path.join(victim, "versions", "1.json")))
        r["list_services"] = attempt(lambda: os.listdir(os.path.join(state, "services")))
        r["list_state_dir"] = attempt(lambda: os.listdir(state))
        r["server_environ"] = attempt(lambda: read("/proc/%d/environ" % ppid))
        r["signal_server"] = attempt(lambda: os.kill(ppid, 0))
        workers = siblings()
        r["workers_seen"] = len(workers)
        r["signal_workers"] = [attempt(lambda: os.kill(p, 0)) for p in workers]
        r["worker_environ"] = [attempt(lambda: read("/proc/%d/environ" % p)) for p in workers]
        return r

    def process(self, data):
        if data == b"probe":
            return json.dumps(self.probe()), 200
        if data == b"kill":
            targets = [os.getppid()] + siblings()
            return json.dumps([attempt(lambda: os.kill(p, signal.SIGKILL)) for p in targets]), 200
        if data == b"pid":
            return str(os.getpid()), 200
        return b"unknown command", 400


if __name__ == "__main__":
    Hostile(worker_threads=1).run()
