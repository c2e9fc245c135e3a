"""framingham_ols.py with the interaction prior's sd multiplied by FACTOR on the slope and product
parameters only (the coarse cells' interactions keep --interaction-sd); with ZERO=1 in the
environment no privacy noise is drawn; SCRIPT=continuous_fine_coarse runs Adult's study instead (the likelihood keeps epsilon's noise sd): what the prior
alone does to the mode. A diagnosis, never a release.

    ZERO=1 PYTHONPATH=src python benchmarks/napsu/results/slope_prior_diagnosis/prior_attribution.py FACTOR \
        --epsilon 1 --design tails3 --m 0 [--interaction-sd 5] [--cell-prior 0] --out /tmp/x.json
"""
from pathlib import Path
import os
import sys
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/napsu
from synthinfer.napsu import likelihood, interactions
import jax.numpy as jnp

factor = float(sys.argv[1])
if os.environ.get("ZERO"):
    from synthinfer.privacy import samplers
    samplers.discrete_gaussian = lambda counts, scale: samplers.as_counts(counts)
state = {}
orig_init = interactions.InteractionFeatures.__init__
def init(self, *a, **k):
    orig_init(self, *a, **k)
    state["is_slope"] = np.asarray(self.is_slope)
interactions.InteractionFeatures.__init__ = init
orig = likelihood.log_interaction_prior
def patched(lam, is_interaction, prior_sd, interaction_sd):
    s = state["is_slope"]
    assert s.shape[0] == lam.shape[0]
    sd = jnp.where(jnp.asarray(s), interaction_sd * factor, jnp.where(jnp.asarray(is_interaction), interaction_sd, prior_sd))
    return -0.5 * jnp.sum((lam / sd) ** 2) - jnp.sum(jnp.log(sd)) - 0.5 * lam.shape[0] * likelihood._LOG_2PI
likelihood.log_interaction_prior = patched
import importlib
script = os.environ.get("SCRIPT", "framingham_ols")  # or continuous_fine_coarse (Adult's logit)
sys.argv = [script + ".py", *sys.argv[2:]]
importlib.import_module(script).main()
