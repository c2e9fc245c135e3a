"""NAPSU-MQ (Räisä et al. 2023): noise-aware synthetic data from noisy marginal queries.

One job per module:

* :mod:`~synthinfer.napsu.queries` - canonical (identifiable) marginal queries (Supplement C);
* :mod:`~synthinfer.napsu.junction_tree`, :mod:`~synthinfer.napsu.network` - the max-ent
  distribution MED_theta as a Markov network with exact junction-tree inference and sampling;
  a network owns its compiled programs;
* :mod:`~synthinfer.napsu.likelihood` - the noise-aware posterior (eq. 4-6) and PGM's objective;
* :mod:`~synthinfer.napsu.structured` - eq. 6 in the interaction basis with the clique-sparse
  precision (verified against the dense form; not yet used by the backends);
* :mod:`~synthinfer.napsu.optimize` - L-BFGS with restarts (Supplement E);
* :mod:`~synthinfer.napsu.laplace`, :mod:`~synthinfer.napsu.nuts`, :mod:`~synthinfer.napsu.mle` -
  the estimators; :mod:`~synthinfer.napsu.reparam`, :mod:`~synthinfer.napsu.jumps` - NUTS's
  one-sided map and plateau jumps for near-empty cells;
* :mod:`~synthinfer.napsu.backends` - the registry of inference backends (``inference=``);
* :mod:`~synthinfer.napsu.diagnostics` - the posterior container (convergence: :mod:`synthinfer.mcmc`);
* :mod:`~synthinfer.napsu.selection` - private MST selection of extra marginals;
* :mod:`~synthinfer.napsu.estimator` - :class:`NapsuMQ`, the orchestration (Algorithm 1);
* :mod:`~synthinfer.napsu.io` - saving and loading a fitted generator.
"""

from synthinfer.napsu.backends import InferenceBackend, backend_names, get_backend, register_backend
from synthinfer.napsu.estimator import NapsuMQ
from synthinfer.napsu.junction_tree import JunctionTree
from synthinfer.napsu.network import MarkovNetwork, network_for
from synthinfer.napsu.queries import CanonicalQueries

__all__ = [
    "CanonicalQueries", "InferenceBackend", "JunctionTree", "MarkovNetwork", "NapsuMQ", "backend_names",
    "get_backend", "network_for", "register_backend",
]
