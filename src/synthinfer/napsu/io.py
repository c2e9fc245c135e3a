"""Saving and loading a fitted NAPSU-MQ generator (one ``.npz`` file, format ``FORMAT``).

Saved: settings (never the seed's value), Domain, marginals, canonical query indices, noisy
counts, sigma_DP, n, posterior draws, diagnostics and the ledger record as at fit time. No rows
of the real data and no exact counts are saved. A loaded generator can generate, not refit.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from synthinfer.files import atomic_write
from synthinfer.data import Domain, Marginal, as_marginals
from synthinfer.errors import ReleaseError
from synthinfer.napsu.diagnostics import to_inference_data
from synthinfer.napsu.measurements import Measurement
from synthinfer.napsu.network import network_for
from synthinfer.napsu.structured import measurement_layout
from synthinfer.privacy import PrivacyLedger

if TYPE_CHECKING:
    from synthinfer.napsu.estimator import NapsuMQ

FORMAT = "synthinfer.napsu_mq/1"


def save(gen: NapsuMQ, path: str | Path) -> None:
    """Write the fitted generator ``gen`` to ``path`` atomically."""
    meta = {
        "format": FORMAT,
        "params": gen.release_settings_,
        "domain": gen.domain_.to_dict(),
        "marginals": [list(m.columns) for m in gen.marginals_],
        "selected_marginals": [list(m.columns) for m in gen.selected_marginals_],
        "n": gen.n_,
        "reference": gen.queries_.reference,
        # tied interactions (canonical query indices); None: the canonical parametrisation
        "ties": None if gen.queries_ is gen.queries_.canonical else [list(g) for g in gen.queries_.ties],
        "zero": [] if gen.queries_ is gen.queries_.canonical else list(gen.queries_.zero),  # interactions fixed at 0
        # slopes of coarse numeric columns: (members, weights) each
        "slopes": [] if gen.queries_ is gen.queries_.canonical else [[list(m), list(w)] for m, w in gen.queries_.slopes],
        # linear-by-linear trends of pairs of numeric columns: (members, weights) each
        "trends": [] if gen.queries_ is gen.queries_.canonical else [[list(m), list(w)] for m, w in gen.queries_.trends],
        "sigma_dp": gen.sigma_dp_,
        # AIM's measurements (their values are noisy_counts, in order); None: the canonical queries
        "measurements": None if gen.measurements_ is None else [
            {"columns": list(m.marginal.columns), "cells": m.cells.tolist(), "variance": m.variance,
             **({} if m.groups is None else {"groups": m.groups.tolist()}),  # a coarse table's groups
             **({} if m.weights is None else {"weights": m.weights.tolist()})}  # a moment's weights
            for m in gen.measurements_],
        "seed_fixed": gen.seed_fixed_,
        "ledger": {k: gen.privacy_[k] for k in ("composition", "total", "spent", "charges")},  # as at fit time
        "spent": list(gen.spent_),
        "diagnostics": gen.diagnostics_,
    }
    arrays = {
        "meta": np.frombuffer(json.dumps(meta, default=_json_default).encode(), dtype=np.uint8),
        "noisy_counts": gen.noisy_counts_,
        "kept": np.asarray(gen.queries_.canonical.kept),
        "draws": gen.draws_,
    }
    if "sample_stats" in gen.posterior_.groups():
        arrays["diverging"] = np.asarray(gen.posterior_.sample_stats["diverging"].values)

    def write(tmp: Path) -> None:
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        tmp.write_bytes(buf.getvalue())

    atomic_write(Path(path), write)


def load(path: str | Path, cls: type[NapsuMQ]) -> NapsuMQ:
    """Read a generator written by :func:`save` into a new ``cls`` (``NapsuMQ.load`` passes
    its class)."""
    try:
        z = np.load(Path(path), allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile):  # not an .npz file: text, pickle, truncated
        raise ReleaseError(f"{path} is not a saved NapsuMQ generator") from None
    if not isinstance(z, np.lib.npyio.NpzFile):  # a single .npy array
        raise ReleaseError(f"{path} is not a saved NapsuMQ generator")
    with z:
        try:
            meta = json.loads(bytes(z["meta"]).decode())
        except KeyError:
            raise ReleaseError(f"{path} is not a saved NapsuMQ generator") from None
        if meta.get("format") != FORMAT:
            raise ReleaseError(f"{path}: unknown format {meta.get('format')!r} (expected {FORMAT})")
        arrays = {k: np.asarray(z[k]) for k in z.files if k != "meta"}
    params = dict(meta["params"])
    params.setdefault("reference", "first")  # files written before the setting existed
    params.setdefault("cell_prior", 0.0)  # likewise: their posterior is under the normal prior alone
    params.setdefault("interaction_sd", None)  # likewise: on the canonical parameters
    params.setdefault("required_share", None)  # likewise; it only matters to an AIM fit
    params.setdefault("tie_below", None)  # likewise: no ties
    params.setdefault("coarse_interactions", "constant")  # likewise: no slopes
    params.setdefault("slopes_below", None)  # likewise: every slope kept
    params.setdefault("linear_by_linear", False)  # likewise: no trends
    params.setdefault("smooth_sd", None)  # likewise: no splines
    obj = cls(**params)
    obj.release_settings_ = params
    obj.delta_ = params["delta"]  # the release settings hold the delta the fit used
    domain = Domain.from_dict(meta["domain"])
    marginals = as_marginals(meta["marginals"])
    net = network_for(domain.without_derived(), marginals, meta.get("reference"),  # older files: all first categories
                      meta.get("ties"), meta.get("zero", []), meta.get("slopes", []), meta.get("trends", []))
    if not np.array_equal(np.asarray(net.queries.canonical.kept), arrays["kept"]):
        raise ReleaseError(f"{path}: its canonical queries differ from this version's; cannot load")
    obj.marginals_ = marginals
    obj.selected_marginals_ = as_marginals(meta["selected_marginals"])
    obj.domain_ = domain
    obj.network_ = net
    obj.queries_ = net.queries
    obj.noisy_counts_ = arrays["noisy_counts"]
    obj.sigma_dp_ = None if meta["sigma_dp"] is None else float(meta["sigma_dp"])
    obj.aim_ = None  # AIM's full record stays with the fit; its public facts are in diagnostics_
    obj.measurements_ = obj.layout_ = None
    if meta.get("measurements"):
        sizes = [max(m["groups"]) + 1 if m.get("groups") else len(m["cells"]) for m in meta["measurements"]]
        values = np.split(obj.noisy_counts_, np.cumsum(sizes)[:-1])
        obj.measurements_ = tuple(
            Measurement(Marginal(tuple(m["columns"])), v, m["variance"], cells=np.asarray(m["cells"], dtype=np.int64),
                        groups=None if not m.get("groups") else np.asarray(m["groups"], dtype=np.int64),
                        weights=None if m.get("weights") is None else np.asarray(m["weights"], dtype=np.float64))
            for m, v in zip(meta["measurements"], values))
        obj.layout_ = measurement_layout(obj.measurements_, domain.without_derived())
    obj.n_ = int(meta["n"])
    obj.seed_fixed_ = bool(meta["seed_fixed"])
    obj.ledger_ = PrivacyLedger.from_dict(meta["ledger"])
    obj.spent_ = tuple(meta["spent"]) if "spent" in meta else obj.ledger_.spent  # older files: their own ledger
    obj.diagnostics_ = meta["diagnostics"]
    stats = {"diverging": arrays["diverging"]} if "diverging" in arrays else None
    obj.posterior_ = to_inference_data(arrays["draws"], sample_stats=stats, attrs={"inference": params["inference"]})
    obj.privacy_ = obj._privacy_record()
    return obj


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
