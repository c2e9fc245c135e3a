"""Diagnose the two modes at epsilon 100: capture the posterior problem, inspect the L-BFGS result, then Newton from the mode."""
from pathlib import Path
import sys, warnings
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/napsu
import framingham_ols as F
from synthinfer.napsu import backends
from synthinfer.napsu.likelihood import value_and_grad, posterior_args, gradients, batch_size
from synthinfer.napsu.optimize import hessian
from synthinfer._precision import float64
from synthinfer._jax import jnp
from synthinfer.generate import NapsuMQ

design, eps, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
cap = {}
orig = backends._laplace_fit
def spy(problem, settings, rng):
    cap["problem"] = problem
    return orig(problem, settings, rng)
backends._laplace_fit = spy
df, domain = F.table(design)
real = F.ols(df); rq, se = real.params.to_numpy(), real.bse.to_numpy()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    gen = NapsuMQ(F.marginals(), epsilon=eps, inference="laplace", coarse_interactions="bilinear", seed=seed).fit(df, domain)
print("warnings:", [str(x.message)[:150] for x in w])
lap = gen.laplace_
print("optim:", lap.optim.converged, lap.optim.n_iterations, lap.optim.n_restarts, lap.optim.grad_norm, lap.optim.attempts)
p = cap["problem"]
mode = F.model_at_mode(gen, df)
print("mode BMI err", ((np.asarray(mode["coef"]) - rq) / se).round(2))
with float64():
    vg = value_and_grad(p.network, "neg_log_posterior", p.layout)
    grads = gradients(p.network, "neg_log_posterior", layout=p.layout)
    args = posterior_args(p.noisy_counts, p.sigma, p.n, p.prior_sd, p.cell_prior, p.interaction_sd)
    x = np.asarray(lap.mean, dtype=float)
    for k in range(6):
        f, g = vg(jnp.asarray(x), *args); g = np.asarray(g)
        h = hessian(grads, x, args, batch=batch_size(p.network))
        step = np.linalg.solve(h, g)
        dec = 0.5 * g @ step
        print(f"newton {k}: loss {float(f):.6f} max|g| {np.abs(g).max():.3e} newton decrement {dec:.3e} |step| {np.abs(step).max():.3e}")
        # backtracking
        t = 1.0
        while t > 1e-4:
            fn, _ = vg(jnp.asarray(x - t * step), *args)
            if float(fn) < float(f): break
            t /= 2
        x = x - t * step
        gen.laplace_ = type(lap)(x, lap.cov, lap.chol, lap.optim, 0.0)
        mode = F.model_at_mode(gen, df)
        print("   t", t, "coef err", ((np.asarray(mode["coef"]) - rq) / se).round(2), "tails", {k: round(v[0]) for k, v in mode["tail_rows"].items()})
