"""The interaction prior's sd times SD on the slope and product parameters whose cells hold fewer
than K real rows (``K = inf``: every slope; the coarse cells' interactions keep
``--interaction-sd``), with no privacy noise drawn (the likelihood keeps epsilon's noise sd):
what the prior alone does. ``NOISY=1`` draws the noise as usual. ``SCRIPT=framingham_ols`` runs
Framingham's OLS instead of Adult's logit (``continuous_fine_coarse``); the other arguments go
to that script. A diagnosis that reads the real counts, never a release.

    PYTHONPATH=src python benchmarks/napsu/results/slope_prior_diagnosis/slope_prior.py SD K --outcome coarse \
        --coarse-interactions linear --inference laplace --fine-width 3 --pair-of-numbers --m 20 --out /tmp/x.json
    SCRIPT=framingham_ols PYTHONPATH=src python .../slope_prior.py SD inf --epsilon 1 --design tails3 --m 0 \
        [--interaction-sd 5] [--cell-prior 0] --out /tmp/x.json
"""
import os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/napsu
from synthinfer.napsu import likelihood, interactions
from synthinfer.privacy import samplers
from synthinfer.generate import NapsuMQ
import jax.numpy as jnp

sd_sparse, k_rows = float(sys.argv[1]), float(sys.argv[2])
if not os.environ.get("NOISY"):  # NOISY=1: draw the privacy noise as usual
    samplers.discrete_gaussian = lambda counts, scale: samplers.as_counts(counts)
state = {}
orig_fit = NapsuMQ.fit
def fit(self, data, domain=None, ledger=None):
    state["df"] = data
    return orig_fit(self, data, domain, ledger)
NapsuMQ.fit = fit
orig_init = interactions.InteractionFeatures.__init__
def init(self, *a, **k):
    orig_init(self, *a, **k)
    sparse = np.asarray(self.is_slope).copy()
    if np.isfinite(k_rows):  # only the slopes whose cells hold fewer than K real rows
        qs = self.canonical.queryset
        counts, off = qs.count(state["df"][list(qs.domain.names)]), qs.offsets()
        for i in np.flatnonzero(sparse):
            sparse[i] = counts[off[int(self.query_marginal[i])] + self.cells[i]].sum() < k_rows
    state["scale"] = np.where(sparse, sd_sparse, 1.0)
    print(f"slopes: {int(self.is_slope.sum())}, prior sd times {sd_sparse}: {int(sparse.sum())} "
          f"(cells with < {k_rows:g} rows)", flush=True)
interactions.InteractionFeatures.__init__ = init
def patched(lam, is_interaction, prior_sd, interaction_sd):
    sc = jnp.asarray(state["scale"])
    sd = jnp.where(jnp.asarray(is_interaction), interaction_sd * sc, prior_sd)
    return -0.5 * jnp.sum((lam / sd) ** 2) - jnp.sum(jnp.log(sd)) - 0.5 * lam.shape[0] * likelihood._LOG_2PI
likelihood.log_interaction_prior = patched
import importlib
script = os.environ.get("SCRIPT", "continuous_fine_coarse")
sys.argv = [script + ".py", *sys.argv[3:]]
importlib.import_module(script).main()
