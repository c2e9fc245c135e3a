"""Toy study of NAPSU-MQ (Räisä et al. 2023, Section 5.1, Fig. 1, 3a, 3b).

n = 2000 rows of (x1, x2, y) binary with y ~ Bernoulli(sigmoid(x1)) (coefficients (1, 0), no
intercept); the full 3-way marginal; delta = n^-2; m = 100 synthetic datasets of n_syn = n.
Downstream: logistic regression of y on x1, x2 without intercept; 95% intervals by Rubin's
rules for synthetic data (Supplement B) or, for the single-dataset baseline, the usual Wald
interval as if the synthetic data were real.

Methods: NAPSU-MQ with Laplace and with NUTS; NAPSU-MQ (Laplace) without noise awareness
(inference at sigma_DP = 0.005, Fig. 3b "-NA"); the PGM maximum-likelihood point estimate with
m = 100 datasets + Rubin's rules ("-NA" via MLE + MI) and with one dataset ("-NA-MI").

Results are appended after every repeat, so an interrupted run still leaves a valid JSON.

    PYTHONPATH=src python benchmarks/napsu/toy_coverage.py --repeats 200

``--start/--methods`` split the repeats over processes; ``plot.py`` merges the JSON files.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

from synthinfer.analysis import rubins_rules
from synthinfer.datasets import make_toy_logistic
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ

TRUE = np.array([1.0, 0.0])
EPSILONS = [0.1, 0.25, 0.5, 1.0, 2.0, 100.0]
N = 2000
M = 100
METHODS = {
    "napsu_laplace": dict(inference="laplace"),
    "napsu_nuts": dict(inference="nuts", n_chains=4, num_warmup=400, num_samples=500),
    "napsu_laplace_not_noise_aware": dict(inference="laplace", noise_aware=False),
    "mle_mi": dict(inference="mle"),
}


def grouped_logit(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logistic regression of y on (x1, x2) without intercept from cell counts, vectorised.

    ``counts`` has shape (m, 2, 2, 2) indexed [x1, x2, y]. The MLE and its inverse-Fisher
    variance equal statsmodels' ``Logit(y, X).fit()`` on the expanded rows (checked once in
    ``main``); Newton's method is written out because the study runs ~10^6 such fits.
    Returns estimates and variances of shape (m, 2); NaN where the MLE does not exist.
    """
    m = counts.shape[0]
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=float)
    ones = counts[:, :, :, 1].reshape(m, 4)
    tot = counts.sum(axis=3).reshape(m, 4)
    beta = np.zeros((m, 2))
    for _ in range(50):
        eta = beta @ X.T
        p = 1 / (1 + np.exp(-eta))
        grad = np.einsum("mk,kj->mj", ones - tot * p, X)
        w = tot * p * (1 - p)
        H = np.einsum("mk,ki,kj->mij", w, X, X)
        step = np.linalg.solve(H + 1e-9 * np.eye(2), grad[..., None])[..., 0]
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    eta = beta @ X.T
    p = 1 / (1 + np.exp(-eta))
    H = np.einsum("mk,ki,kj->mij", tot * p * (1 - p), X, X)
    cov = np.linalg.inv(H + 1e-9 * np.eye(2))
    var = np.stack([cov[:, 0, 0], cov[:, 1, 1]], axis=1)
    bad = ~np.isfinite(beta).all(1) | (np.abs(beta) > 20).any(1)
    beta[bad] = np.nan
    var[bad] = np.nan
    return beta, var


def cell_counts(frames) -> np.ndarray:
    out = np.zeros((len(frames), 2, 2, 2))
    for i, f in enumerate(frames):
        idx = [f[c].cat.codes.to_numpy() if hasattr(f[c], "cat") else f[c].to_numpy() for c in ("x1", "x2", "y")]
        np.add.at(out[i], tuple(idx), 1)
    return out


def check_against_statsmodels() -> None:
    import statsmodels.api as sm

    ds = make_toy_logistic(N, (1.0, 0.0), seed=123)
    c = cell_counts([ds.data.astype("category")])
    b, v = grouped_logit(c)
    fit = sm.Logit(ds.data["y"].to_numpy(), ds.data[["x1", "x2"]].to_numpy(float)).fit(disp=0)
    np.testing.assert_allclose(b[0], fit.params, rtol=1e-7)
    np.testing.assert_allclose(v[0], np.diag(fit.cov_params()), rtol=1e-6)


def intervals(method: str, gen: NapsuMQ, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    frames = gen.generate(M, seed=rng)
    q, v = grouped_logit(cell_counts(frames))
    res = rubins_rules(q, v, n=N, n_syn=N)
    out[method] = np.column_stack([res.conf_int(0.05), res.q_bar])
    if method == "mle_mi":
        # One dataset analysed as if it were real data (Fig. 3b "-NA-MI").
        z = stats.norm.ppf(0.975)
        qq, vv = q[0], v[0]
        out["mle_single"] = np.column_stack([qq - z * np.sqrt(vv), qq + z * np.sqrt(vv), qq])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--out", default="benchmarks/napsu/results/toy_coverage.json")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--start", type=int, default=0, help="first repeat index (to split a run over processes)")
    a = ap.parse_args()
    check_against_statsmodels()
    methods = a.methods.split(",")
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    records = []
    t_start = time.time()
    for r in range(a.start, a.start + a.repeats):
        data = make_toy_logistic(N, (1.0, 0.0), seed=10_000 + r).data
        dom = make_toy_logistic(1, (1.0, 0.0), seed=0).domain
        for eps in EPSILONS:
            for method in methods:
                rng = np.random.default_rng([r, int(eps * 100), methods.index(method)])
                t0 = time.time()
                gen = NapsuMQ([("x1", "x2", "y")], epsilon=eps, delta=N**-2.0, seed=rng, **METHODS[method]).fit(data, dom)
                ci = intervals(method, gen, rng)
                for name, arr in ci.items():
                    records.append({
                        "repeat": r, "epsilon": eps, "method": name,
                        "lower": arr[:, 0].tolist(), "upper": arr[:, 1].tolist(), "estimate": arr[:, 2].tolist(),
                        "seconds": time.time() - t0,
                        "rhat_max": gen.diagnostics_.get("nuts", {}).get("rhat_max"),
                    })
        summary = summarise(records)
        payload = {
            "settings": {"n": N, "m": M, "delta": N**-2.0, "true_coef": TRUE.tolist(), "epsilons": EPSILONS,
                         "methods": {k: METHODS[k] for k in methods}, "repeats_done": r + 1 - a.start, "first_repeat": a.start,
                         "repeats_requested": a.repeats},
            "summary": summary, "records": records,
            "elapsed_s": time.time() - t_start, "loadavg": os.getloadavg(),
        }
        tmp = Path(a.out + ".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, a.out)
        print(f"repeat {r + 1 - a.start}/{a.repeats} done, {time.time() - t_start:.0f} s", flush=True)


def summarise(records: list[dict]) -> dict:
    out: dict = {}
    for rec in records:
        key = f"{rec['method']}|{rec['epsilon']}"
        lo, hi = np.asarray(rec["lower"], float), np.asarray(rec["upper"], float)
        ok = np.isfinite(lo) & np.isfinite(hi)
        s = out.setdefault(key, {"method": rec["method"], "epsilon": rec["epsilon"], "n": 0, "cover": [0, 0], "width": [[], []], "failed": 0})
        s["n"] += 1
        for j in range(2):
            if ok[j]:
                s["cover"][j] += int(lo[j] <= TRUE[j] <= hi[j])
                s["width"][j].append(hi[j] - lo[j])
            else:
                s["failed"] += 1
    for s in out.values():
        s["coverage"] = [c / max(1, len(w)) for c, w in zip(s["cover"], s["width"])]
        s["median_width"] = [float(np.median(w)) if w else None for w in s["width"]]
        del s["width"]
    return out


if __name__ == "__main__":
    main()
