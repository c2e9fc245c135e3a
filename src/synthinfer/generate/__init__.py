"""Data-holder side: DP synthetic data generators.

:class:`NapsuMQ` (Räisä et al. 2023) is the noise-aware generator whose releases support valid
inference with Rubin's rules. Baselines (Ghalebikesabi et al. 2022, Section 4): :class:`DPGAN`,
:class:`DPCGAN`, :class:`PrivBayes`; :class:`CallableGenerator` adapts any other
DataFrame-producing generator and :func:`release_kwargs` turns a fitted generator into
``write_release`` arguments. The truncated Laplace mechanism of Wilde et al. (2021,
Proposition 3): :class:`LaplaceMechanismGenerator` (and :func:`laplace_synthetic` for
simulation studies).
"""

from synthinfer.generate.adapters import CallableGenerator, release_kwargs
from synthinfer.generate.dpgan import DPCGAN, DPGAN
from synthinfer.generate.laplace_mechanism import LaplaceMechanismGenerator, laplace_synthetic
from synthinfer.napsu.estimator import NapsuMQ
from synthinfer.generate.privbayes import PrivBayes
from synthinfer.generate.tabular import Continuous, TabularSchema

__all__ = [
    "CallableGenerator",
    "Continuous",
    "DPCGAN",
    "DPGAN",
    "LaplaceMechanismGenerator",
    "NapsuMQ",
    "PrivBayes",
    "TabularSchema",
    "laplace_synthetic",
    "release_kwargs",
]
