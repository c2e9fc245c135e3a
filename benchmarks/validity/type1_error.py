"""Type I error of a standard test on DP synthetic data under a true null (after Perez et al. 2024,
"Does differentially private synthetic data lead to synthetic discoveries?").

The toy data of the NAPSU-MQ study (``benchmarks/napsu/toy_coverage.py``: n = 2000 binary rows,
y ~ Bernoulli(sigmoid(x1)), so y is independent of x2 given x1). The test: H0 beta_x2 = 0 in the
logistic regression of y on (x1, x2) without intercept, at alpha = 0.05, from m = 100 synthetic
datasets by Rubin's rules for synthetic data (or from one dataset, analysed as if real). Its
rejection rate is 1 - the 95% coverage of beta_x2, so the NAPSU-MQ rows are read from the toy
study's records; PrivBayes (not noise-aware; its m datasets are drawn from one fit, then
Rubin's rules) is run here on the same data seeds.

The baselines run here on the same data seeds, each from one fit and m datasets: PrivBayes,
the MLE (PGM) point estimate of NAPSU-MQ's model and DP-GAN, each combined by Rubin's rules for
fully synthetic data, by the rule Nombo & Charest (2024) study for DP synthetic data
(``T_p = u_bar + b / m``, Reiter's rule for partially synthetic data, with
``nu = (m - 1)(1 + m u_bar / b)^2``), and one dataset analysed as if real; and NAPSU-MQ with
the vetted noise at the epsilons the toy study lacks (4).

    PYTHONPATH=src python benchmarks/validity/type1_error.py --repeats 200 --dpgan-repeats 40

writes ``results/type1_error.json`` and ``.png``: per method and epsilon the rejection rate,
its 95% Clopper-Pearson interval and whether it lies in the binomial band of a 0.05-level test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

HERE = Path(__file__).resolve().parent
TOY = HERE.parent / "napsu" / "results"
sys.path.insert(0, str(HERE.parent / "napsu"))
from toy_coverage import M, N, cell_counts, grouped_logit  # noqa: E402

EPSILONS = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 100.0]
DPGAN_EPSILONS = [0.5, 1.0, 4.0]
LABELS = {
    "napsu_laplace": "NAPSU-MQ (Laplace), noise-aware, Rubin",
    "napsu_laplace_vetted": "NAPSU-MQ (Laplace), OpenDP noise + PLD, Rubin",
    "napsu_nuts": "NAPSU-MQ (NUTS), noise-aware, Rubin",
    "napsu_laplace_not_noise_aware": "NAPSU-MQ, not noise-aware, Rubin",
    "mle_mi": "MLE (PGM) + repeated datasets, Rubin",
    "mle_tp": "MLE (PGM) + repeated datasets, T_p (Nombo & Charest)",
    "mle_single": "MLE, one dataset as if real",
    "privbayes_mi": "PrivBayes + repeated datasets, Rubin",
    "privbayes_tp": "PrivBayes + repeated datasets, T_p (Nombo & Charest)",
    "privbayes_single": "PrivBayes, one dataset as if real",
    "dpgan_mi": "DP-GAN + repeated datasets, Rubin",
    "dpgan_tp": "DP-GAN + repeated datasets, T_p (Nombo & Charest)",
    "dpgan_single": "DP-GAN, one dataset as if real",
}


def toy_rejections() -> dict[tuple[str, float], list[bool]]:
    """Rejections of H0 beta_x2 = 0 from the toy study's records (later files win per repeat)."""
    records = {}
    for f in [TOY / "toy_coverage.json", *sorted(TOY.glob("toy_coverage_part*.json"))]:
        if f.exists():
            for r in json.loads(f.read_text())["records"]:
                records[(r["repeat"], r["epsilon"], r["method"])] = r
    vetted = TOY / "toy_coverage_vetted.json"  # the rerun with OpenDP's discrete noise
    if vetted.exists():
        for r in json.loads(vetted.read_text())["records"]:
            records[(r["repeat"], r["epsilon"], r["method"] + "_vetted")] = r
    out: dict[tuple[str, float], list[bool]] = {}
    for (_, eps, method), r in records.items():
        lo, hi = r["lower"][1], r["upper"][1]
        if np.isfinite(lo) and np.isfinite(hi):
            out.setdefault((method, eps), []).append(not (lo <= 0.0 <= hi))
    return out


def partial_synthesis_rejects(q: np.ndarray, v: np.ndarray, alpha: float = 0.05) -> bool | None:
    """Whether the T_p interval of Nombo & Charest (2024) misses 0 for the second estimand:
    ``q_bar +- t_nu sqrt(u_bar + b / m)``, ``nu = (m - 1)(1 + m u_bar / b)^2`` (Reiter 2003's rule
    for partially synthetic data). None where fewer than 2 datasets gave an estimate."""
    ok = np.isfinite(q[:, 1]) & np.isfinite(v[:, 1])
    qs, vs = q[ok, 1], v[ok, 1]
    m = qs.size
    if m < 2:
        return None
    u_bar, b = vs.mean(), qs.var(ddof=1)
    t_p = u_bar + b / m
    nu = (m - 1) * (1 + m * u_bar / b) ** 2 if b > 0 else np.inf
    return bool(abs(qs.mean()) > stats.t.ppf(1 - alpha / 2, nu) * np.sqrt(t_p))


def _fit(kind: str, eps: float, data, dom, rng: np.random.Generator):
    from synthinfer.generate import DPGAN, NapsuMQ, PrivBayes

    if kind == "privbayes":
        return PrivBayes(epsilon=eps, seed=rng).fit(data, dom)
    if kind == "dpgan":
        return DPGAN(epsilon=eps, seed=rng).fit(data, dom)
    inference = "mle" if kind == "mle" else "laplace"
    return NapsuMQ([("x1", "x2", "y")], epsilon=eps, delta=N**-2.0, inference=inference, seed=rng).fit(data, dom)


def baseline_rejections(kind: str, repeats: int, epsilons: list[float]) -> dict[tuple[str, float], list[bool]]:
    """Rejections of H0 by ``kind`` ("privbayes", "mle", "dpgan": Rubin, T_p and one dataset;
    "napsu": noise-aware NAPSU-MQ with the vetted noise, Rubin) on the toy study's data seeds."""
    from synthinfer.analysis import rubins_rules
    from synthinfer.datasets import make_toy_logistic

    out: dict[tuple[str, float], list[bool]] = {}
    dom = make_toy_logistic(1, (1.0, 0.0), seed=0).domain
    z = stats.norm.ppf(0.975)
    salt = {"privbayes": 0, "mle": 1, "dpgan": 2, "napsu": 3}[kind]
    for r in range(repeats):
        data = make_toy_logistic(N, (1.0, 0.0), seed=10_000 + r).data
        for eps in epsilons:
            rng = np.random.default_rng([r, int(eps * 100)] + ([salt] if salt else []))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gen = _fit(kind, eps, data, dom, rng)
                q, v = grouped_logit(cell_counts(gen.generate(M, seed=rng)))
                res = rubins_rules(q, v, n=N, n_syn=N)
            lo, hi = res.conf_int(0.05)[1]
            name = "napsu_laplace_vetted" if kind == "napsu" else f"{kind}_mi"
            if np.isfinite(lo) and np.isfinite(hi):
                out.setdefault((name, eps), []).append(not (lo <= 0.0 <= hi))
            if kind == "napsu":
                continue
            tp = partial_synthesis_rejects(q, v)
            if tp is not None:
                out.setdefault((f"{kind}_tp", eps), []).append(tp)
            if np.isfinite(q[0, 1]):
                out.setdefault((f"{kind}_single", eps), []).append(abs(q[0, 1]) > z * np.sqrt(v[0, 1]))
        print(f"{kind} repeat {r + 1}/{repeats}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200,
                    help="PrivBayes and MLE repeats, and NAPSU-MQ's at epsilon 4 (the toy study's are read)")
    ap.add_argument("--dpgan-repeats", type=int, default=40, help="DP-GAN repeats (about 15 s per fit)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "type1_error.json")
    a = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    rej = toy_rejections()
    missing = [e for e in EPSILONS if ("napsu_laplace_vetted", e) not in rej]
    rej.update(baseline_rejections("napsu", a.repeats, missing))
    rej.update(baseline_rejections("privbayes", a.repeats, EPSILONS))
    rej.update(baseline_rejections("mle", a.repeats, EPSILONS))
    rej.update(baseline_rejections("dpgan", a.dpgan_repeats, DPGAN_EPSILONS))
    rows = []
    for (method, eps), r in sorted(rej.items(), key=lambda kv: (list(LABELS).index(kv[0][0]), kv[0][1])):
        k, n = int(np.sum(r)), len(r)
        lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
        hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
        band = stats.binom.ppf([0.0005, 0.9995], n, 0.05) / n  # a 0.05-level test's 99.9% band
        rows.append({"method": method, "label": LABELS[method], "epsilon": eps, "repeats": n, "rejections": k,
                     "rate": k / n, "ci95": [float(lo), float(hi)], "band_999": band.tolist(),
                     # valid means not above the band; below it is a conservative test
                     "not_above_band": bool(k / n <= band[1]),
                     "within_band": bool(band[0] <= k / n <= band[1])})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({
        "alpha": 0.05, "n": N, "m": M, "null": "beta_x2 = 0 (y independent of x2 given x1)",
        "command": "PYTHONPATH=src python benchmarks/validity/type1_error.py --repeats "
                   f"{a.repeats} --dpgan-repeats {a.dpgan_repeats}",
        "sources": {"napsu_* except vetted": "benchmarks/napsu/results/toy_coverage*.json (numpy noise, 2026-11-22 code)",
                    "napsu_laplace_vetted": "benchmarks/napsu/results/toy_coverage_vetted.json (OpenDP noise), "
                                            f"this run at epsilon {missing}",
                    "privbayes_*, mle_*, dpgan_*": "this run (mle_mi and mle_single replace the toy study's)"},
        "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "loadavg": os.getloadavg(),
        "results": rows}, indent=1) + "\n")
    plot(rows, a.out.with_suffix(".png"))
    for r in rows:
        print(f"{r['label']:45s} eps {r['epsilon']:6g}: {r['rate']:.3f} ({r['rejections']}/{r['repeats']})")


def plot(rows: list[dict], path: Path, labels: dict[str, str] = LABELS,
         title: str = "H0: beta_x2 = 0 on DP synthetic toy data (95% Clopper-Pearson intervals)") -> None:
    """Rejection rate against epsilon per method (``labels``: method -> legend text), with 95%
    Clopper-Pearson intervals; colour: the generator, line: the combining rule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # colour: the generator; line: the combining rule (solid Rubin, dashed T_p, dotted one dataset)
    colours = {"napsu_laplace": "tab:blue", "napsu_laplace_vetted": "tab:cyan", "napsu_nuts": "tab:green",
               "napsu_laplace_not_noise_aware": "tab:gray", "napsu": "tab:blue", "mle": "tab:purple",
               "privbayes": "tab:olive", "dpgan": "tab:red", "real": "black"}
    fig, ax = plt.subplots(figsize=(9, 5))
    for method, label in labels.items():
        rs = [r for r in rows if r["method"] == method]
        if rs:
            family = method if method in colours else method.rsplit("_", 1)[0]
            style = {"tp": "--", "single": ":"}.get(method.rsplit("_", 1)[-1], "-")
            e = [r["epsilon"] for r in rs]
            ax.errorbar(e, [r["rate"] for r in rs], yerr=np.abs(np.array([r["ci95"] for r in rs]).T
                                                                 - [r["rate"] for r in rs]),
                        marker="o", ms=4, capsize=2, color=colours[family], ls=style, label=label)
    ax.axhline(0.05, color="k", lw=1)
    ax.set(xscale="log", ylim=(0, 1), xlabel="epsilon", ylabel="type I error at alpha = 0.05", title=title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
