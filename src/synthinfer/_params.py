"""scikit-learn's settings contract for synthinfer's estimators.

The constructor holds the settings, ``get_params()`` returns them as given and
``set_params(**settings)`` changes them, so ``sklearn.base.clone`` and grid searches work.
Hand-written rather than inheriting ``sklearn.base.BaseEstimator``: that would import
scikit-learn (a noticeable import) with every ``import synthinfer``, and its notebook (HTML) repr and
metadata-routing methods would display every constructor argument, a seed's value included,
where synthinfer's own reprs leave the seed out (a published seed lets anyone subtract the
noise).
"""

from __future__ import annotations

import inspect
from typing import Any

from synthinfer.errors import ParameterError


class ParamsMixin:
    """``get_params``/``set_params`` from the names of ``__init__``'s parameters, each stored
    unchanged as an attribute of the same name (scikit-learn's convention)."""

    @classmethod
    def _param_names(cls) -> list[str]:
        kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        params = inspect.signature(cls.__init__).parameters.values()
        return sorted(p.name for p in params if p.name != "self" and p.kind not in kinds)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's settings as given, the seed included (``deep`` is accepted for
        scikit-learn; no setting is itself an estimator)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any):
        """Change settings (a later :meth:`fit` uses them); unknown names are refused."""
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ParameterError(f"{type(self).__name__} has no setting {name!r}; its settings are {names}")
            setattr(self, name, value)
        return self
