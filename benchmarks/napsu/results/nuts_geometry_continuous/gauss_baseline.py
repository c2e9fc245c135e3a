"""Baseline: BlackJAX NUTS with Stan window adaptation (diagonal) on a d=339 Gaussian: identity, and
a Gaussian with the covariance of the real fit's whitened draws z (so the only difference from the
real posterior is non-Gaussianity)."""
import sys, numpy as np, jax, jax.numpy as jnp, blackjax
jax.config.update("jax_enable_x64", True)
d = 339
Z = np.load("/work/runs/s51/helper_nuts/z1.npy").reshape(-1, d)
Cz = np.cov(Z, rowvar=False)
for name, cov in (("identity", np.eye(d)), ("cov(z) of the fit's draws", Cz)):
    P = jnp.asarray(np.linalg.inv(cov))
    logdens = lambda x: -0.5 * x @ P @ x
    res = []
    for seed in range(2):
        wa = blackjax.window_adaptation(blackjax.nuts, logdens, is_mass_matrix_diagonal=True, target_acceptance_rate=0.8)
        (state, params), _ = wa.run(jax.random.key(seed), jnp.zeros(d), num_steps=400)
        kern = jax.jit(blackjax.nuts(logdens, **params).step)
        key = jax.random.key(100 + seed); steps = []
        for i in range(200):
            key, k = jax.random.split(key)
            state, info = kern(k, state)
            steps.append(int(info.num_integration_steps))
        res.append((float(params["step_size"]), np.mean(steps), np.bincount(steps)[np.bincount(steps) > 0].tolist(), sorted(set(steps))))
    print(name, [(round(r[0], 3), r[1], r[3]) for r in res], flush=True)
