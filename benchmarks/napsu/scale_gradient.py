r"""Cost of NAPSU-MQ's noise-aware log-posterior gradient against the model's size, beside ``mbi``.

One value-and-gradient of the negative log posterior (eq. 4-6 of Räisä et al. 2023) is what
the Laplace fit and NUTS repeat, so its cost sets what model sizes are usable. This script
times it on the full Adult table (``load_adult(categorical=True)``: 15 columns, n = 45,222;
epsilon = 1, delta = n^-2, seed 0) for models of growing size:

* ``adult10``: the paper's 10 two-way marginals on its 10 columns;
* ``adult12+mst``, ``adult13+mst``, ``adult15+mst``: the paper's marginals fixed and MST
  (:func:`synthinfer.napsu.selection.select_mst_marginals`, as ``NapsuMQ(select_extra="mst")``:
  10% of the budget) joining the other columns: + occupation, relationship (12); + native-country
  (13); all 15 columns;
* ``adult15+mst+K`` (or ``adult15+mst+K@CAP``): ``adult15+mst`` plus ``K`` more 2-way marginals,
  each chosen by the exponential mechanism on MST's score among the pairs whose addition keeps
  every junction-tree clique at most ``CAP`` cells (default ``--clique-cap``; a public
  constraint, like AIM's model-size cap). This second selection has its own 10% of the budget
  (half to noisy 1-way marginals, half split over the ``K`` choices), so its MST part is
  ``adult15+mst``'s.

Per model, each method in a new process (clean memory and compile caches); the first of them
selects and measures (OpenDP's noise is unseeded) and saves the measurement, which the model's
other processes load, so every method sees the same marginals and noisy counts:

* ``structured``: the library's program, ``likelihood.value_and_grad(net, "neg_log_posterior")``
  (eq. 6 by message passing on the junction tree, :mod:`synthinfer.napsu.structured`);
* ``structured-nuts``: the same objective compiled as NUTS compiles it for a model of this
  size, with XLA's default options (``structured`` uses the quick options of the Laplace fit's
  program: faster to compile, slower to run);
* ``dense``: ``jax.jit(jax.value_and_grad)`` of ``-(log_prior + log_likelihood)`` with
  ``net.mean_and_cov`` (the ``d x d`` covariance and its Cholesky factor; XLA's default
  options), skipped above ``--dense-max-d`` (default 2,200);
* ``laplace``: the library's Laplace fit on the same noisy counts under ``NapsuMQ``'s default
  prior (``PRIOR_SD``, ``CELL_PRIOR``, ``INTERACTION_SD``; the gradients above use the paper's
  normal prior alone, which the dense form implements): L-BFGS to the mode, the Hessian by
  forward differences of ``d + 1`` gradients, with compile; and, timed apart, its Gaussianity
  check ``laplace_gap``;
* ``mbi-float64``, ``mbi-float32``: private-pgm's ``MirrorDescent().estimate`` (mbi 2.x, Armijo
  step, ``--mbi-iters`` iterations; McKenna et al. 2019) on the same noisy marginals (every
  cell of each measured marginal, noise standard deviation ``sigma_DP``, known total n): a point
  estimate without uncertainty, first run (with compile) and second run (warm), with the
  per-iteration time; in float64 (as synthinfer computes) and in mbi's default float32.

Timed for the gradients: the first call (wall, process CPU, and the seconds JAX reports for
tracing/lowering and XLA compilation inside it), then ``--repeats`` calls after 2 warm-up
calls (minimum and median, wall and process CPU), all at one seeded theta ~ N(0, 0.3^2 I).
The two gradients' values at that theta are compared (relative difference). One BLAS/XLA
thread everywhere, so times are per core. Recorded per model: d, the marginals, the junction
tree's cliques (columns and cells), its total cells, and the load average before and after;
the message-passing plan's work per clique and its flop estimate; the machine's core count.
Writes ``results/scale_gradient.json`` after each model (records of models not run this time
are kept) and ``results/scale_gradient.png``: per-call process CPU time against d (log-log),
each point labelled with its largest clique's cells, with the 10 ms target and mbi's time per
iteration and per estimate; the structured time against the plan's flop estimate; compile
times against d. Each record names the JAX device it ran on (``jax_device``: platform and kind,
as ``jax.devices()[0]`` gives them, also in the file's ``machine``). Where that is an accelerator
(JAX finds a GPU and uses it), the plot shows wall times instead of process CPU, and ``--out``
keeps such results apart from the CPU ones (``results/scale_gradient_gpu.json`` below; the PNG
goes beside the JSON).

    python benchmarks/napsu/scale_gradient.py                  # the whole ladder (long)
    python benchmarks/napsu/scale_gradient.py --models adult10 adult12+mst --repeats 5
    python benchmarks/napsu/scale_gradient.py --describe       # model sizes only, no timing
    python benchmarks/napsu/scale_gradient.py --plot-only      # redraw the PNG from the JSON
    python benchmarks/napsu/scale_gradient.py --out benchmarks/napsu/results/scale_gradient_gpu.json  # on a GPU
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

# One thread for XLA's and the BLAS libraries' kernels, set before JAX or NumPy load.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "scale_gradient.json"
MODELS = ("adult10", "adult12+mst", "adult13+mst", "adult15+mst", "adult15+mst+4", "adult15+mst+8",
          "adult15+mst+24", "adult15+mst+8@5000")
METHODS = ("structured", "structured-nuts", "dense", "mbi-float64", "mbi-float32", "laplace")
#: columns added to the paper's 10 (in the full table's column order) for each model's size
EXTRA_COLUMNS = {10: (), 12: ("occupation", "relationship"), 13: ("occupation", "relationship", "native-country")}
EPSILON = 1.0
MST_FRACTION = 0.1  # NapsuMQ's default mst_budget_fraction
EXTRA_FRACTION = 0.1  # the capped second selection's share (adult15+mst+K only)
TARGET_MS = 10.0


# ---- models ---------------------------------------------------------------------------
_MODEL_NAME = re.compile(r"adult(10|12|13|15)(\+mst(?:\+(\d+)(?:@(\d+))?)?)?")


def parse_model(name: str, clique_cap: int) -> tuple[int, bool, int, int]:
    """``(columns, mst, extra pairs, clique cap)`` of a model name (see the module docstring)."""
    match = _MODEL_NAME.fullmatch(name)
    n_cols = int(match.group(1)) if match else 0
    mst, extra = bool(match and match.group(2)), int(match.group(3) or 0) if match else 0
    if not match or mst != (n_cols > 10) or (extra and n_cols != 15):
        raise SystemExit(f"unknown model {name!r}: adult10, adult{{12,13,15}}+mst or adult15+mst+K[@CAP]")
    return n_cols, mst, extra, int(match.group(4) or clique_cap)


def _largest_clique_cells(domain, scopes) -> int:
    from synthinfer.napsu.junction_tree import JunctionTree

    jt = JunctionTree.build(domain, scopes)
    return max(math.prod(domain.shape[v] for v in c) for c in jt.cliques)


def select_capped_pairs(codes, domain, measured, *, k: int, cap: int, budget, ledger) -> list:
    """``k`` more 2-way marginals, each by the exponential mechanism on MST's pair score among
    the unmeasured pairs that keep every junction-tree clique at most ``cap`` cells.

    ``budget``-DP by basic composition: noisy 1-way marginals by the Gaussian mechanism at
    ``(epsilon / 2, delta)`` (L2 sensitivity ``sqrt(2 * columns)``, as MST's), then ``k``
    exponential mechanisms at ``epsilon / (2 k)`` (score sensitivity 2). Which pairs are
    candidates depends only on the public domain and the earlier choices."""
    from synthinfer.data import Marginal, count_codes
    from synthinfer.napsu.selection import SCORE_SENSITIVITY, pair_scores
    from synthinfer.privacy import discrete_gaussian_mechanism
    from synthinfer.privacy.samplers import exponential_mechanism

    names = domain.names
    ledger.check("capped pair selection", budget.epsilon, budget.delta, mechanism="mst")
    one_way = np.concatenate([count_codes(codes, domain, (c,)) for c in names])
    noisy, _ = discrete_gaussian_mechanism(one_way, sensitivity=float(np.sqrt(2 * len(names))),
                                  epsilon=budget.epsilon / 2, delta=budget.delta, ledger=ledger,
                                  name="capped pairs: noisy 1-way marginals")
    one_way = np.split(noisy, np.cumsum(domain.shape)[:-1])
    eps_step = budget.epsilon / 2 / k
    chosen = list(measured)
    for step in range(k):
        have = {frozenset(m.columns) for m in chosen}
        scopes = [m.columns for m in chosen]
        pairs = [(i, j) for i, j in itertools.combinations(range(len(names)), 2)
                 if frozenset((names[i], names[j])) not in have
                 and _largest_clique_cells(domain, scopes + [(names[i], names[j])]) <= cap]
        if not pairs:
            raise SystemExit(f"no pair keeps the cliques within {cap} cells after {step} of {k} extra marginals")
        ledger.spend(f"capped pairs: exponential mechanism {step + 1}/{k}", eps_step, 0.0, mechanism="exponential",
                     sensitivity=SCORE_SENSITIVITY, candidates=len(pairs))
        i, j = pairs[exponential_mechanism(pair_scores(codes, domain, one_way, pairs), epsilon=eps_step,
                                           sensitivity=SCORE_SENSITIVITY)]
        chosen.append(Marginal((names[i], names[j])))
    return chosen[len(measured):]


def build_model(name: str, clique_cap: int, measured: Path | None = None) -> dict:
    """Selection and measurement as ``NapsuMQ.fit`` does them (the noise is OpenDP's, unseeded), and
    the network: ``{"network", "noisy", "noisy_all", "queryset", "sigma", "n", "marginals", ...}``.
    With ``measured``: the selection and noisy counts saved there, or (no such file yet) new ones,
    then saved there."""
    from synthinfer.data import Marginal, QuerySet, encode
    from synthinfer.datasets import load_adult
    from synthinfer.datasets.loaders import ADULT_PAPER_COLUMNS, ADULT_PAPER_MARGINALS
    from synthinfer.napsu.network import network_for
    from synthinfer.napsu.reference import most_frequent_reference

    n_cols, mst, extra, cap = parse_model(name, clique_cap)
    full = load_adult(categorical=True)
    wanted = set(full.domain.names) if n_cols == 15 else set(ADULT_PAPER_COLUMNS) | set(EXTRA_COLUMNS[n_cols])
    cols = [c for c in full.domain.names if c in wanted]
    domain = full.domain.project(cols)
    codes = encode(full.data[cols], domain)
    n = int(codes.shape[0])
    fixed = [Marginal(m) for m in ADULT_PAPER_MARGINALS]
    if measured is not None and measured.exists():
        saved = json.loads(measured.read_text())
        selected = [Marginal(tuple(c)) for c in saved["selected"]]
        marginals = tuple(fixed) + tuple(selected)
        queryset = QuerySet(domain, marginals)
        noisy_all, sigma = np.asarray(saved["noisy_all"], dtype=np.int64), saved["sigma"]
        selection_s, spent = saved["selection_s"], saved["spent"]
    else:
        selected, queryset, noisy_all, sigma, selection_s, spent = _measure(codes, domain, n, fixed, mst, extra, cap)
        marginals = queryset.marginals
        if measured is not None:
            measured.write_text(json.dumps({"selected": [list(m.columns) for m in selected],
                                            "noisy_all": np.asarray(noisy_all).tolist(), "sigma": float(sigma),
                                            "selection_s": selection_s, "spent": spent}))
    t0 = time.perf_counter()
    network = network_for(domain, marginals, most_frequent_reference(
        zip((m.columns for m in queryset.marginals), queryset.split(noisy_all)), domain))
    network_s = time.perf_counter() - t0
    return {"network": network, "noisy": noisy_all[network.queries.kept], "noisy_all": noisy_all,
            "queryset": queryset, "sigma": float(sigma), "n": n, "marginals": marginals, "selected": selected,
            "clique_cap": cap if extra else None, "selection_s": selection_s, "network_s": network_s,
            "spent": spent}


def _measure(codes, domain, n: int, fixed: list, mst: bool, extra: int, cap: int) -> tuple:
    """MST (and the capped pairs) and the noisy marginal counts: ``(selected, queryset, noisy_all,
    sigma, selection seconds, [epsilon, delta] spent)``."""
    from synthinfer.data import QuerySet
    from synthinfer.napsu.selection import n_spanning_edges, select_mst_marginals
    from synthinfer.privacy import PrivacyBudget, PrivacyLedger, discrete_gaussian_mechanism

    budget = PrivacyBudget(EPSILON, n ** -2.0)
    ledger = PrivacyLedger(budget)
    selected: list = []
    meas_budget = budget
    t0 = time.perf_counter()
    if mst:
        fractions = (MST_FRACTION, EXTRA_FRACTION) if extra else (MST_FRACTION,)
        *shares, meas_budget = budget.split(*fractions, 1 - sum(fractions))
        selected = select_mst_marginals(codes, domain, fixed, n_extra=n_spanning_edges(domain, fixed),
                                        budget=shares[0], ledger=ledger)
        if extra:
            selected += select_capped_pairs(codes, domain, fixed + selected, k=extra, cap=cap, budget=shares[1],
                                            ledger=ledger)
    selection_s = time.perf_counter() - t0
    marginals = tuple(fixed) + tuple(selected)
    queryset = QuerySet(domain, marginals)
    noisy_all, sigma = discrete_gaussian_mechanism(queryset.count(codes), sensitivity=queryset.l2_sensitivity,
                                                   epsilon=meas_budget.epsilon, delta=meas_budget.delta,
                                                   ledger=ledger, name="napsu-mq: marginal queries")
    return (selected, queryset, noisy_all, sigma, selection_s,
            [sum(c.epsilon for c in ledger.charges), sum(c.delta for c in ledger.charges)])


def describe(model: dict) -> dict:
    """The model's size: d, the junction tree's cliques (columns, cells) and total cells, and the
    message-passing plan's work: per clique with information, its cells ``K``, its separator's
    cells ``t`` and the rank ``r`` of its blocks (the sub-marginals it holds: measured ones and
    children's separators), with the plan's own flop estimate per evaluation
    (:attr:`synthinfer.napsu.structured.TreeLikelihoodPlan.flops`)."""
    from synthinfer.napsu.structured import canonical_layout, plan

    net = model["network"]
    jt = net.junction_tree
    names = net.queries.domain.names
    cells = [math.prod(jt.shape(i)) for i in range(len(jt.cliques))]
    pl = plan(net, canonical_layout(net.queries))
    work = [(cq.size, cq.sep_size, cq.rank) for cq in pl.cliques if cq.active]
    return {"d": int(net.dimension), "n": model["n"], "sigma_dp": model["sigma"], "columns": len(names),
            "marginals": [list(m.columns) for m in model["marginals"]],
            "selected": [list(m.columns) for m in model["selected"]], "clique_cap": model["clique_cap"],
            "measured_cells": int(model["queryset"].dimension), "n_cliques": len(jt.cliques),
            "clique_cells": cells, "largest_clique_cells": max(cells), "junction_tree_cells": int(jt.table_cells),
            "cliques": [[names[v] for v in c] for c in jt.cliques], "tree_width": jt.width,
            "plan_cliques_K_t_r": work, "plan_flops": int(pl.flops),
            "selection_s": model["selection_s"], "network_s": model["network_s"], "privacy_spent": model["spent"],
            "noisy_sha1": hashlib.sha1(np.ascontiguousarray(model["noisy_all"], dtype=np.float64)).hexdigest()}


# ---- timing -----------------------------------------------------------------------------
def _clock(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def time_program(program, args: tuple, repeats: int) -> tuple[dict, tuple]:
    """First call (with compile) and ``repeats`` warm calls of a jitted value-and-gradient."""
    from _twinify_worker import CompileClock

    from synthinfer._jax import jax

    clock = CompileClock()

    def call():
        return jax.block_until_ready(program(*args))

    (out, first), _, cpu_first = _clock(lambda: clock.measure(call))
    rec = {"first_call_wall_s": first["wall_s"], "first_call_cpu_s": cpu_first,
           "first_call_xla_compile_s": first["xla_compile_s"], "first_call_trace_lower_s": first["trace_lower_s"]}
    for _ in range(2):
        call()
    times = [_clock(call)[1:] for _ in range(repeats)]
    wall, cpu = (np.array([t[k] for t in times]) * 1e3 for k in (0, 1))
    rec.update({"repeats": repeats,
                "call_wall_min_ms": float(wall.min()), "call_wall_median_ms": float(np.median(wall)),
                "call_cpu_min_ms": float(cpu.min()), "call_cpu_median_ms": float(np.median(cpu))})
    rec["compile_wall_s"] = rec["first_call_wall_s"] - rec["call_wall_median_ms"] / 1e3
    rec["compile_cpu_s"] = rec["first_call_cpu_s"] - rec["call_cpu_median_ms"] / 1e3
    return rec, out


def _theta(d: int, seed: int = 1) -> np.ndarray:
    return 0.3 * np.random.default_rng(seed).normal(size=d)


def gradient_worker(model: dict, method: str, repeats: int, dump: Path) -> dict:
    from synthinfer import float64
    from synthinfer._jax import jax, jnp, single_threaded_blas
    from synthinfer.napsu.likelihood import PRIOR_SD, log_likelihood, log_prior, posterior_args, value_and_grad
    from synthinfer.napsu.structured import canonical_layout, plan

    net = model["network"]
    args = posterior_args(model["noisy"], model["sigma"], model["n"], PRIOR_SD)
    theta = _theta(net.dimension)
    rec: dict = {}
    with float64(), single_threaded_blas():
        if method == "structured":
            tree_plan, rec["plan_wall_s"], rec["plan_cpu_s"] = _clock(
                lambda: plan(net, canonical_layout(net.queries)))
            rec["plan_bytes_per_point"] = int(tree_plan.bytes_per_point)
            program = value_and_grad(net, "neg_log_posterior")
            rec["compiler_options"] = "synthinfer._jax.quick_compiler_options()"
        elif method == "structured-nuts":  # NUTS's gradient: the same objective, XLA's default options
            from synthinfer.napsu.likelihood import objective

            program = jax.jit(jax.value_and_grad(objective(net, "neg_log_posterior")[0]))
            rec["compiler_options"] = "XLA defaults (as synthinfer.napsu.nuts compiles models above SMALL_MODEL_DIMENSION)"
        else:
            mean_and_cov = net.mean_and_cov

            def loss(theta, s_tilde, variances, n, prior_sd, cell_prior, interaction_sd):  # posterior_args (both 0)
                return -(log_prior(theta, prior_sd)
                         + log_likelihood(theta, s_tilde, jnp.sqrt(variances), n, mean_and_cov))

            program = jax.jit(jax.value_and_grad(loss))
            rec["compiler_options"] = "XLA defaults"
        timing, (value, grad) = time_program(program, (theta, *args), repeats)
    rec.update(timing)
    np.savez(dump, value=np.asarray(value), grad=np.asarray(grad))
    return rec


def laplace_worker(model: dict) -> dict:
    """The whole Laplace fit as ``NapsuMQ(inference="laplace")`` runs it on these noisy counts,
    under its default prior: L-BFGS to the mode, the Hessian by forward differences of
    ``d + 1`` gradients, the covariance (with compile, in a new process), then the Gaussianity
    check ``laplace_gap`` (``2 d + 1`` values) timed apart."""
    from synthinfer import float64
    from synthinfer._jax import single_threaded_blas
    from synthinfer.napsu.laplace import laplace_approximation, laplace_gap
    from synthinfer.napsu.likelihood import CELL_PRIOR, INTERACTION_SD, PRIOR_SD

    net = model["network"]
    args = (net, model["noisy"], model["sigma"], model["n"])
    prior = {"prior_sd": PRIOR_SD, "cell_prior": CELL_PRIOR, "interaction_sd": INTERACTION_SD}
    with float64(), single_threaded_blas():
        lap, wall, cpu = _clock(lambda: laplace_approximation(*args, **prior, rng=np.random.default_rng(0)))
        gap, gap_wall, gap_cpu = _clock(lambda: laplace_gap(*args, lap, **prior))
    o = lap.optim
    return {"fit_wall_s": wall, "fit_cpu_s": cpu, "gap_wall_s": gap_wall, "gap_cpu_s": gap_cpu, "prior": prior,
            "converged": bool(o.converged), "lbfgs_gradient_evaluations": int(o.n_grad_evals),
            "hessian_gradient_evaluations": int(net.dimension) + 1, "restarts": int(o.n_restarts),
            "axes_far_from_gaussian": int((gap > 1.0).sum())}


def mbi_worker(model: dict, method: str, iters: int) -> dict:
    import warnings

    from synthinfer import float64
    from synthinfer._jax import jax, single_threaded_blas

    with warnings.catch_warnings():  # mbi warns at import about JAX's float32 default
        warnings.simplefilter("ignore", UserWarning)
        import mbi
        from mbi.estimation import MirrorDescent

    domain = model["network"].queries.domain
    mdom = mbi.Domain(domain.names, domain.shape)
    qs = model["queryset"]
    dtype = np.float64 if method == "mbi-float64" else np.float32
    measurements = [mbi.LinearMeasurement(np.asarray(y, dtype=dtype).ravel(), tuple(m.columns), stddev=model["sigma"])
                    for y, m in zip(qs.split(model["noisy_all"]), qs.marginals)]
    rec: dict = {"iters": iters, "dtype": np.dtype(dtype).name, "estimator": "mbi.estimation.MirrorDescent()",
                 "mbi_version": _version("mbi")}

    def run():
        fitted = MirrorDescent().estimate(mdom, measurements, known_total=float(model["n"]), iters=iters)
        return jax.block_until_ready(fitted)  # JAX dispatches asynchronously

    with single_threaded_blas():
        if dtype == np.float64:
            with float64():
                runs = [_clock(run) for _ in range(2)]
        else:
            runs = [_clock(run) for _ in range(2)]
    (_, rec["first_wall_s"], rec["first_cpu_s"]), (fitted, rec["warm_wall_s"], rec["warm_cpu_s"]) = runs
    rec["per_iter_wall_ms"] = rec["warm_wall_s"] / iters * 1e3
    rec["per_iter_cpu_ms"] = rec["warm_cpu_s"] / iters * 1e3
    rec["compile_wall_s"] = rec["first_wall_s"] - rec["warm_wall_s"]
    rec["compile_cpu_s"] = rec["first_cpu_s"] - rec["warm_cpu_s"]
    # how well the point estimate fits the noisy marginals: RMS residual in units of sigma_DP
    resid = np.concatenate([np.asarray(fitted.project(tuple(m.columns)).datavector()) - y.ravel()
                            for y, m in zip(qs.split(model["noisy_all"]), qs.marginals)])
    rec["rms_residual_over_sigma"] = float(np.sqrt(np.mean(resid**2)) / model["sigma"])
    return rec


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def worker(name: str, method: str, a: argparse.Namespace) -> dict:
    from synthinfer._jax import jax

    model = build_model(name, a.clique_cap, a.measured)
    d = int(model["network"].dimension)
    device = jax.devices()[0]
    rec: dict = {"model": name, "method": method, "d": d, "jax_device": f"{device.platform}: {device.device_kind}",
                 "loadavg_start": os.getloadavg()}
    if method == "dense" and d > a.dense_max_d:
        rec["skipped"] = f"d = {d} > --dense-max-d {a.dense_max_d}"
    elif method in ("structured", "structured-nuts", "dense"):
        rec.update(gradient_worker(model, method, a.repeats, _dump_path(name, method)))
    elif method == "laplace":
        rec.update(laplace_worker(model))
    else:
        rec.update(mbi_worker(model, method, a.mbi_iters))
    rec["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rec["loadavg_end"] = os.getloadavg()
    rec["model_info"] = describe(model)
    return rec


def _dump_path(name: str, method: str) -> Path:
    return Path("/tmp") / f"scale_gradient_{name.replace('+', '_').replace('@', '_')}_{method}.npz"


# ---- plot ---------------------------------------------------------------------------------
def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    models = list(doc["models"])
    device = doc["machine"].get("jax_device", "cpu")
    # process CPU time per core on a CPU; on an accelerator the host's CPU time says little: wall
    clock, clock_words = ("cpu", "process CPU") if device.startswith("cpu") else ("wall", "wall")

    def key_(k: str) -> str:
        return k.replace("cpu", clock)

    fig, (ax, cx, bx) = plt.subplots(1, 3, figsize=(18, 5.8))
    # (method, time key, scale to ms, label, colour, marker, line style)
    series = [("structured", "call_cpu_min_ms", 1.0, "structured eq. 6: value + gradient (Laplace's program)", "C0", "o", "-"),
              ("structured-nuts", "call_cpu_min_ms", 1.0, "the same, compiled as NUTS compiles it", "C0", "o", "--"),
              ("dense", "call_cpu_min_ms", 1.0, "dense eq. 6: value + gradient", "C3", "s", "-"),
              ("mbi-float64", "per_iter_cpu_ms", 1.0, "mbi MirrorDescent: one iteration (float64)", "C2", "^", "-"),
              ("mbi-float32", "per_iter_cpu_ms", 1.0, "mbi MirrorDescent: one iteration (float32)", "C2", "v", ":"),
              ("mbi-float64", "warm_cpu_s", 1e3, "mbi MirrorDescent: whole estimate, warm (float64)", "C8", "^", "--")]
    for method, key, scale, label, colour, marker, ls in series:
        key = key_(key)
        pts = sorted((m["d"], m["methods"][method][key] * scale, m["largest_clique_cells"]) for m in models
                     if key in m["methods"].get(method, {}))
        if not pts:
            continue
        d, ms, _ = zip(*pts)
        ax.plot(d, ms, marker=marker, color=colour, label=label, ls=ls)
        if method in ("structured", "dense"):
            for x, y, k in pts:
                ax.annotate(f"{k}", (x, y), textcoords="offset points", fontsize=7, color=colour,
                            xytext=(4, -11 if method == "structured" else 5))
    for method, label, colour, marker, ls in (("structured", "structured eq. 6", "C0", "o", "-"),
                                              ("structured-nuts", "structured eq. 6, NUTS's options", "C0", "o", "--"),
                                              ("dense", "dense eq. 6", "C3", "s", "-"),
                                              ("mbi-float64", "mbi MirrorDescent (float64)", "C2", "^", "-"),
                                              ("mbi-float32", "mbi MirrorDescent (float32)", "C2", "v", ":")):
        pts = sorted((m["d"], m["methods"][method][key_("compile_cpu_s")]) for m in models
                     if key_("compile_cpu_s") in m["methods"].get(method, {}))
        if pts:
            bx.plot(*zip(*pts), marker=marker, color=colour, label=label, ls=ls)
    pts = sorted((m["d"], m["methods"]["laplace"][key_("fit_cpu_s")]) for m in models
                 if key_("fit_cpu_s") in m["methods"].get("laplace", {}))
    if pts:
        bx.plot(*zip(*pts), marker="D", color="C1", label="Laplace fit with compile (structured)")
        bx.axhline(30.0, color="C1", ls="--", lw=1)
    pts = sorted((m["plan_flops"], m["methods"]["structured"][key_("call_cpu_min_ms")], m["d"]) for m in models
                 if key_("call_cpu_min_ms") in m["methods"].get("structured", {}) and "plan_flops" in m)
    if pts:
        cx.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color="C0", label="structured eq. 6")
        for x, y, d in pts:
            cx.annotate(f"d={d}", (x, y), textcoords="offset points", xytext=(4, -11), fontsize=7, color="C0")
    ax.axhline(TARGET_MS, color="grey", ls="--", lw=1)
    ax.text(0.01, TARGET_MS * 1.08, "10 ms target", color="grey", fontsize=8, transform=ax.get_yaxis_transform())
    per_call = "process CPU (one core)" if clock == "cpu" else "wall"
    for a_, title, ylabel in ((ax, f"per call: minimum {per_call}; labels: largest clique's cells", "ms"),
                              (cx, "structured per call vs the plan's flop estimate", "ms"),
                              (bx, f"compile (first call minus a warm one) and Laplace fit: {clock_words}; 30 s target",
                               "s")):
        a_.set_xscale("log")
        a_.set_yscale("log")
        if a_ is not cx and a_.lines:
            lo, hi = a_.get_xlim()
            a_.set_xticks([t for t in (100, 200, 500, 1000, 2000, 5000, 10000) if lo <= t <= hi])
            a_.xaxis.set_major_formatter(ScalarFormatter())
            a_.xaxis.set_minor_formatter(NullFormatter())
        a_.set_xlabel("flops (estimate)" if a_ is cx else "canonical queries d")
        a_.set_ylabel(ylabel)
        a_.set_title(title, fontsize=9)
        a_.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        a_.grid(True, which="both", alpha=0.3)
    load = [x for m in models for x in (m["loadavg_before"][0], m["loadavg_after"][0])]
    fig.suptitle(f"Full Adult table, epsilon 1: noise-aware log-posterior gradient vs mbi "
                 f"({device}, {doc['machine']['nproc']} cores, 1-min load average {min(load):.1f}-{max(load):.1f})",
                 fontsize=11)
    fig.subplots_adjust(wspace=0.25)
    fig.savefig(path, dpi=110, bbox_inches="tight")


# ---- driver --------------------------------------------------------------------------------
def _compare(entry: dict) -> None:
    """Relative difference of the structured and dense value and gradient, where both ran."""
    paths = [_dump_path(entry["model"], m) for m in ("structured", "dense")]
    if not all(p.exists() for p in paths) or "call_cpu_min_ms" not in entry["methods"].get("dense", {}):
        return
    s, dn = (np.load(p) for p in paths)
    entry["structured_vs_dense"] = {
        "value_rel_diff": float(abs(s["value"] - dn["value"]) / abs(dn["value"])),
        "grad_max_rel_diff": float(np.abs(s["grad"] - dn["grad"]).max() / np.abs(dn["grad"]).max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--repeats", type=int, default=20, help="warm calls timed per gradient (after 2 warm-up calls)")
    ap.add_argument("--dense-max-d", type=int, default=2200, help="skip the dense form above this d")
    ap.add_argument("--mbi-iters", type=int, default=1000)
    ap.add_argument("--clique-cap", type=int, default=2000, help="largest clique (cells) for adult15+mst+K")
    ap.add_argument("--worker-timeout", type=float, default=1800.0, help="seconds per (model, method) process")
    ap.add_argument("--describe", action="store_true", help="print the models' sizes; time nothing")
    ap.add_argument("--plot-only", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "METHOD"), help=argparse.SUPPRESS)
    ap.add_argument("--measured", type=Path, help=argparse.SUPPRESS)  # a worker's shared measurement
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    for name in a.models:
        parse_model(name, a.clique_cap)
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], a)))
        return
    if a.describe:
        for name in a.models:
            info = describe(build_model(name, a.clique_cap))
            print(json.dumps({"model": name, **{k: v for k, v in info.items() if k not in ("cliques", "marginals")}}),
                  flush=True)
        return
    if a.plot_only:
        plot(json.loads(a.out.read_text()), a.out.with_suffix(".png"))
        return
    kept = json.loads(a.out.read_text())["models"] if a.out.exists() else []
    doc = {"command": " ".join(["python", "benchmarks/napsu/scale_gradient.py", *sys.argv[1:]]),
           "machine": {"nproc": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                       "platform": platform.platform(), "processor": platform.processor(),
                       "python": platform.python_version(),
                       "jax": _version("jax"), "mbi": _version("mbi")},
           "threads": {v: os.environ.get(v) for v in ("XLA_FLAGS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                      "MKL_NUM_THREADS")},
           "settings": {"epsilon": EPSILON, "delta": "n^-2", "seed": 0, "repeats": a.repeats,
                        "dense_max_d": a.dense_max_d, "mbi_iters": a.mbi_iters, "clique_cap": a.clique_cap,
                        "theta": "0.3 * N(0, I), seed 1"},
           "models": [m for m in kept if m["model"] not in a.models]}
    for name in a.models:
        # each model keeps the command that measured it: a run of some models keeps the others'
        entry: dict = {"model": name, "command": doc["command"], "loadavg_before": os.getloadavg(), "methods": {}}
        measured = _dump_path(name, "measured").with_suffix(".json")
        measured.unlink(missing_ok=True)  # the model's first process measures anew
        for method in a.methods:
            cmd = [sys.executable, __file__, "--worker", name, method, "--repeats", str(a.repeats), "--dense-max-d",
                   str(a.dense_max_d), "--mbi-iters", str(a.mbi_iters), "--clique-cap", str(a.clique_cap),
                   "--measured", str(measured)]
            try:
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      timeout=a.worker_timeout)
            except subprocess.TimeoutExpired:
                entry["methods"][method] = {"error": f"timed out after {a.worker_timeout} s"}
                print(f"{name} {method}: timed out after {a.worker_timeout} s", flush=True)
                continue
            if proc.returncode != 0:
                entry["methods"][method] = {"error": f"exit {proc.returncode}", "stderr_tail": proc.stderr[-2000:]}
                print(f"{name} {method}: exit {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
                continue
            rec = json.loads(proc.stdout.strip().splitlines()[-1])
            info = rec.pop("model_info")
            if entry.get("noisy_sha1", info["noisy_sha1"]) != info["noisy_sha1"]:
                raise SystemExit(f"{name}: {method}'s process measured different noisy counts")
            entry.update({k: v for k, v in info.items() if k not in entry})
            rec.pop("model"), rec.pop("method")
            doc["machine"]["jax_device"] = rec["jax_device"]
            entry["methods"][method] = rec
            print(json.dumps({"model": name, "method": method, "d": rec["d"],
                              **{k: round(v, 4) for k, v in rec.items()
                                 if k.startswith(("call_", "compile_", "per_iter", "warm_")) and isinstance(v, float)},
                              **({"skipped": rec["skipped"]} if "skipped" in rec else {})}), flush=True)
        entry["loadavg_after"] = os.getloadavg()
        _compare(entry)
        doc["models"] = [m for m in doc["models"] if m["model"] != name] + [entry]
        doc["models"].sort(key=lambda m: m.get("d", 0))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(doc, indent=1))
    plot(doc, a.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
