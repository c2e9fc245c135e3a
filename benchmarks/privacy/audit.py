"""Large threshold audit of the count mechanisms (the CI audit, at 10^6 draws per side).

For the discrete Gaussian and discrete Laplace mechanisms (what NAPSU-MQ, MST and PrivBayes
release counts with), the worst-case neighbouring pair of marginal counts (one row substituted:
two cells move by one in each of ``n_s`` marginals) is released through
:func:`synthinfer.privacy.discrete_gaussian_mechanism` /
:func:`~synthinfer.privacy.discrete_laplace_mechanism` at the declared sensitivity, and at half
of it (a deliberately broken mechanism). The draws come from the samplers' seeded test stream
(the same laws as OpenDP's exact samplers, which would take hours at this size); ``--exact``
draws them through OpenDP instead (use fewer ``--draws``). The result is
the Clopper-Pearson lower bound on epsilon (confidence 1 - 2 alpha, alpha = 1e-3) next to the
declared epsilon: a sound mechanism stays below it, the broken one does not.

Run from the repository root::

    PYTHONPATH=src python benchmarks/privacy/audit.py --out benchmarks/privacy/results/audit.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from privacy_audit import audit_additive  # noqa: E402


def pair(n_marginals: int, cells: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """Counts of ``n_marginals`` marginals on D and on the worst-case neighbour."""
    f_d = np.tile(np.arange(cells, dtype=float) * 10, n_marginals)
    f_n = f_d.copy()
    for k in range(n_marginals):
        f_n[k * cells] -= 1
        f_n[k * cells + 1] += 1
    return f_d, f_n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1_000_000, help="draws per side (pilot and evaluation each)")
    ap.add_argument("--exact", action="store_true", help="draw through OpenDP's exact samplers (slow)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if not args.exact:
        # the samplers' test stream refuses to run outside a test; this script is one (no release)
        os.environ.setdefault("PYTEST_CURRENT_TEST", "benchmarks/privacy/audit.py")
    rows = []
    # "discrete_gaussian_pld": the calibration NAPSU-MQ and MST use (unit_changes = 2 n_s; half the
    # sensitivity is a quarter of the unit changes, hence n_s in {2, 4})
    for kind, epsilons, delta, n_ss in (("discrete_gaussian", (0.1, 1.0, 4.0), 1e-6, (1, 3)),
                                        ("discrete_gaussian_pld", (0.1, 1.0, 4.0), 1e-6, (2, 4)),
                                        ("discrete_laplace", (0.1, 1.0, 4.0), 0.0, (1, 3))):
        for n_s in n_ss:
            f_d, f_n = pair(n_s)
            gaussian = kind.startswith("discrete_gaussian")
            sens = float(np.linalg.norm(f_d - f_n)) if gaussian else float(np.abs(f_d - f_n).sum())
            for eps in epsilons:
                for factor, label in ((1.0, "declared"), (0.5, "half (broken)")):
                    t0 = time.perf_counter()
                    extra = {"unit_changes": round(2 * n_s * factor**2)} if kind.endswith("_pld") else {}
                    lb = audit_additive(kind.removesuffix("_pld"), f_d, f_n, sensitivity=sens * factor, epsilon=eps,
                                        delta=delta, draws=args.draws, seed=len(rows), exact=args.exact, **extra)
                    rows.append({"mechanism": kind, "marginals": n_s, "sensitivity": sens, "noise_for": label,
                                 "epsilon": eps, "delta": delta, "epsilon_lower_bound": lb,
                                 "violation": lb > eps, "seconds": round(time.perf_counter() - t0, 2)})
                    print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"draws_per_side": args.draws, "alpha": 1e-3, "exact_samplers": args.exact,
                                    "results": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
