"""One self-contained HTML page about a release: what it is and what it supports (public), and,
for the data holder only, how close it is to the private table.

The public part reads the release alone (its manifest and synthetic datasets), so it can be
published with the release. The private part reads the private rows: the page then says, in
red at its top, that it is for the data holder and must not be published.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synthinfer.errors import ParameterError

#: Synthetic datasets the report reads at most (the first ones): enough for the marginals'
#: between-dataset range and the fidelity averages, bounded on releases of many large datasets.
MAX_DATASETS = 20


@dataclass(frozen=True)
class Report:
    """A rendered report: ``html`` (the whole page) and whether it holds the private part."""

    html: str
    private: bool

    def save(self, path: str | Path) -> Path:
        """Write the page to ``path`` (UTF-8, all or nothing); returns the path."""
        from synthinfer.files import atomic_write_text

        path = Path(path)
        atomic_write_text(path, self.html)
        return path

    def _repr_html_(self) -> str:  # notebooks show the page itself
        return self.html


def report(release: Any, private_data: pd.DataFrame | None = None, *, formula: str | None = None,
           model: str = "logit", keys: Sequence[str] | None = None, target: str | None = None,
           max_datasets: int = MAX_DATASETS) -> Report:
    """The HTML report of ``release`` (an opened :class:`synthinfer.release.Release` or a path).

    Public part: the mechanism and its settings, the privacy spend step by step, the measured
    marginals as a graph, which analysis the release supports (``formula``), the fit's
    diagnostics and each column's synthetic distribution (mean and range over the first
    ``max_datasets`` datasets).

    Private part (``private_data``, the private table): total variation distances of every
    1- and 2-way marginal, the propensity-score pMSE and S_pMSE (:mod:`.fidelity`), each
    column's real shares beside the synthetic ones, and with ``formula`` the analyst's model
    on the real rows against Rubin's rules on the synthetic datasets (a forest plot and
    whether each synthetic interval covers the real estimate); with ``keys`` (the columns an
    intruder may know) and ``target`` (the one they want), the disclosure measures repU and
    DiSCO (:mod:`.disclosure`). The page then says it must not be published.
    """
    from synthinfer.release import Release, open_release

    if not isinstance(release, Release):
        release = open_release(release)
    if not (isinstance(max_datasets, int) and not isinstance(max_datasets, bool) and max_datasets >= 1):
        raise ParameterError(f"max_datasets must be a positive integer, got {max_datasets!r}")
    from synthinfer.reporting import figures

    manifest = release.manifest
    domain = release.domain
    if (keys is None) != (target is None):
        raise ParameterError("disclosure measures need both keys (the columns an intruder knows) and target")
    if keys is not None and private_data is None:
        raise ParameterError("disclosure measures compare with the private data: give private_data with keys")
    used = list(range(min(len(release.datasets), max_datasets)))
    datasets = [release.datasets[i] for i in used]
    ctx: dict[str, Any] = {
        "title": f"synthinfer release: {manifest.get('mechanism', '?')}",
        "created": manifest.get("created"), "now": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "fingerprint": release.fingerprint, "private": private_data is not None,
        "facts": _facts(release, len(used)), "settings": _settings(manifest.get("settings") or {}),
        "charges": _charges(release), "diagnostics": _diagnostics(manifest.get("diagnostics") or {}),
        "budget": _budget(manifest["privacy"]),
    }
    marginals = [list(m.columns) for m in release.marginals] if release.marginals is not None else None
    columns = list(domain.names) if domain is not None else list(manifest.get("columns") or [])
    ctx["marginals"] = marginals
    ctx["together"] = None if not marginals else [
        (c, ", ".join(sorted({o for m in marginals if c in m for o in m if o != c})) or "none") for c in columns]
    ctx["marginals_figure"] = figures.marginals_graph(columns, marginals) if marginals else None
    if formula is not None:
        ctx["support"] = str(release.supports(formula))
        ctx["formula"] = formula
    finite = _finite_columns(domain)
    if keys is not None:
        keys = [keys] if isinstance(keys, str) else list(keys)
        names = () if finite is None else finite.names
        for c in [*keys, target]:
            if c not in names:
                raise ParameterError(f"disclosure: column {c!r} is not a categorical or binned column of the "
                                     f"release's Domain ({', '.join(names)})")
        if target in keys or len(set(keys)) < len(keys) or not keys:
            raise ParameterError(f"disclosure: the keys must be distinct columns other than the target, got "
                                 f"keys={keys}, target={target!r}")
    real_codes = syn_codes = None
    if finite is not None and datasets:
        from synthinfer.data import encode

        syn_codes = [encode(d, finite) for d in datasets]
        if private_data is not None:
            real_codes = encode(private_data, finite)
        from synthinfer.reporting.fidelity import marginal_shares

        axes = range(len(finite.names))
        shares = [np.stack([marginal_shares(c, finite.shape, (j,)) for c in syn_codes]) for j in axes]
        real_shares = None if real_codes is None else [marginal_shares(real_codes, finite.shape, (j,)) for j in axes]
        ctx["bars_figure"] = figures.synthetic_bars(finite.names, [finite[c].categories for c in finite.names],
                                                    shares, real_shares)
    if private_data is not None:
        ctx.update(_private_part(release, private_data, datasets, finite, real_codes, syn_codes, formula, model))
    if keys is not None:
        from synthinfer.reporting.disclosure import disclosure

        risk = disclosure(real_codes, syn_codes, [finite.index(c) for c in keys], finite.index(target))
        ctx["disclosure"] = {"keys": keys, "target": target, "repU": f"{risk['repU']:.2f}%",
                             "DiSCO": f"{risk['DiSCO']:.2f}%", "datasets": len(syn_codes)}
    return Report(_render(ctx), private_data is not None)


def _finite_columns(domain):
    """The Domain's columns with categories (categorical and binned), or None without any."""
    from synthinfer.data import Column, Domain

    if domain is None:
        return None
    cols = [c for c in domain.columns if isinstance(c, Column) and c.derived_from is None]
    return Domain(cols) if cols else None


def _facts(release, used: int) -> list[tuple[str, str]]:
    m = release.manifest
    n_syn = m.get("n_syn")
    read = f"{used} read for this report" if used else "not read for this report: their marginals are not drawn"
    return [("mechanism", str(m.get("mechanism"))), ("private rows n", f"{release.n:,}"),
            ("synthetic datasets m", f"{release.m} ({read})"),
            ("rows per dataset", f"{n_syn:,}" if isinstance(n_syn, int) else str(n_syn)),
            ("columns", ", ".join(m.get("columns") or [])),
            ("written as bin midpoints", ", ".join(m.get("midpoints") or []) or "none"),
            ("numbers drawn inside bins", ", ".join(m.get("numbers_in_bins") or []) or "none"),
            ("seeded", "yes" if m.get("seed_fixed") else "no"),
            ("synthinfer version", str(m.get("synthinfer_version")))]


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if math.isfinite(v) else str(v)
    if isinstance(v, (list, tuple)):
        text = ", ".join("(" + ", ".join(map(str, x)) + ")" if isinstance(x, (list, tuple)) else str(x) for x in v)
        return text if len(text) <= 300 else text[:297] + "..."
    return str(v)


def _settings(settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(k, _scalar(v)) for k, v in settings.items() if not isinstance(v, Mapping)]


def _charges(release) -> list[dict[str, str]]:
    out = []
    for c in release.manifest["privacy"].get("charges", []):
        details = c.get("details") or {}
        sigma = details.get("sigma", details.get("scale"))
        noise = "" if sigma is None else _scalar(float(sigma))
        if "noise_multiplier" in details:  # DP-SGD: the Gaussian noise's sd is the multiplier times the clip norm
            noise = f"{_scalar(float(details['noise_multiplier']))} x clip norm {_scalar(details.get('clip_norm'))}"
        out.append({"name": str(c.get("name")), "mechanism": str(c.get("mechanism")),
                    "epsilon": _scalar(float(c.get("epsilon", 0.0))), "delta": f"{float(c.get('delta', 0.0)):.3g}",
                    "noise": noise,
                    "part_of": "" if c.get("part_of") is None else str(c.get("part_of"))})
    return out


def _budget(privacy: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ledger's totals and how its charges compose (the accountant)."""
    def pair(v: Any) -> str:
        if isinstance(v, Mapping):
            return f"epsilon = {_scalar(float(v['epsilon']))}, delta = {float(v['delta']):.3g}"
        return _scalar(v)

    rows = [("budget", pair(privacy.get("total"))), ("spent", pair(privacy.get("spent"))),
            ("composition (accountant)", _scalar(privacy.get("composition")))]
    if privacy.get("unsafe_overrides"):
        rows.append(("unsafe overrides (studies only)", _scalar(privacy["unsafe_overrides"])))
    return rows


def _diagnostics(diag: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """The fit's diagnostics flattened to (key, value) rows, nested dicts as dotted keys; long
    per-parameter lists are left out (the manifest holds them)."""
    rows = []
    for k, v in diag.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            rows.extend(_diagnostics(v, key + "."))
        elif isinstance(v, (list, tuple)) and len(v) > 20:
            continue
        else:
            rows.append((key, _scalar(v)))
    return rows


def _private_part(release, private_data, datasets, finite, real_codes, syn_codes, formula, model) -> dict[str, Any]:
    from synthinfer.reporting import fidelity, figures

    out: dict[str, Any] = {}
    if finite is not None:
        tv, assoc = fidelity.fidelity_matrices(real_codes, syn_codes, finite.shape)
        k = len(finite.names)
        off = tv[~np.eye(k, dtype=bool)]
        out["tv_figure"] = figures.tv_heatmap(finite.names, tv)
        if k > 1:
            out["association_figure"] = figures.association_heatmap(finite.names, assoc)
            out["association_summary"] = f"{np.abs(assoc[~np.eye(k, dtype=bool)]).max():.3f}"
        out["tv_summary"] = [("mean 1-way", f"{np.mean(np.diag(tv)):.4f}"), ("max 1-way", f"{np.max(np.diag(tv)):.4f}"),
                             ("mean 2-way", f"{off.mean():.4f}" if off.size else "-"),
                             ("max 2-way", f"{off.max():.4f}" if off.size else "-")]
        p = fidelity.pmse(real_codes, syn_codes[0], finite.shape)
        out["pmse"] = [("pMSE", f"{p['pmse']:.3g}"), ("its expectation if indistinguishable", f"{p['expected_null']:.3g}"),
                       ("S_pMSE", f"{p['s_pmse']:.3g}"),
                       ("rows used (real / synthetic dataset 1)", f"{p['rows_real']:,} / {p['rows_synthetic']:,}")]
    if formula is not None:
        real = (private_data if finite is None
                else _as_released(private_data, real_codes, finite, release.domain, release.manifest))
        out.update(_coefficients(release, real, datasets, formula, model))
    return out


def _as_released(private_data: pd.DataFrame, codes: np.ndarray, finite, domain, manifest: Mapping[str, Any]
                 ) -> pd.DataFrame:
    """The private rows in the form the release's datasets take, so that the analyst's model has
    the same terms on both: categorical and binned columns as their categories (missing values
    in a declared ``"<missing>"`` category), derived columns from their sources' categories,
    binned columns the datasets hold as bin midpoints as their bins' midpoints; columns written
    as numbers inside bins, and all others, as they are. ``codes``: ``encode(private_data,
    finite)``; ``domain``: the release's."""
    from synthinfer.data import decode

    inside = set(manifest.get("numbers_in_bins") or ())
    mids = [c for c in manifest.get("midpoints") or () if c in finite.names]
    decoded = decode(codes, finite, midpoints=mids)
    out = {c: decoded[c].to_numpy() if c in mids else decoded[c].array for c in finite.names if c not in inside}
    for name, (source, table) in domain.derived.items():
        if source in finite.names:
            out[name] = pd.Categorical.from_codes(table[codes[:, finite.index(source)]],
                                                  categories=list(domain[name].categories))
    return private_data.assign(**out)


def _coefficients(release, private_data, datasets, formula, model) -> dict[str, Any]:
    """The analyst's model on the real rows against Rubin's rules on the synthetic datasets."""
    from synthinfer.analysis import analyze
    from synthinfer.analysis.fastglm import fast_path_applies, fit_fast
    from synthinfer.analysis.models import FitOptions, fit_dataset, resolve_model
    from synthinfer.errors import AnalysisError
    from synthinfer.reporting import figures

    from synthinfer.analysis.support import complete_cases

    # a release with declared missing values holds NaN where the real rows had none: both sides
    # are compared on their complete cases, as statsmodels' formulas fit them, and the page says so
    complete = complete_cases(private_data, formula)
    rows, spec, opts = private_data.loc[complete], resolve_model(model), FitOptions(formula)
    # the batched GLM fit on the distinct rows (as analyze fits the synthetic datasets; a census
    # table has millions of rows but few distinct ones), statsmodels where it does not apply
    real = (fit_fast([rows], spec, opts, None)[0] if fast_path_applies(spec, opts) else None) or fit_dataset(
        0, rows, spec, opts, None, None)
    if not real.ok:
        raise AnalysisError(f"the model {formula!r} failed on the private data: {real.error}")
    res = analyze(datasets, formula, model=model, n=release.n, progress=False, seed=0, missing="drop")
    names = [c for c in res.params.index if c in real.params.index]
    est = real.params[names].to_numpy()
    se = np.sqrt(np.diag(real.cov.loc[names, names].to_numpy()))
    real_ci = np.column_stack([est - 1.959964 * se, est + 1.959964 * se])
    syn = res.params[names].to_numpy()
    syn_ci = res.conf_int(0.05).loc[names].to_numpy()
    covers = (syn_ci[:, 0] <= est) & (est <= syn_ci[:, 1])
    rows = [{"name": n, "real": f"{e:.4g}", "real_ci": f"[{a:.4g}, {b:.4g}]", "synthetic": f"{s:.4g}",
             "synthetic_ci": f"[{c:.4g}, {d:.4g}]", "width_ratio": f"{(d - c) / (b - a):.2f}", "covers": bool(v)}
            for n, e, (a, b), s, (c, d), v in zip(names, est, real_ci, syn, syn_ci, covers)]
    return {"forest_figure": figures.forest(names, est, real_ci, syn, syn_ci), "coefficients": rows,
            "coverage": f"{int(covers.sum())} of {len(names)}", "analysed": res.m,
            "complete_cases": None if complete.all() and res.options["complete_share"] == 1.0 else
            f"{complete.mean():.1%} of the real rows, {res.options['complete_share']:.1%} of the synthetic ones"}


def _render(ctx: Mapping[str, Any]) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("synthinfer.reporting", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True,
                             lstrip_blocks=True)
    return env.get_template("report.html.j2").render(**ctx)


__all__ = ["MAX_DATASETS", "Report", "report"]
