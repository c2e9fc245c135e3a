"""The analyst's side: run an analysis on m synthetic datasets and combine the results.

* :func:`rubins_rules` - scalar combining rules for fully synthetic data (Räisä et al. 2023,
  Supplement B eqs. 9-11).
* :func:`reiter_wald_test` - multi-component Wald test (Reiter 2005).
* :func:`drop_extreme_variances` - robustness option of Section 5.2.
* :func:`analyze` - formula analysis over the m datasets, returning an :class:`MIResult`.
"""

from synthinfer.analysis.api import analyze
from synthinfer.analysis.combining import CombinedEstimate, rubins_rules
from synthinfer.analysis.models import FitRecord
from synthinfer.analysis.multivariate import WaldTestResult, reiter_wald_test
from synthinfer.analysis.result import MIResult
from synthinfer.analysis.robust import drop_extreme_variances

__all__ = [
    "CombinedEstimate",
    "FitRecord",
    "MIResult",
    "WaldTestResult",
    "analyze",
    "drop_extreme_variances",
    "reiter_wald_test",
    "rubins_rules",
]
