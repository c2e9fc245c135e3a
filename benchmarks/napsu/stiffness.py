"""Which coordinates set NUTS's step size on Adult? (diagnostic for the one-sided map)

Fits the Adult model of ``adult_coverage.py`` (epsilon 1, seed 1, Laplace), builds the NUTS
target exactly as :func:`synthinfer.napsu.nuts.nuts_sample` does (one-sided map +
Laplace whitening), runs one chain's window adaptation (400 steps) and 200 NUTS draws, and at
5 of those draws computes the Hessian ``H`` of ``-log p(u)`` (central differences of the
compiled gradient). Scaled by the adapted diagonal inverse mass matrix ``M^-1``, the largest
eigenvalue ``lambda`` of ``M^-1/2 H M^-1/2`` bounds the stable leapfrog step (``< 2 /
sqrt(lambda)``); the script records it, the share of its eigenvector on map-flagged
coordinates, and for the stiffest coordinate its ``phi``, ``T'(phi)`` and noisy count.

    PYTHONPATH=src python benchmarks/napsu/stiffness.py

Output: ``results/stiffness.json``.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from synthinfer._jax import jax, jnp, single_threaded_blas
from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult
from synthinfer.errors import ConvergenceWarning
from synthinfer.generate import NapsuMQ
from synthinfer.napsu import likelihood
from synthinfer.napsu.reparam import _log_t_prime, one_sided_map, to_theta


def main() -> None:
    import blackjax

    warnings.simplefilter("ignore", ConvergenceWarning)
    ds = load_adult(paper_subset=True)
    n = len(ds.data)
    gen = NapsuMQ(ADULT_PAPER_MARGINALS, epsilon=1.0, delta=n**-2.0, inference="laplace", cell_prior=0.0,
                  seed=1).fit(ds.data, ds.domain)
    lap, mc = gen.laplace_, gen.network_.mean_and_cov
    s = np.asarray(gen.noisy_counts_)
    mu_mode = np.asarray(mc(jnp.asarray(lap.mean))[0])
    umap = one_sided_map(s, gen.sigma_dp_, n, mu_mode, lap.mean, lap.cov, prior_sd=gen.prior_sd,
                         dropped_jacobian=np.asarray(gen.network_.dropped_cell_log_prob_jacobian(jnp.asarray(lap.mean))))
    arrays = umap.arrays()
    args = likelihood.posterior_args(s, gen.sigma_dp_, n, gen.prior_sd)

    def logdensity(u):
        theta, log_jac = to_theta(u, arrays)
        return likelihood.log_posterior(theta, *args[:3], mc, args[3]) + log_jac

    grad = jax.jit(jax.grad(logdensity))

    def neg_hessian(u: np.ndarray, h: float = 1e-5) -> np.ndarray:
        d = u.size
        out = np.empty((d, d))
        for i in range(d):
            e = np.zeros(d)
            e[i] = h
            out[i] = (np.asarray(grad(jnp.asarray(u + e))) - np.asarray(grad(jnp.asarray(u - e)))) / (2 * h)
        return -0.5 * (out + out.T)

    t0 = time.perf_counter()
    with single_threaded_blas():
        warm = blackjax.window_adaptation(blackjax.nuts, logdensity, target_acceptance_rate=0.8)
        (state, params), _ = jax.jit(lambda k, x: warm.run(k, x, num_steps=400))(
            jax.random.key(0), jnp.asarray(umap.to_u(lap.mean)))
        step = jax.jit(blackjax.nuts(logdensity, **params).step)
        draws, key = [], jax.random.key(1)
        for _ in range(200):
            key, k = jax.random.split(key)
            state, _ = step(k, state)
            draws.append(np.asarray(state.position))
        imm = np.asarray(params["inverse_mass_matrix"])
        rows = []
        for j in (0, 50, 100, 150, 199):
            u = draws[j]
            scaled = np.sqrt(imm)[:, None] * neg_hessian(u) * np.sqrt(imm)[None, :]
            w, v = np.linalg.eigh(scaled)
            c = int(np.argmax(np.diag(scaled)))
            rows.append({
                "draw": j, "lambda_max": float(w[-1]), "stable_step_bound": float(2 / np.sqrt(w[-1])),
                "top_eigvec_share_on_flagged": float((v[umap.mask, -1] ** 2).sum()),
                "stiffest_coordinate": c, "flagged": bool(umap.mask[c]), "phi": float(u[c]),
                "t_prime": float(np.exp(_log_t_prime(jnp.asarray(u[c]), jnp.asarray(umap.kappa[c])))) if umap.mask[c] else 1.0,
                "noisy_count": float(s[c]), "noise_sd": float(gen.sigma_dp_),
                "max_scaled_diag_flagged": float(np.diag(scaled)[umap.mask].max()),
                "max_scaled_diag_rest": float(np.diag(scaled)[~umap.mask].max()),
            })
    payload = {"command": "python benchmarks/napsu/stiffness.py", "adapted_step_size": float(params["step_size"]),
               "flagged": int(umap.n_one_sided), "rows": rows, "seconds": time.perf_counter() - t0,
               "loadavg": os.getloadavg()}
    out = Path("benchmarks/napsu/results/stiffness.json")
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, out)
    print(json.dumps(payload, indent=1))


if __name__ == "__main__":
    from synthinfer import float64

    with float64():  # the script calls lower-level JAX code (network passes, likelihoods) directly
        main()
