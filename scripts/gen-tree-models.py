#!/usr/bin/python3
"""gen-tree-models.py trains small XGBoost models on scikit-learn's bundled
datasets and writes them, with XGBoost's own predictions, under
engines/trees/testdata/xgboost/.

Every case is saved in the three formats XGBoost writes: JSON (.json),
UBJSON (.ubj) and the legacy binary format (.bin; not for categorical
models, which it cannot hold). <case>.expected.json holds the test rows
(null = missing) and, per row, XGBoost's margins (output_margin=True) and
predictions, as the float32 values XGBoost returned, printed exactly.

Run with Debian's interpreter (python3-xgboost 1.7.4, python3-sklearn):
    /usr/bin/python3 scripts/gen-tree-models.py [outdir]
Pass --bench DIR to write only the benchmark model (200 trees of depth 10
on 32 features), 1000 input rows and XGBoost's predictions for them
instead (engines/trees/bench reads them; see engines/trees/BENCHMARKS_trees.md).
"""
import json
import os
import sys

import numpy as np
import xgboost as xgb
from sklearn import datasets

OUT = "engines/trees/testdata/xgboost"
N_TEST = 24


def f32list(a):
    return [float(np.float32(v)) for v in np.asarray(a, dtype=np.float32).ravel()]


def rows_json(X):
    return [[None if np.isnan(v) else float(v) for v in row] for row in X]


def save(name, bst, Xte, formats=("json", "ubj", "bin"), feature_types=None):
    os.makedirs(OUT, exist_ok=True)
    for ext in formats:
        bst.save_model(os.path.join(OUT, f"{name}.{ext}"))
    d = xgb.DMatrix(Xte, missing=np.nan, feature_names=bst.feature_names,
                    feature_types=feature_types, enable_categorical=feature_types is not None)
    margin = bst.predict(d, output_margin=True)
    pred = bst.predict(d)
    width = 1 if margin.ndim == 1 else margin.shape[1]
    exp = {
        "rows": rows_json(Xte),
        "margin_width": width,
        "predict_width": 1 if pred.ndim == 1 else pred.shape[1],
        "margin": f32list(margin),
        "predict": f32list(pred),
        "formats": list(formats),
    }
    with open(os.path.join(OUT, f"{name}.expected.json"), "w") as f:
        json.dump(exp, f, separators=(",", ":"))
        f.write("\n")
    print(name, width, "formats", formats)


def expf_table():
    """Writes expf.tsv: float32 inputs and glibc's expf of each, as hex bits,
    so trees' own expf is checked against the libm XGBoost calls."""
    import ctypes
    libm = ctypes.CDLL("libm.so.6")
    libm.expf.restype = ctypes.c_float
    libm.expf.argtypes = [ctypes.c_float]
    rng = np.random.default_rng(11)
    xs = np.concatenate([rng.uniform(-20, 20, 4000), rng.uniform(-104, 89, 1000),
                         [0.0, -0.0, 1e-30, -1e-30, 88.72, 88.73, -103.9, -104.0, 1.0]]).astype(np.float32)
    with open(os.path.join(OUT, "expf.tsv"), "w") as f:
        for x in xs:
            y = np.float32(libm.expf(float(x)))
            f.write(f"{x.view(np.uint32):08x}\t{y.view(np.uint32):08x}\n")


def train(params, X, y, rounds, feature_names=None, feature_types=None, weight=None):
    p = {"nthread": 1, "seed": 7, "max_depth": 3}
    p.update(params)
    d = xgb.DMatrix(X, label=y, missing=np.nan, feature_names=feature_names,
                    feature_types=feature_types, enable_categorical=feature_types is not None)
    return xgb.train(p, d, rounds)


def split(X, y, seed=0):
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    te, tr = idx[:N_TEST], idx[N_TEST:]
    return X[tr], y[tr], X[te], y[te]


def main():
    global OUT
    args = sys.argv[1:]
    if args and args[0] == "--bench":
        bench(args[1])
        return
    if args:
        OUT = args[0]
    os.makedirs(OUT, exist_ok=True)
    expf_table()
    bc = datasets.load_breast_cancer()
    names = [n.replace(" ", "_") for n in bc.feature_names]
    X, y, Xte, _ = split(bc.data.astype(np.float32), bc.target)
    save("binary", train({"objective": "binary:logistic"}, X, y, 20, feature_names=names), Xte)
    save("binary_base", train({"objective": "binary:logistic", "base_score": 0.3}, X, y, 10), Xte)
    save("logitraw", train({"objective": "binary:logitraw", "base_score": 0.7}, X, y, 10), Xte)
    save("dart", train({"objective": "binary:logistic", "booster": "dart", "rate_drop": 0.3,
                        "skip_drop": 0.0, "sample_type": "weighted", "normalize_type": "forest"}, X, y, 15), Xte)

    # Missing values: knock out a fifth of the cells, in training and test.
    rng = np.random.default_rng(3)
    Xm, Xtem = X.copy(), Xte.copy()
    Xm[rng.random(Xm.shape) < 0.2] = np.nan
    Xtem[rng.random(Xtem.shape) < 0.2] = np.nan
    save("missing", train({"objective": "binary:logistic", "max_depth": 4}, Xm, y, 20), Xtem)
    save("missing_gblinear", train({"objective": "binary:logistic", "booster": "gblinear"}, Xm, y, 10), Xtem)

    iris = datasets.load_iris()
    X, y, Xte, _ = split(iris.data.astype(np.float32), iris.target, 1)
    save("multiclass", train({"objective": "multi:softprob", "num_class": 3}, X, y, 10,
                             feature_names=["sepal_length", "sepal_width", "petal_length", "petal_width"]), Xte)
    save("multiclass_softmax", train({"objective": "multi:softmax", "num_class": 3}, X, y, 6), Xte)
    save("multiclass_dart", train({"objective": "multi:softprob", "num_class": 3, "booster": "dart",
                                   "rate_drop": 0.2, "skip_drop": 0.0}, X, y, 8), Xte)
    save("multiclass_gblinear", train({"objective": "multi:softprob", "num_class": 3, "booster": "gblinear"}, X, y, 10), Xte)

    db = datasets.load_diabetes()
    X, y, Xte, _ = split(db.data.astype(np.float32), db.target, 2)
    save("regression", train({"objective": "reg:squarederror", "eta": 0.3}, X, y, 30), Xte)
    save("regression_base", train({"objective": "reg:squarederror", "base_score": 150.0}, X, y, 10), Xte)
    save("poisson", train({"objective": "count:poisson", "max_delta_step": 0.7}, X, y / 10, 20), Xte)
    save("gamma", train({"objective": "reg:gamma"}, X, y, 20), Xte)
    save("tweedie", train({"objective": "reg:tweedie", "tweedie_variance_power": 1.4}, X, y, 20), Xte)
    save("pseudohuber", train({"objective": "reg:pseudohubererror"}, X, y, 10), Xte)
    save("gblinear", train({"objective": "reg:squarederror", "booster": "gblinear"}, X, y, 20), Xte)

    X, y, Xte, _ = split(bc.data.astype(np.float32), bc.target)
    save("gblinear_binary", train({"objective": "binary:logistic", "booster": "gblinear"}, X, y, 10), Xte)
    save("rank", train({"objective": "rank:pairwise"}, X, y, 10), Xte)
    # A random forest: several parallel trees per round, bagged.
    save("random_forest", train({"objective": "binary:logistic", "num_parallel_tree": 6, "subsample": 0.7,
                                 "colsample_bynode": 0.7, "eta": 1.0, "max_depth": 5}, X, y, 2), Xte)

    # Categorical: wine with two columns binned into small categories; one
    # column low-cardinality (one-hot splits), one wider (partition splits).
    wine = datasets.load_wine()
    Xw = wine.data.astype(np.float32)
    Xw[:, 0] = np.floor((Xw[:, 0] - Xw[:, 0].min()) * 2) % 3
    Xw[:, 6] = np.floor((Xw[:, 6] - Xw[:, 6].min()) * 4) % 12
    X, y, Xte, _ = split(Xw, (wine.target == 1).astype(int), 4)
    Xte[0, 0] = np.nan
    Xte[1, 6] = np.nan
    Xte[2, 6] = 40  # a category never seen in training
    ft = ["c" if i in (0, 6) else "q" for i in range(Xw.shape[1])]
    bst = train({"objective": "binary:logistic", "tree_method": "hist", "max_cat_to_onehot": 4,
                 "max_depth": 4}, X, y, 15, feature_types=ft)
    save("categorical", bst, Xte, formats=("json", "ubj"), feature_types=ft)


def bench(out):
    """Writes the benchmark model (200 trees, depth 10, 32 features) as
    bench.json, its legacy binary bench.bin, and 1000 input rows."""
    os.makedirs(out, exist_ok=True)
    X, y = datasets.make_classification(n_samples=20000, n_features=32, n_informative=20, random_state=5)
    X = X.astype(np.float32)
    d = xgb.DMatrix(X, label=y)
    bst = xgb.train({"objective": "binary:logistic", "max_depth": 10, "nthread": 2, "eta": 0.1,
                     "min_child_weight": 0, "lambda": 0.01}, d, 200)
    bst.save_model(os.path.join(out, "bench.json"))
    bst.save_model(os.path.join(out, "bench.bin"))
    rows = X[:1000]
    np.savetxt(os.path.join(out, "bench_rows.tsv"), rows, delimiter="\t", fmt="%.9g")
    pred = bst.predict(xgb.DMatrix(rows))
    with open(os.path.join(out, "bench_pred.txt"), "w") as f:
        for v in pred:
            f.write(repr(float(np.float32(v))) + "\n")


if __name__ == "__main__":
    main()
