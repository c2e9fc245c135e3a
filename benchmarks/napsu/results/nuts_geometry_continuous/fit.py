"""Fit the continuous-Adult NAPSU-MQ model with NUTS (as continuous_fine_coarse.py --outcome coarse
--coarse-interactions linear --inference nuts --fine-width 3), capture nuts_sample's inputs, save
draws/Laplace/per-parameter info, probe tree depths with fixed adapted settings, and run one remedy
NUTS fit (re-whitened with the draws' covariance)."""
import sys, time, pickle, json, warnings
from pathlib import Path
import numpy as np
OUT = Path("/work/runs/s51/helper_nuts")
sys.path.insert(0, "/work/runs/s51/wt/benchmarks/napsu")
import continuous_coverage as cc
import continuous_fine_coarse as cfc
warnings.simplefilter("ignore")
import synthinfer.napsu.nuts as nutsmod
from synthinfer.generate import NapsuMQ

captured = {}
_orig = nutsmod.nuts_sample
def spy(*args, **kw):
    captured.setdefault("calls", []).append((args, kw))
    res = _orig(*args, **kw)
    captured.setdefault("results", []).append(res)
    return res
nutsmod.nuts_sample = spy

marginals = [(c + "_g", "income") if (c in cfc.FINE and o == "income") else (c, o) for c, o in cfc.MARGINALS] + \
    [(c,) for c in cfc.FINE]
df, _ = cc.load()
domain = cfc.fine_domain(1, 3)
t = time.perf_counter()
gen = NapsuMQ(marginals, epsilon=1.0, inference="nuts", interaction_sd=1.0, coarse_interactions="linear",
              seed=0).fit(df, domain)
print("fit seconds", time.perf_counter() - t, flush=True)
args, kw = captured["calls"][-1]
res = captured["results"][-1]
network, s_tilde, sigma_dp, n, lap = args
q = network.queries
layout = kw.get("layout")
from synthinfer.napsu.structured import canonical_summary
s_map, sigma_map = ((s_tilde, sigma_dp) if layout is None
                    else canonical_summary(q.canonical, layout, s_tilde, sigma_dp))
s_par, sd_par = q.summarise(s_map, sigma_map)
# describe each parameter
desc = q.canonical.describe()
params = []
for p in range(q.dimension):
    mem = q.members[p] if hasattr(q, "members") else np.array([p])
    m = q.marginals[int(q.query_marginal[p])]
    params.append({"p": p, "marginal": list(m.columns), "order": int(q.order[p]) if hasattr(q, "order") else None,
                   "slope": bool(q.is_slope[p]) if hasattr(q, "is_slope") else False,
                   "n_members": int(len(mem)),
                   "cells": [list(map(str, desc[int(j)][1])) for j in mem][:6],
                   "count": float(s_par[p]), "sd": float(sd_par[p])})
np.savez(OUT / "fit1.npz", draws=res.draws, diverging=res.diverging, step_size=res.step_size,
         mean=lap.mean, cov=lap.cov, chol=lap.chol, s_par=s_par, sd_par=sd_par)
(OUT / "params.json").write_text(json.dumps(params))
diag = {k: v for k, v in gen.diagnostics_.items() if k in ("nuts", "laplace", "draws", "timings")}
(OUT / "diag1.json").write_text(json.dumps(diag, default=str, indent=1))
print(json.dumps(diag["nuts"], default=str), flush=True)
print("n_calls", len(captured["calls"]), "kw", {k: v for k, v in kw.items() if k not in ("rng", "progress", "converged")}, flush=True)
with open(OUT / "captured_kw.pkl", "wb") as f:
    pickle.dump({k: v for k, v in kw.items() if k in ("prior_sd", "cell_prior", "interaction_sd", "max_tree_depth",
                                                       "target_accept", "num_warmup", "num_samples", "one_sided_threshold",
                                                       "jump_moves")}, f)

# ---------------- probe: tree depth / acceptance at the adapted step size, and Hessians -----------
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
import blackjax.mcmc.nuts as bnuts
from synthinfer.napsu.likelihood import objective, posterior_args
nlp = objective(network, "neg_log_posterior", layout)[0]
pargs = posterior_args(s_tilde, sigma_dp, n, kw["prior_sd"], kw.get("cell_prior", 0.0), kw.get("interaction_sd"))
L = jnp.asarray(lap.chol); mu = jnp.asarray(lap.mean)
def logdens_z(z):
    return -nlp(mu + L @ z, *pargs)
draws = res.draws
C, S, d = draws.shape
Z = np.linalg.solve(lap.chol, (draws.reshape(-1, d) - lap.mean).T).T.reshape(C, S, d)
np.save(OUT / "z1.npy", Z)
kernel = bnuts.build_kernel()
@jax.jit
def one_step(key, state, eps, inv_m):
    st, info = kernel(key, state, logdens_z, eps, inv_m, max_num_doublings=12)
    return st, info.num_integration_steps, info.acceptance_rate, info.num_trajectory_expansions, info.is_divergent
probe = {}
key = jax.random.key(123)
t = time.perf_counter()
for c in range(C):
    var = Z[c].var(0)
    inv_m = jnp.asarray(var * S / (S + 5) + 1e-3 * 5 / (S + 5))  # Stan-style regularised diagonal
    state = bnuts.init(jnp.asarray(Z[c, -1]), logdens_z)
    rows = []
    for i in range(40):
        key, k = jax.random.split(key)
        state, ns, acc, depth, div = one_step(k, state, res.step_size[c], inv_m)
        rows.append((int(ns), float(acc), int(depth), bool(div)))
    probe[c] = rows
    print("probe chain", c, "steps", [r[0] for r in rows], "mean acc", np.mean([r[1] for r in rows]), flush=True)
print("probe seconds", time.perf_counter() - t, flush=True)
(OUT / "probe1.json").write_text(json.dumps(probe))

# Hessian of -log density in z at the mode and at some draws: curvature in mass-matrix-scaled coords
hess = jax.jit(jax.hessian(lambda z: -logdens_z(z)))
inv_m_all = Z.reshape(-1, d).var(0)
pts = {"mode": np.zeros(d)}
rng = np.random.default_rng(0)
flat = Z.reshape(-1, d)
for i, j in enumerate(rng.choice(flat.shape[0], 12, replace=False)):
    pts[f"draw{j}"] = flat[j]
hres = {}
t = time.perf_counter()
for name, z in pts.items():
    H = np.asarray(hess(jnp.asarray(z)))
    sH = np.sqrt(inv_m_all)[:, None] * H * np.sqrt(inv_m_all)[None, :]
    w, V = np.linalg.eigh(sH)
    hres[name] = {"eig_top": w[-10:].tolist(), "eig_bottom": w[:5].tolist(),
                  "top_vec_big": np.argsort(-np.abs(V[:, -1]))[:8].tolist(),
                  "top_vec_w": V[np.argsort(-np.abs(V[:, -1]))[:8], -1].tolist(),
                  "diag_top": np.argsort(-np.diag(sH))[:10].tolist(), "diag_top_val": np.sort(np.diag(sH))[-10:][::-1].tolist()}
    print(name, "top eig", np.round(w[-5:], 2), "min", np.round(w[:3], 3), flush=True)
print("hessian seconds", time.perf_counter() - t, flush=True)
(OUT / "hess1.json").write_text(json.dumps(hres))

# ---------------- remedy: re-whiten with the draws' covariance ------------------------------------
from synthinfer.napsu.laplace import LaplaceResult
flat_t = draws.reshape(-1, d)
cov2 = np.cov(flat_t, rowvar=False)
lap2 = LaplaceResult(mean=lap.mean, cov=cov2, chol=np.linalg.cholesky(cov2), optim=lap.optim, seconds=0.0)
kw2 = dict(kw); kw2.pop("progress", None); kw2["converged"] = None; kw2["max_passes"] = 1
kw2["rng"] = np.random.default_rng(1)
t = time.perf_counter()
res2 = _orig(network, s_tilde, sigma_dp, n, lap2, **kw2)
total_draws = res2.draws.shape[0] * (kw2["num_warmup"] + res2.draws.shape[1])
print("REMEDY rewhiten: seconds", time.perf_counter() - t, "step", res2.step_size, "grads/draw",
      res2.n_grad_evals / total_draws, "sampling grads/draw", (res2.n_grad_evals - res2.n_grad_evals_warmup) / res2.draws[:, :].size * d,
      "div", int(res2.diverging.sum()), flush=True)
np.savez(OUT / "fit2.npz", draws=res2.draws, step_size=res2.step_size, diverging=res2.diverging,
         n_grad=res2.n_grad_evals, n_grad_warm=res2.n_grad_evals_warmup)
