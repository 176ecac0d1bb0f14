#!/usr/bin/env python3
"""report.py ROWS: the markdown tables of scripts/bench-generation.sh from its
rows (one JSON object a line: a GenResult of internal/loadgen plus model,
server, config, load and, for eas-server, mean_batch and step_ms)."""

import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]


def load_key(r):
    return (0, r["clients"]) if r["mode"] == "closed" else (1, r.get("rate_rps", 0))


def load_label(r):
    return f"{r['clients']} clients" if r["mode"] == "closed" else f"Poisson {r['rate_rps']:.2f} req/s"


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def errors(r):
    e = {k: v for k, v in r["by_status"].items() if k != "200"}
    return " ".join(f"{k}:{v}" for k, v in sorted(e.items())) or "-"


models = []
for r in rows:
    if r["model"] not in models:
        models.append(r["model"])
def per_cpu(r):
    c = r["server_cpu_cores"]
    return r["output_tokens_per_s"] / c if c and c > 0 else None


print("| model | server | config | load | output tokens/s | requests/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | TPOT ms | mean batch | step ms | server CPU (cores) | tokens per CPU-second | server MiB | ok | short | errors |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for m in models:
    for r in sorted((r for r in rows if r["model"] == m), key=lambda r: (r["server"] != "eas-server", r["server"], r["config"], load_key(r))):
        cpu = fmt(r["server_cpu_cores"], ".2f") if r["server_cpu_cores"] >= 0 else "n/a"
        rss = fmt(r["server_rss_mib"], ".0f") if r.get("server_rss_mib", -1) >= 0 else "n/a"
        print(f"| {m} | {r['server']} | {r['config']} | {load_label(r)} | {r['output_tokens_per_s']:.1f} | {r['requests_per_s']:.2f} | "
              f"{r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} | {r['itl_p50_ms']:.1f} | {r['itl_p99_ms']:.1f} | {r['tpot_mean_ms']:.1f} | "
              f"{fmt(r.get('mean_batch'), '.1f')} | {fmt(r.get('step_ms'), '.1f')} | {cpu} | {fmt(per_cpu(r), '.1f')} | {rss} | {r['ok']} | {r['short']} | {errors(r)} |")
print()


def get(m, server, config, clients):
    for r in rows:
        if (r["model"], r["server"], r["config"], r["mode"], r.get("clients")) == (m, server, config, "closed", clients):
            return r
    return None


def ratio(a, b, spec=".2f", suffix="x"):
    return f"{a / b:{spec}}{suffix}" if a is not None and b else "n/a"


print("| model | clients | eas-server batched / unbatched: tokens/s | tokens per server CPU-second | TTFT p99 |")
print("|---|---|---|---|---|")
for m in models:
    for c in sorted({r["clients"] for r in rows if r["model"] == m and r["mode"] == "closed"}):
        b, u = get(m, "eas-server", "batched", c), get(m, "eas-server", "unbatched", c)
        if b and u:
            print(f"| {m} | {c} | {ratio(b['output_tokens_per_s'], u['output_tokens_per_s'])} | {ratio(per_cpu(b), per_cpu(u))} | "
                  f"{ratio(b['ttft_p99_ms'], u['ttft_p99_ms'], '.2f', '')} |")
peers = sorted({r["server"] for r in rows if r["server"] != "eas-server"})
if peers:
    print()
    print("| model | clients | peer | config | eas-server batched / peer, tokens/s | TTFT p99 eas-server / peer |")
    print("|---|---|---|---|---|---|")
    for m in models:
        for r in rows:
            if r["model"] != m or r["server"] == "eas-server" or r["mode"] != "closed":
                continue
            b = get(m, "eas-server", "batched", r["clients"])
            if b and r["output_tokens_per_s"] > 0:
                tt = f"{b['ttft_p99_ms'] / r['ttft_p99_ms']:.2f}" if r["ttft_p99_ms"] > 0 else "n/a"
                print(f"| {m} | {r['clients']} | {r['server']} | {r['config']} | {b['output_tokens_per_s'] / r['output_tokens_per_s']:.2f}x | {tt} |")
