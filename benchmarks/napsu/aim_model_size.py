"""The size of AIM's model on the full Adult table, with and without derived columns declared.

AIM's selection and measurement as ``NapsuMQ(ADULT_PAPER_MARGINALS, select_extra="aim")`` runs
them (epsilon 1, delta = n^-2, the all-2-way workload), then the model's canonical queries and
how many of them the samplers' one-sided map flags (a query whose combined measurements lie
within 5 noise sd of zero, :func:`synthinfer.napsu.reparam.one_sided_cells`), per measured
marginal. No posterior is fitted. Once per seed on ``adult_domain()`` and on
``adult_domain(derived=True)`` (education-num a function of education). AIM's noise is OpenDP's
and unseeded, so the numbers vary between runs.

    PYTHONPATH=src python benchmarks/napsu/aim_model_size.py --runs 3

writes ``results/aim_model_size.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def model_size(data, domain, epsilon: float) -> dict:
    from synthinfer.data import encode
    from synthinfer.datasets import ADULT_PAPER_MARGINALS
    from synthinfer.napsu.aim import select_aim
    from synthinfer.napsu.coarse import drop_contained
    from synthinfer.napsu.estimator import _model_marginals
    from synthinfer.napsu.reference import automatic_reference
    from synthinfer.napsu.network import network_for
    from synthinfer.napsu.reparam import one_sided_cells
    from synthinfer.napsu.structured import canonical_summary, measurement_layout
    from synthinfer.privacy import PrivacyBudget, PrivacyLedger

    full = domain
    domain = full.without_derived()
    codes = encode(data, full)[:, [full.index(c) for c in domain.names]]
    n = codes.shape[0]
    budget = PrivacyBudget(epsilon, n**-2.0)
    fixed = drop_contained(_model_marginals(ADULT_PAPER_MARGINALS, full))
    t0 = time.perf_counter()
    aim = select_aim(codes, domain, None, required=fixed, budget=budget, ledger=PrivacyLedger(budget))
    selection_s = time.perf_counter() - t0
    selected = [m for m in aim.marginals if not any(set(m.columns) < set(o.columns) for o in aim.marginals)
                and not any(set(m.columns) <= set(f.columns) for f in fixed)]
    network = network_for(domain, tuple(fixed) + tuple(selected), automatic_reference(aim.measurements, domain, "most_frequent"))
    q = network.queries
    y = np.concatenate([m.values for m in aim.measurements])
    sd = np.concatenate([np.full(m.values.size, m.variance**0.5) for m in aim.measurements])
    s, sig = canonical_summary(q, measurement_layout(aim.measurements, domain), y, sd)
    flag = one_sided_cells(s, sig)
    per: dict[str, list[int]] = {}
    for j in range(q.dimension):
        key = ",".join(q.queryset.marginals[q.query_marginal[j]].columns)
        per.setdefault(key, [0, 0])
        per[key][0] += 1
        per[key][1] += int(flag[j])
    return {"columns": len(domain), "d": int(q.dimension), "one_sided": int(flag.sum()), "rounds": len(aim.rounds),
            "selection_s": selection_s,
            "per_marginal": {k: {"queries": v[0], "one_sided": v[1]}
                             for k, v in sorted(per.items(), key=lambda kv: -kv[1][1])}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "aim_model_size.json")
    a = ap.parse_args()
    from synthinfer.datasets import adult_domain, load_adult

    ds = load_adult(categorical=True)
    out = {"command": f"PYTHONPATH=src python benchmarks/napsu/aim_model_size.py --runs {a.runs} --epsilon {a.epsilon}",
           "epsilon": a.epsilon, "n": len(ds.data), "loadavg_start": os.getloadavg(), "runs": []}
    for r in range(a.runs):
        for derived in (False, True):
            rec = {"run": r, "derived": derived, **model_size(ds.data, adult_domain(derived=derived), a.epsilon)}
            out["runs"].append(rec)
            print(f"run {r} derived={derived}: d = {rec['d']}, one-sided {rec['one_sided']}", flush=True)
    out["loadavg_end"] = os.getloadavg()
    for derived in (False, True):
        rs = [x for x in out["runs"] if x["derived"] == derived]
        out[f"summary_derived_{str(derived).lower()}"] = {
            "d": [x["d"] for x in rs], "one_sided": [x["one_sided"] for x in rs]}
    a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
