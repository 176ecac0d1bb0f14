#!/usr/bin/python3
"""bench-trees-xgboost.py times XGBoost's own CPU predictor, in process and
single-threaded (nthread=1), on the benchmark model that
`scripts/gen-tree-models.py --bench DIR` writes, at 1 and 1000 records per
call: the peer row of engines/trees/BENCHMARKS_trees.md.

    /usr/bin/python3 scripts/bench-trees-xgboost.py DIR
"""
import sys
import time

import numpy as np
import xgboost as xgb


def rate(fn, records, seconds=3.0):
    fn()  # warm
    n = 0
    start = time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - start
        if el >= seconds:
            return n * records / el, el / n


def main():
    d = sys.argv[1]
    bst = xgb.Booster(model_file=f"{d}/bench.json")
    bst.set_param({"nthread": 1})
    X = np.loadtxt(f"{d}/bench_rows.tsv", delimiter="\t", dtype=np.float32)
    print(f"xgboost {xgb.__version__}, {bst.num_boosted_rounds()} trees, nthread=1")
    for batch in (1, 1000):
        rows = X[:batch]
        r1, t1 = rate(lambda: bst.inplace_predict(rows), batch)
        r2, t2 = rate(lambda: bst.predict(xgb.DMatrix(rows, nthread=1)), batch)
        print(f"records={batch}: inplace_predict {r1:,.0f} records/s ({t1 * 1e6:,.1f} us/call); "
              f"DMatrix+predict {r2:,.0f} records/s ({t2 * 1e6:,.1f} us/call)")


if __name__ == "__main__":
    main()
