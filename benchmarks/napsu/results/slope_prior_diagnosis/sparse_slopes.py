"""The slopes' prior sd at SD only where a slope's cells hold fewer than K real rows (the others at
the library's 1), with no privacy noise drawn (the likelihood keeps epsilon's noise sd). With
``NOISY=1`` the noise is drawn as usual. A diagnosis that reads the real counts, never a release: would dropping the slopes of near-empty
coarse cells remove the dilution?

    PYTHONPATH=src python benchmarks/napsu/results/slope_prior_diagnosis/sparse_slopes.py SD K --outcome coarse \
        --coarse-interactions linear --inference laplace --fine-width 3 --pair-of-numbers --m 20 --out /tmp/x.json
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
    qs = self.canonical.queryset
    counts = qs.count(state["df"][list(qs.domain.names)] if hasattr(qs.domain, "names") else state["df"])
    off = qs.offsets()
    scale = np.ones(self.dimension)
    rows = np.zeros(self.dimension)
    for i in np.flatnonzero(self.is_slope):
        m = int(self.query_marginal[i])
        rows[i] = counts[off[m] + self.cells[i]].sum()
        if rows[i] < k_rows:
            scale[i] = sd_sparse
    state["scale"] = scale
    print(f"slopes: {int(self.is_slope.sum())}, at sd {sd_sparse}: {int((scale != 1).sum())} (cells with < {k_rows:g} rows)", flush=True)
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
