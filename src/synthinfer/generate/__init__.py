"""Data-holder side: DP synthetic data generators, all in one contract (:class:`Generator`).

Every generator has ``fit(data, domain, ledger=None)``, ``generate(m, n=None, seed=None)``
(a list of ``m`` DataFrames), ``release_record()`` (for ``synthinfer.release.write_release``)
and one seed rule; see :class:`Generator`.

:class:`NapsuMQ` (Räisä et al. 2023) is the noise-aware generator whose releases support valid
inference with Rubin's rules. Baselines (Ghalebikesabi et al. 2022, Section 4): :class:`DPGAN`,
:class:`DPCGAN`, :class:`PrivBayes`; :class:`CallableGenerator` wraps any other
DataFrame-producing generator. The truncated Laplace mechanism of Wilde et al. (2021,
Proposition 3): :class:`LaplaceMechanismGenerator` (and :func:`laplace_synthetic` for
simulation studies).
"""

from synthinfer.generate.adapters import CallableGenerator
from synthinfer.generate.base import Generator
from synthinfer.generate.dpgan import DPCGAN, DPGAN
from synthinfer.generate.laplace_mechanism import LaplaceMechanismGenerator, laplace_synthetic
from synthinfer.generate.privbayes import PrivBayes
from synthinfer.generate.tabular import Continuous, TabularSchema



def __getattr__(name: str):
    # NapsuMQ lives in the engine package synthinfer.napsu, which builds on this package's
    # Generator contract: re-exported lazily, so neither import order makes a cycle
    if name == "NapsuMQ":
        from synthinfer.napsu.estimator import NapsuMQ

        return NapsuMQ
    raise AttributeError(f"module 'synthinfer.generate' has no attribute {name!r}")


__all__ = [
    "CallableGenerator",
    "Continuous",
    "DPCGAN",
    "DPGAN",
    "Generator",
    "LaplaceMechanismGenerator",
    "NapsuMQ",
    "PrivBayes",
    "TabularSchema",
    "laplace_synthetic",
]
