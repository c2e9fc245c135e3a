"""Data-holder side: DP synthetic data generators.

NAPSU-MQ (:class:`NapsuMQ`); baselines of Ghalebikesabi et al. (2022), Section 4: :class:`DPGAN`,
:class:`DPCGAN`.
"""

from synthinfer.generate.dpgan import DPCGAN, DPGAN
from synthinfer.generate.napsu_mq import NapsuMQ
from synthinfer.generate.tabular import Continuous, TabularSchema

__all__ = ["Continuous", "DPCGAN", "DPGAN", "NapsuMQ", "TabularSchema"]
