"""check.py TEXTS.jsonl N URL_A TOKEN_A URL_B: posts the first N bodies to
both servers and fails unless every embedding pair agrees (max |a-b| <= 2e-3,
cosine >= 0.9999); prints the worst difference."""
import json
import sys
import urllib.request


def post(url, token, body):
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = token
    return json.loads(urllib.request.urlopen(urllib.request.Request(url, data=body, headers=h), timeout=300).read())["embedding"]


bodies = [l.strip().encode() for l in open(sys.argv[1]) if l.strip()][:int(sys.argv[2])]
worst, wcos = 0.0, 1.0
for b in bodies:
    a, c = post(sys.argv[3], sys.argv[4], b), post(sys.argv[5], "", b)
    if len(a) != len(c):
        sys.exit(f"check: dimensions differ: {len(a)} vs {len(c)}")
    worst = max(worst, max(abs(x - y) for x, y in zip(a, c)))
    dot = sum(x * y for x, y in zip(a, c))
    na, nc = sum(x * x for x in a) ** 0.5, sum(y * y for y in c) ** 0.5
    wcos = min(wcos, dot / (na * nc))
print(f"{len(bodies)} texts, dim {len(a)}: max |diff| {worst:.2e}, min cosine {wcos:.7f}")
if worst > 2e-3 or wcos < 0.9999:
    sys.exit("check: the embeddings disagree")
