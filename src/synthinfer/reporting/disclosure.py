r"""Disclosure risk of synthetic rows on the key variables an intruder may know (after synthpop's
``disclosure()``: Raab, Nowok & Dibben 2025, "Practical privacy metrics for synthetic data",
and the package documentation).

Both compare each private record with the synthetic records that share its values of the key
variables ``q`` (the *key*); ``d_q`` and ``s_q`` count records with key ``q`` in the private and
one synthetic dataset, ``N_d`` is the private table's size.

* **repU** (identity disclosure, replicated uniques): the percentage of private records that
  are unique on their key in the private data and whose key is unique in the synthetic data
  too, ``100 sum_q 1[d_q = 1, s_q = 1] / N_d``.
* **DiSCO** (attribute disclosure, "disclosive in synthetic, correct in original"): the
  percentage of private records whose key occurs in the synthetic data with one value of the
  target only, and that value is the record's own: an intruder who knows the key would read the
  record's target off the synthetic data, correctly.

Both are measured on the Domain's category codes (a number in a bin counts as its bin) and
averaged over the synthetic datasets. They are descriptive, for the data holder: differential
privacy bounds what any record changes, not these rates, which also count what is predictable
from the population (a DiSCO hit may be a general truth, e.g. every child is unmarried).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def disclosure(real: np.ndarray, synthetic: Sequence[np.ndarray], keys: Sequence[int], target: int) -> dict[str, float]:
    """``{"repU", "DiSCO"}`` in percent (module docstring), averaged over the synthetic datasets;
    ``real`` and each of ``synthetic`` are code arrays, ``keys`` and ``target`` column indices."""
    keys = list(keys)
    dims = [int(max(real[:, k].max(initial=0), *(s[:, k].max(initial=0) for s in synthetic))) + 1 for k in keys]

    def key(codes: np.ndarray) -> np.ndarray:  # one integer per key combination
        return np.ravel_multi_index(tuple(codes[:, k] for k in keys), dims)

    real_key = pd.Series(key(real))
    d_q = real_key.map(real_key.value_counts()).to_numpy()
    rep, disco = [], []
    for syn in synthetic:
        syn_key = pd.Series(key(syn))
        s_q = real_key.map(syn_key.value_counts()).fillna(0).to_numpy()
        rep.append(100.0 * np.mean((d_q == 1) & (s_q == 1)))
        by_key = pd.DataFrame({"key": syn_key, "t": syn[:, target]}).groupby("key")["t"]
        one_value = by_key.first()[by_key.nunique() == 1]  # the target of each disclosive key
        told = real_key.map(one_value)
        disco.append(100.0 * np.mean(told.notna().to_numpy() & (told.fillna(-1).to_numpy() == real[:, target])))
    return {"repU": float(np.mean(rep)), "DiSCO": float(np.mean(disco))}
