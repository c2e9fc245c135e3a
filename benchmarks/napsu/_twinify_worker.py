"""Timing worker for the reference NAPSU-MQ implementation, ``twinify`` 2.0.0.

Runs INSIDE the twinify virtualenv (Python 3.10; see README.md), imports only twinify and its
dependencies (never synthinfer), and is called by ``twinify_side_by_side.py``. It reads a JSON
config (first argument, or stdin) naming one ``part`` (``toy_laplace``, ``toy_nuts`` or
``adult``; the driver runs each in a fresh process), prints one JSON result on stdout; everything the libraries
print (numpyro's tqdm progress bars included) goes to stderr.

The fit is twinify's own ``NapsuMQModel.fit`` (twinify/napsu_mq/napsu_mq.py) taken apart into
its stages so each can be timed and the NUTS length configured (``fit`` hard-codes
4 x (800 + 2000)); every call below is the one ``fit`` makes, with the same arguments:

  setup    DataFrameData -> FullMarginalQuerySet(...).get_canonical_queries() -> MarkovNetwork
           -> sufficient statistics -> Gaussian mechanism (sensitivity sqrt(2 * #marginals))
  laplace  maximum_entropy_inference.run_numpyro_laplace_approximation (BFGS in
           jax.scipy.optimize.minimize, tol 1e-2, then jax.hessian of the potential)
  nuts     maximum_entropy_inference.run_numpyro_mcmc_normalised (NumPyro NUTS, tree depth 12,
           chains run sequentially, progress bar on as in ``fit``) + ArviZ back-transform
  generate NapsuMQResult.generate(rng, m, n, single_dataframe=False)

"first" is the first call in this process (includes JAX tracing and XLA compilation);
"second" is an identical second call. Each record also has the seconds JAX spent compiling
inside the call (``CompileClock``): twinify builds new closures on every call, so its second
calls compile again. The Adult log-posterior gradient is the jitted
value-and-gradient of the potential energy of twinify's model ``normal_prior_model_numpyro``
(what its Laplace optimiser differentiates). twinify's Adult Laplace fit is not run.
"""

from __future__ import annotations

import json
import sys
import time


class CompileClock:
    """Wall time of a call and the seconds JAX spent compiling inside it.

    Listens to JAX's own duration events (``jax.monitoring``; same names in jax 0.4 and 0.10):
    tracing to a jaxpr, lowering to MLIR, and XLA backend compilation. XLA compilations are
    top-level, so ``xla_compile_s`` never double counts; ``trace_lower_s`` may count nested
    traces twice. Shared by the driver (synthinfer's venv) and this worker (twinify's venv).
    """

    _KINDS = {
        "/jax/core/compile/jaxpr_trace_duration": "trace_lower_s",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "trace_lower_s",
        "/jax/core/compile/backend_compile_duration": "xla_compile_s",
    }

    def __init__(self) -> None:
        import jax.monitoring

        self.totals = {"trace_lower_s": 0.0, "xla_compile_s": 0.0}
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration: float, *args, **kwargs) -> None:
        kind = self._KINDS.get(event)
        if kind:
            self.totals[kind] += duration

    def measure(self, f):
        """``(f(), {"wall_s", "xla_compile_s", "trace_lower_s"})``."""
        before = dict(self.totals)
        t = time.perf_counter()
        out = f()
        rec = {"wall_s": time.perf_counter() - t}
        rec.update({k: self.totals[k] - before[k] for k in self.totals})
        return out, rec


def _read_table(path: str, columns: dict[str, int]):
    """The driver's CSV of integer codes -> categorical DataFrame with the full declared domain.

    Categories come from the config (the public domain), not from the values present, so that
    empty categories keep their place in the marginal tables.
    """
    import pandas as pd

    df = pd.read_csv(path)
    return pd.DataFrame({c: pd.Categorical(df[c], categories=list(range(k))) for c, k in columns.items()})


def _setup(df, marginals, epsilon: float, delta: float, seed: int):
    """Lines of NapsuMQModel.fit up to inference: queries, Markov network, noisy statistics."""
    import d3p.random
    import numpy as np
    from twinify.dataframe_data import DataFrameData
    from twinify.napsu_mq import privacy_accounting
    from twinify.napsu_mq.marginal_query import FullMarginalQuerySet
    from twinify.napsu_mq.markov_network import MarkovNetwork

    rng = d3p.random.PRNGKey(seed)
    dataframe = DataFrameData(df)
    n = dataframe.int_df.shape[0]
    queries = FullMarginalQuerySet(marginals, dataframe.values_by_col).get_canonical_queries()
    mnjax = MarkovNetwork(dataframe.values_by_col, queries)
    suff_stat = np.sum(queries.flatten()(dataframe.int_df.to_numpy()), axis=0)
    sigma_dp = privacy_accounting.sigma(epsilon, delta, np.sqrt(2 * len(marginals)))
    inference_rng, dp_rng = d3p.random.split(rng, 2)
    dp_suff_stat = suff_stat + d3p.random.normal(dp_rng, suff_stat.shape) * sigma_dp
    inference_rng = d3p.random.convert_to_jax_rng_key(inference_rng)
    return {"dataframe": dataframe, "n": n, "queries": queries, "mnjax": mnjax,
            "dp_suff_stat": dp_suff_stat, "sigma_dp": float(sigma_dp), "inference_rng": inference_rng}


class _StepCounter:
    """Collects NUTS ``num_steps`` (leapfrog steps = gradient evaluations) of every MCMC run.

    twinify builds its ``numpyro.infer.MCMC`` internally and does not ask for ``num_steps``;
    this subclass only adds that extra field (post-warmup draws; no effect on the sampler).
    """

    counts: list[int] = []

    @classmethod
    def install(cls) -> None:
        import numpyro.infer

        base = numpyro.infer.MCMC

        class MCMC(base):
            def run(self, *args, extra_fields=(), **kwargs):
                out = super().run(*args, extra_fields=tuple(extra_fields) + ("num_steps",), **kwargs)
                cls.counts.append(int(self.get_extra_fields()["num_steps"].sum()))
                return out

        numpyro.infer.MCMC = MCMC


def _laplace(s):
    import jax
    from twinify.napsu_mq import maximum_entropy_inference as mei

    approx_rng, mcmc_rng = jax.random.split(s["inference_rng"], 2)
    lap, success = mei.run_numpyro_laplace_approximation(approx_rng, s["dp_suff_stat"], s["n"], s["sigma_dp"], s["mnjax"])
    jax.block_until_ready(lap.covariance_matrix)
    return lap, bool(success), mcmc_rng


def _nuts(s, lap, mcmc_rng, cfg, progress_bar: bool = True):
    """run_numpyro_mcmc_normalised + the posterior post-processing of NapsuMQModel.fit."""
    import arviz as az
    from twinify.napsu_mq import maximum_entropy_inference as mei

    mcmc, backtransform = mei.run_numpyro_mcmc_normalised(
        mcmc_rng, s["dp_suff_stat"], s["n"], s["sigma_dp"], s["mnjax"], lap,
        num_samples=cfg["num_samples"], num_warmup=cfg["num_warmup"], num_chains=cfg["num_chains"],
        disable_progressbar=not progress_bar,
    )
    inf_data = az.from_numpyro(mcmc, log_likelihood=False)
    values = inf_data.posterior.stack(draws=("chain", "draw"))
    values = backtransform(values.norm_lambdas.values.transpose())
    return inf_data, values


def _sum_records(records: dict) -> dict:
    total = {k: sum(r[k] for r in records.values()) for k in ("wall_s", "xla_compile_s", "trace_lower_s")}
    total["stages"] = records
    return total


def _fit(df, marginals, cfg: dict, clock: CompileClock, nuts: bool):
    """NapsuMQModel.fit stage by stage: ``(timing record, state, posterior)``."""
    from twinify.napsu_mq import NapsuMQResult

    rec: dict = {}
    s, rec["setup"] = clock.measure(lambda: _setup(df, marginals, cfg["epsilon"], cfg["delta"], cfg["seed"]))
    (lap, ok, mcmc_rng), rec["laplace"] = clock.measure(lambda: _laplace(s))
    s["laplace_success"] = ok
    if not nuts:
        return _sum_records(rec), s, None
    n0 = len(_StepCounter.counts)
    (inf_data, values), rec["nuts"] = clock.measure(lambda: _nuts(s, lap, mcmc_rng, cfg))
    total = _sum_records(rec)
    total["nuts_gradient_evaluations_sampling"] = int(sum(_StepCounter.counts[n0:]))
    s["lap"], s["mcmc_rng"], s["inf_data"] = lap, mcmc_rng, inf_data
    result = NapsuMQResult(s["dataframe"].values_by_col, s["queries"], values, s["dataframe"].data_description)
    return total, s, result


def toy_laplace(cfg: dict, clock: CompileClock) -> dict:
    """Fit with the Laplace approximation only (setup + run_numpyro_laplace_approximation)."""
    df = _read_table(cfg["toy_csv"], cfg["toy_columns"])
    marginals = [tuple(m) for m in cfg["toy_marginals"]]
    out: dict = {}
    for call in ("first", "second"):
        out[call], s, _ = _fit(df, marginals, cfg, clock, nuts=False)
    out["canonical_queries"] = len(s["queries"].flatten().queries)
    out["sigma_dp"] = s["sigma_dp"]
    out["laplace_success"] = s["laplace_success"]
    return out


def toy_nuts(cfg: dict, clock: CompileClock) -> dict:
    """Fit with NUTS (setup + Laplace + NUTS, as NapsuMQModel.fit), then generate."""
    import arviz as az
    import d3p.random

    df = _read_table(cfg["toy_csv"], cfg["toy_columns"])
    marginals = [tuple(m) for m in cfg["toy_marginals"]]
    out: dict = {"nuts_settings": {k: cfg[k] for k in ("num_chains", "num_warmup", "num_samples")}}
    for call in ("first", "second"):
        out[f"fit_{call}"], s, result = _fit(df, marginals, cfg, clock, nuts=True)
    summ = az.summary(s["inf_data"], kind="diagnostics")
    out["rhat_max"] = float(summ["r_hat"].max())
    out["ess_bulk_min"] = float(summ["ess_bulk"].min())
    if cfg.get("nuts_without_progress_bar", True):
        # twinify's fit always shows NumPyro's progress bar, which makes NumPyro step the
        # sampler from Python once per draw; this is the NUTS stage with the bar off.
        _, out["nuts_stage_no_progress_bar"] = clock.measure(
            lambda: _nuts(s, s["lap"], s["mcmc_rng"], cfg, progress_bar=False))
    for call in ("first", "second"):
        dfs, out[f"generate_{call}"] = clock.measure(lambda: result.generate(
            d3p.random.PRNGKey(cfg["seed"] + 1), cfg["generate_m"], cfg["generate_n"], single_dataframe=False))
    out["generated_shape"] = [len(dfs), int(dfs[0].shape[0])]
    for call in ("first", "second"):
        out[f"pipeline_{call}"] = {k: out[f"fit_{call}"][k] + out[f"generate_{call}"][k]
                                   for k in ("wall_s", "xla_compile_s", "trace_lower_s")}
    return out


def adult(cfg: dict, clock: CompileClock) -> dict:
    """Adult-shaped queries: setup, then one jitted log-posterior value-and-gradient."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from numpyro.infer.util import potential_energy
    from twinify.napsu_mq import maximum_entropy_model as mem

    df = _read_table(cfg["adult_csv"], cfg["adult_columns"])
    marginals = [tuple(m) for m in cfg["adult_marginals"]]
    out: dict = {"n": len(df)}
    s, out["setup"] = clock.measure(lambda: _setup(df, marginals, cfg["epsilon"], cfg["delta"], cfg["seed"]))
    d = len(s["queries"].flatten().queries)
    out["canonical_queries"] = d
    # The same potential as numpyro.infer.util.initialize_model returns for the Laplace fit.
    args = (s["dp_suff_stat"], s["n"], s["sigma_dp"], 0, 10, s["mnjax"])
    vg = jax.jit(jax.value_and_grad(lambda lam: potential_energy(mem.normal_prior_model_numpyro, args, {}, {"lambdas": lam})))
    lam = jnp.asarray(0.1 * np.random.default_rng(cfg["seed"]).standard_normal(d))
    _, out["gradient_first_call"] = clock.measure(lambda: jax.block_until_ready(vg(lam)))
    times = [clock.measure(lambda: jax.block_until_ready(vg(lam)))[1]["wall_s"] for _ in range(cfg["grad_reps"])]
    out["gradient_ms_median"] = 1e3 * float(np.median(times))
    out["gradient_ms_min"] = 1e3 * float(np.min(times))
    out["gradient_reps"] = cfg["grad_reps"]
    out["laplace"] = "skipped (~29 min of XLA compilation)"
    return out


PARTS = {"toy_laplace": toy_laplace, "toy_nuts": toy_nuts, "adult": adult}


def main() -> None:
    cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else json.load(sys.stdin)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # keep stdout for the one JSON result
    t0 = time.perf_counter()
    import importlib.metadata as md

    import twinify  # enables float64 in JAX (twinify/__init__.py)

    _StepCounter.install()
    clock = CompileClock()
    res: dict = {
        "versions": {p: md.version(p) for p in ("twinify", "jax", "jaxlib", "numpyro", "d3p", "numpy", "pandas", "scipy", "arviz")},
        "twinify_version_attr": twinify.__version__,
        "python": sys.version.split()[0],
        "x64": bool(__import__("jax").config.jax_enable_x64),
        "import_s": time.perf_counter() - t0,
    }
    res[cfg["part"]] = PARTS[cfg["part"]](cfg, clock)
    res["worker_total_s"] = time.perf_counter() - t0
    real_stdout.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
