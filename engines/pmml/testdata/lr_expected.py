#!/usr/bin/python3
"""Independent reference for lr.pmml: plain arithmetic with Python's math
module, no PMML code. Writes lr_expected.csv (run from this folder)."""
import csv, math

coef = {"sex": 1.1, "cp": 0.75, "fbs": -0.4, "age": 0.03, "trestbps": 0.011}
thal = {"norm": 0.0, "fix": 0.9, "rev": 1.6}
rows = [
    {"sex": "1", "cp": "3", "fbs": "0", "age": "63", "trestbps": "145", "thal": "fix"},
    {"sex": "0", "cp": "1", "fbs": "1", "age": "41", "trestbps": "130", "thal": "norm"},
    {"sex": "1", "cp": "0", "fbs": "0", "age": "", "trestbps": "120", "thal": "rev"},
    {"sex": "0", "cp": "2", "fbs": "0", "age": "57", "trestbps": "150", "thal": ""},
    {"sex": "1", "cp": "2", "fbs": "1", "age": "70", "trestbps": "160", "thal": "unknown"},
]
with open("lr_expected.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["sex", "cp", "fbs", "age", "trestbps", "thal", "ifhealth", "p_0", "p_1"])
    for r in rows:
        y = -3.25
        for k, c in coef.items():
            v = r[k]
            if k == "age" and v == "":
                v = "54"  # missingValueReplacement
            y += c * float(v)
        t = r["thal"] if r["thal"] in thal else "norm"  # asMissing, then replacement
        y += thal[t]
        p1 = 1 / (1 + math.exp(-y))
        p0 = 1 - p1
        w.writerow([r[k] for k in ["sex", "cp", "fbs", "age", "trestbps", "thal"]] + [1 if p1 > p0 else 0, repr(p0), repr(p1)])
