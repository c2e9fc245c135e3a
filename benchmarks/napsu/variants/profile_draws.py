"""A variant backend, not shipped: the importance-sampling proposal's own draws, unweighted.

``inference="profile-draws"``: the Laplace fit, NUTS's one-sided map, and draws from
:func:`synthinfer.napsu.importance.build_proposal`'s proposal with a Gaussian (not Student-t)
part at scale 1: the Laplace approximation on the coordinates where the posterior is near
Gaussian and each other coordinate's exact 1-D conditional profile through the mode. No
weights, so no PSIS check: a candidate cheap sampler for models where importance sampling is
refused and NUTS takes hours. The record keeps the PSIS k-hat the draws would have had.

Measured with the Adult coverage study (docs/napsu-sampler.md, "At the scale of real tables"):

    PYTHONPATH=src python benchmarks/napsu/adult_coverage.py --plugin benchmarks/napsu/variants/profile_draws.py \\
        --inference profile-draws --epsilons 1.0 --out benchmarks/napsu/results/adult_coverage_profile_draws.json
"""

from __future__ import annotations

import time

import numpy as np

from synthinfer._jax import jnp
from synthinfer.napsu import importance
from synthinfer.napsu.backends import BackendResult, _laplace_fit, register_backend
from synthinfer.napsu.diagnostics import to_inference_data
from synthinfer.napsu.likelihood import posterior_args
from synthinfer.napsu.reparam import one_sided_map
from synthinfer.napsu.structured import canonical_summary


class ProfileDrawsBackend:
    name = "profile-draws"
    noise_aware = True
    takes_measurements = True

    def run(self, problem, settings, *, rng, progress, spare_core) -> BackendResult:
        lap = _laplace_fit(problem, settings, rng)
        t0 = time.perf_counter()
        net = problem.network
        mean = np.asarray(lap.mean)
        mu_mode = np.asarray(net.mean_and_cov(jnp.asarray(mean))[0])
        jd = np.asarray(net.dropped_cell_log_prob_jacobian(jnp.asarray(mean)))
        s_map, sd_map = ((problem.noisy_counts, problem.sigma) if problem.layout is None
                         else canonical_summary(net.queries, problem.layout, problem.noisy_counts, problem.sigma))
        umap = one_sided_map(s_map, sd_map, problem.n, mu_mode, mean, lap.cov, prior_sd=problem.prior_sd,
                             dropped_jacobian=jd)
        target = importance._TargetU(
            net, umap, posterior_args(problem.noisy_counts, problem.sigma, problem.n, problem.prior_sd), problem.layout)
        proposal = importance.build_proposal(target, umap, lap, df=1e9, scale=1.0)  # df 1e9: Gaussian
        u, log_q = proposal.sample(rng, settings.n_chains * settings.num_samples)
        log_p, theta = target(u)
        k_hat = importance._psis(log_p - log_q)[1]
        info = {"k_hat": float(k_hat), "one_sided": umap.n_one_sided, "profiled": len(proposal.axes),
                "seconds": time.perf_counter() - t0}
        draws = theta.reshape(settings.n_chains, settings.num_samples, -1)
        return BackendResult(to_inference_data(draws, attrs={"inference": self.name}),
                             {"laplace": lap.info(), "profile_draws": info},
                             {"laplace": lap.seconds, "profile_draws": info["seconds"]}, laplace=lap)


register_backend(ProfileDrawsBackend())
