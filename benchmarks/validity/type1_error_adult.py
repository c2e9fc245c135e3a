"""Type I error on a real table (after Perez et al. 2024): a fair coin beside Adult.

The NAPSU-MQ study's Adult table (10 discretised columns, n = 46,043) and an 11th column,
``coin``, drawn afresh in each repeat as a fair coin independent of every row: in the population
the logit of income on age (bucket midpoint), race, sex and coin has coin's coefficient 0. The
release measures the paper's 10 marginals and (coin, income), the one table through which noise
could show an effect of the coin. The test: H0 beta_coin = 0 at alpha = 0.05, from m synthetic
datasets analysed by :func:`synthinfer.analysis.analyze` with its defaults (batched logit,
separation remedy, Rubin's rules for synthetic data). Methods, each one fit per repeat and
epsilon on the same data: NAPSU-MQ noise-aware (``--napsu-inference``, Laplace by default:
minutes per NUTS fit at this size would allow few repeats), its not-noise-aware MLE (the PGM
point estimate of the same model) and PrivBayes, the last two also by the T_p rule of Nombo &
Charest (2024) and with one dataset analysed as if real; and the real data's own test, which
rejects with probability 0.05 by construction (the coin is random), as the yardstick.

Records are written after every repeat; ``--start`` and ``--merge`` continue a run, ``--combine``
joins runs split over processes and rewrites the summary.

    PYTHONPATH=src python benchmarks/validity/type1_error_adult.py --repeats 100 \\
        --out benchmarks/validity/results/type1_error_adult.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from type1_error import partial_synthesis_rejects, plot  # noqa: E402

EPSILONS = [0.5, 1.0, 4.0]
FORMULA = "income ~ age + C(race, Treatment('White')) + C(sex) + coin"
TERM = "coin"
METHODS = {
    "napsu_mi": "NAPSU-MQ noise-aware, analyze() (Rubin)",
    "mle_mi": "MLE (PGM) + repeated datasets, analyze() (Rubin)",
    "mle_tp": "MLE (PGM) + repeated datasets, T_p (Nombo & Charest)",
    "mle_single": "MLE, one dataset as if real",
    "privbayes_mi": "PrivBayes + repeated datasets, analyze() (Rubin)",
    "privbayes_tp": "PrivBayes + repeated datasets, T_p (Nombo & Charest)",
    "privbayes_single": "PrivBayes, one dataset as if real",
    "real": "the real data's own test",
}


def with_coin(data, domain, rng: np.random.Generator):
    """The table with a fair coin column (categories 0, 1) and its domain."""
    from synthinfer.data import Domain

    coin = rng.integers(0, 2, size=len(data))
    return (data.assign(coin=coin), Domain({**{c.name: c for c in domain.columns}, "coin": [0, 1]}))


def analysis_frame(frame, domain):
    """The analyst's columns: age at its bucket midpoint, coin as 0/1."""
    import pandas as pd

    age = domain.midpoints("age")[frame["age"].cat.codes.to_numpy()] if hasattr(frame["age"], "cat") \
        else domain.midpoints("age")[pd.Categorical(frame["age"], categories=domain["age"].categories).codes]
    coin = np.asarray(frame["coin"]).astype(float)
    return frame.assign(age=age, coin=coin)


def test_rejects(frames, domain, n: int) -> dict[str, bool | None]:
    """Rubin's rules (analyze's defaults), T_p and the first dataset alone: does each reject H0?"""
    from synthinfer.analysis import analyze

    data = [analysis_frame(f, domain) for f in frames]
    res = analyze(data, FORMULA, "logit", n=n, progress=False)
    j = list(res.params.index).index(TERM)
    lo, hi = res.conf_int(0.05).iloc[j]
    fits = [f for f in res.records if f.ok]  # each dataset's own estimate and variance of coin's coefficient
    q = np.array([[np.nan, np.asarray(f.params, dtype=float)[j]] for f in fits]).reshape(-1, 2)
    v = np.array([[np.nan, np.asarray(f.cov, dtype=float)[j, j]] for f in fits]).reshape(-1, 2)
    z = stats.norm.ppf(0.975)
    return {"mi": bool(not (lo <= 0.0 <= hi)) if np.isfinite(lo) and np.isfinite(hi) else None,
            "tp": partial_synthesis_rejects(q, v),
            "single": bool(abs(q[0, 1]) > z * np.sqrt(v[0, 1])) if np.isfinite(q[0, 1]) else None,
            "separated": len(res.separated)}


def real_rejects(data, domain) -> bool:
    """The real data's own Wald test of H0 (statsmodels' logit through analyze's model)."""
    import statsmodels.formula.api as smf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.logit(FORMULA.replace("income ~", "y ~"), analysis_frame(data, domain).assign(
            y=(data["income"].cat.codes.to_numpy() == 1).astype(float))).fit(disp=0)
    return bool(fit.pvalues[TERM] < 0.05)


def summarise(records: list[dict]) -> list[dict]:
    rows = []
    for eps in sorted({r["epsilon"] for r in records}):
        for method, label in METHODS.items():
            hits = [r["rejects"][method] for r in records if r["epsilon"] == eps and r["rejects"].get(method) is not None]
            if not hits:
                continue
            k, n = int(np.sum(hits)), len(hits)
            lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
            hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
            band = stats.binom.ppf([0.0005, 0.9995], n, 0.05) / n  # a 0.05-level test's 99.9% band
            rows.append({"method": method, "label": label, "epsilon": eps, "repeats": n, "rejections": k,
                         "rate": k / n, "ci95": [float(lo), float(hi)], "band_999": band.tolist(),
                         "not_above_band": bool(k / n <= band[1])})
    return rows


def write(out: str, payload: dict) -> None:
    """The records with their summary, and the summary's plot beside them (``.png``)."""
    payload["results"] = summarise(payload["records"])
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, out)
    plot(payload["results"], Path(out).with_suffix(".png"), METHODS,
         f"H0: beta_coin = 0 on DP synthetic Adult (m = {payload['m']}; 95% Clopper-Pearson intervals)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--merge", help="an earlier run's output whose repeats before --start are kept")
    ap.add_argument("--combine", help="comma-separated outputs to join into --out (no fitting)")
    ap.add_argument("--m", type=int, default=20, help="synthetic datasets per fit")
    ap.add_argument("--epsilons", default=",".join(str(e) for e in EPSILONS))
    ap.add_argument("--napsu-inference", default="laplace", help="NapsuMQ's inference for the noise-aware arm")
    ap.add_argument("--out", default=str(HERE / "results" / "type1_error_adult.json"))
    a = ap.parse_args()
    if a.combine:
        runs = [json.loads(Path(p).read_text()) for p in a.combine.split(",")]
        records = {(r["repeat"], r["epsilon"]): r for run in runs for r in run["records"]}
        write(a.out, {**runs[0], "command": [c for run in runs for c in run["command"]],
                      "records": [records[k] for k in sorted(records)]})
        return

    from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
    from synthinfer.generate import NapsuMQ, PrivBayes

    ds = load_adult(paper_subset=True)
    n = len(ds.data)
    marginals = list(ADULT_PAPER_MARGINALS) + [("coin", "income")]
    epsilons = [float(e) for e in a.epsilons.split(",")]
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    records = [r for r in json.loads(Path(a.merge).read_text())["records"] if r["repeat"] < a.start] if a.merge else []
    payload = {"command": [" ".join(["python", *sys.argv])], "alpha": 0.05, "n": n, "m": a.m,
               "null": "beta_coin = 0 (a fair coin independent of every row)", "formula": FORMULA,
               "marginals": [list(m) for m in marginals], "napsu_inference": a.napsu_inference, "records": records}
    for r in range(a.start, a.start + a.repeats):
        data, domain = with_coin(ds.data, ds.domain, np.random.default_rng([r, 4242]))
        real = real_rejects(data, domain)
        for eps in epsilons:
            t0, c0 = time.perf_counter(), time.process_time()
            rejects, separated = {"real": real}, {}
            for kind in ("napsu", "mle", "privbayes"):
                rng = np.random.default_rng([r, int(eps * 100), {"napsu": 0, "mle": 1, "privbayes": 2}[kind]])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if kind == "privbayes":
                        gen = PrivBayes(epsilon=eps, seed=rng).fit(data, domain)
                    else:
                        gen = NapsuMQ(marginals, epsilon=eps, delta=n**-2.0, seed=rng,
                                      inference=a.napsu_inference if kind == "napsu" else "mle").fit(data, domain)
                    out = test_rejects(gen.generate(a.m, seed=rng), domain, n)
                rejects[f"{kind}_mi"] = out["mi"]
                separated[kind] = out["separated"]
                if kind != "napsu":
                    rejects[f"{kind}_tp"], rejects[f"{kind}_single"] = out["tp"], out["single"]
            records.append({"repeat": r, "epsilon": eps, "rejects": rejects, "separated_datasets": separated,
                            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                            "loadavg": os.getloadavg(), "code": code})
            write(a.out, payload)
            print(f"repeat {r} eps {eps}: {rejects} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
