"""Data-holder side: DP synthetic data generators.

Baselines (Ghalebikesabi et al. 2022, Section 4): :class:`DPGAN`, :class:`DPCGAN`,
:class:`PrivBayes`; :class:`CallableGenerator` adapts any other DataFrame-producing generator.
"""


from synthinfer.generate.dpgan import DPCGAN, DPGAN

from synthinfer.generate.tabular import Continuous, TabularSchema

__all__ = ["CallableGenerator", "Continuous", "DPCGAN", "DPGAN", "PrivBayes", "TabularSchema", "release_kwargs"]
