"""DP-GAN and DP-CGAN for mixed tabular data, with the discriminator exposed for importance weights.

A GAN is differentially private when its discriminator's training is: the generator only sees
the private data through the discriminator, so it and its samples are post-processing
(Ghalebikesabi et al. 2022, Section 2; Xie et al. 2018; Torkzadehmahani et al. 2019). The
discriminator is trained by DP-SGD (Abadi et al. 2016): every step Poisson-samples each private
row with probability ``q = batch_size / N``, clips each sampled row's gradient to L2 norm ``C``,
adds ``N(0, sigma^2 C^2 I)`` to their sum and divides by the expected batch size. Gradients of
the loss on generated rows need no noise (they do not touch private data).

Privacy: (epsilon, delta)-DP under substitution neighbours. ``sigma`` is the smallest noise
multiplier for which the PLD accountant of ``dp_accounting`` certifies the ``T = epochs *
round(N / batch_size)`` steps (:mod:`synthinfer.privacy.dpsgd`). ``N`` (the number of rows) is
treated as public, as everywhere in synthinfer. The conditional variant (DP-CGAN) also
releases the label distribution, through the Laplace mechanism on the label histogram (L1
sensitivity 2 under substitution), with ``label_epsilon_fraction`` of epsilon; the generator
samples labels from that noisy histogram so that no private label reaches it.

The loss is the original (non-saturating) GAN loss, so the optimal discriminator is
``D(x) = p_D(x) / (p_D(x) + p_G(x))`` for the balanced batches used here (expected ``B`` real and
exactly ``B`` generated rows per step), and ``logit D(x)`` estimates the log density ratio
``log p_D(x) / p_G(x)`` used by discriminator importance weights (Section 3.5). For a
classifier trained on ``N_D`` real and ``N_G`` generated rows, Bayes' rule gives
``log w(x) = logit D(x) + log(N_G / N_D)``; the paper's eq. (1) writes ``log(N_D / N_G)``,
which agrees only when the classes are balanced. They are here: :attr:`DPGAN.n_` and
:attr:`DPGAN.n_synthetic_` (the class sizes per epoch) are equal, so the offset is 0.

Defaults follow Ghalebikesabi et al. (2022), Supplement C.1: clip norm 1.0, batch size 64,
50 epochs, learning rate 0.15 for the discriminator (plain SGD, as in the DP-CGAN code they
adapted), hidden width ``d`` = the number of input features (Jordon et al. 2019). The one
deviation is the generator's optimiser (Adam instead of SGD 0.15; see ``generator_optimizer``).
Both the real and the generated rows' gradients are clipped to ``C`` (only the real ones are
noised), as in Algorithm 1 of Ghalebikesabi et al.: clipping one side only biases the
discriminator's log-odds, which the importance weights use.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any

import numpy as np
import pandas as pd

from synthinfer._precision import uses_float64
from synthinfer.data import DomainSpec
from synthinfer.errors import (
    DomainError,
    EmptyDataError,
    ParameterError,
    PrivacyError,
)
from synthinfer.generate.base import Generator
from synthinfer.generate.tabular import Continuous, TabularSchema
from synthinfer.privacy import PrivacyBudget, PrivacyLedger, default_delta, jax_key, make_rng, seed_fixed
from synthinfer.privacy.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier, noisy_clipped_sum, poisson_lots
from synthinfer.privacy.samplers import secret_jax_key, secret_rng
from synthinfer.privacy.randomness import SeedLike
from synthinfer.release.record import ReleaseRecord

#: Temperature of the Gumbel-softmax relaxation of generated categories during training:
#: small enough that the discriminator cannot tell generated from one-hot rows by softness
#: alone (CTGAN, Xu et al. 2019, use 0.2 as well).
_GUMBEL_TAU = 0.2


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _positive_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _bucket(n: int) -> int:
    """The power of two >= max(n, 64): array sizes that compiled functions are traced for."""
    return max(64, 1 << (int(n) - 1).bit_length())


class DPGAN(Generator):
    """Differentially private GAN for mixed tabular data (Xie et al. 2018).

    Parameters
    ----------
    epsilon, delta : the privacy budget; ``0 < delta < 1/N`` (DP-SGD has no pure-DP guarantee;
        :func:`~synthinfer.privacy.check_budget` refuses ``delta >= 1/N``). ``delta=None`` (the
        default) is ``1/N^2`` for ``N`` private rows (:func:`~synthinfer.privacy.default_delta`).
    seed : int, numpy Generator or None (OS entropy; use None for a real release); see
        :class:`~synthinfer.generate.Generator` for the seed rule.
    clip_norm : L2 bound ``C`` on each private row's discriminator gradient.
    batch_size : expected lot size ``B``; the sampling probability is ``q = B / N``.
    epochs : number of passes; ``T = epochs * round(N / B)`` DP-SGD steps.
    learning_rate : SGD step size of the discriminator (DP-SGD).
    generator_optimizer, generator_learning_rate : ``"adam"`` (default, step 1e-3, beta_1 = 0.5)
        or ``"sgd"``. The paper's setting, SGD with 0.15 for the generator too, lets the
        generator collapse on Adult (mean 1-way TVD 0.48 against 0.07 with Adam, 15 epochs at
        epsilon 6; ``benchmarks/baselines/run_baselines.py --generators dpgan-sgd``); it stays available
        as ``generator_optimizer="sgd", generator_learning_rate=0.15``. The generator is
        post-processing, so its optimiser does not affect privacy.
    hidden_dim : width of the hidden layers (None: the number of input features ``d``).
    latent_dim : dimension of the generator's Gaussian input (None: ``d``).

    Fitted attributes
    -----------------
    ``schema_``, ``ledger_``, ``noise_multiplier_``, ``sampling_probability_``, ``steps_``,
    ``epsilon_dpsgd_`` (the accountant's epsilon for the chosen noise multiplier), ``delta_`` (the
    fit's delta),
    ``n_synthetic_`` (generated rows per epoch of discriminator training), ``discriminator_params_``,
    ``generator_params_``, ``fit_seconds_``, and the contract's ``n_`` (private rows, also the
    real rows per epoch), ``ledger_``, ``seed_fixed_``, ``release_settings_``.
    """

    mechanism = "dpgan"
    #: name of the mechanism in the ledger's charges
    _charge_name = "DP-GAN"
    _conditional = False

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float | None = None,
        seed: SeedLike = None,
        *,
        clip_norm: float = 1.0,
        batch_size: int = 64,
        epochs: int = 50,
        learning_rate: float = 0.15,
        generator_optimizer: str = "adam",
        generator_learning_rate: float = 1e-3,
        hidden_dim: int | None = None,
        latent_dim: int | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.seed = seed
        self.clip_norm = clip_norm
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.generator_optimizer = generator_optimizer
        self.generator_learning_rate = generator_learning_rate
        self.hidden_dim = hidden_dim
        self.latent_dim = latent_dim

    # -- settings ------------------------------------------------------------------------
    def _release_settings(self) -> dict[str, Any]:
        """Constructor settings for a release's record, ``release_settings_`` (the seed only as
        whether one was fixed, the fit's delta also when the default chose it; ``get_params()``
        returns them as given)."""
        keys = ["epsilon", "clip_norm", "batch_size", "epochs", "learning_rate",
                "generator_optimizer", "generator_learning_rate", "hidden_dim", "latent_dim"]
        out = {k: getattr(self, k) for k in keys}
        # delta=None stands for the fit's default, 1/n^2: a record names the number
        out["delta"] = self.delta if self.delta is not None else getattr(self, "delta_", None)
        out["seed_fixed"] = seed_fixed(self.seed)
        return out

    def _validate(self) -> None:
        """Check the settings (``delta=None`` stands for :func:`default_delta` of the rows)."""
        if self.delta is None:
            PrivacyBudget(self.epsilon)
        elif PrivacyBudget(self.epsilon, self.delta).delta <= 0:
            raise PrivacyError(f"{type(self).__name__} needs delta > 0 (DP-SGD is not pure DP), got {self.delta!r}")
        _positive_float("clip_norm", self.clip_norm)
        _positive_int("batch_size", self.batch_size)
        _positive_int("epochs", self.epochs)
        _positive_float("learning_rate", self.learning_rate)
        _positive_float("generator_learning_rate", self.generator_learning_rate)
        if self.generator_optimizer not in ("adam", "sgd"):
            raise ParameterError(f"generator_optimizer must be 'adam' or 'sgd', got {self.generator_optimizer!r}")
        for name in ("hidden_dim", "latent_dim"):
            if getattr(self, name) is not None:
                _positive_int(name, getattr(self, name))

    # -- fitting -------------------------------------------------------------------------
    @uses_float64
    def fit(self, data: pd.DataFrame, domain: DomainSpec = None, ledger: PrivacyLedger | None = None) -> DPGAN:
        """Train on ``data`` with the public ``domain`` (required): a :class:`~synthinfer.data.Domain`
        (continuous columns with public bounds, categorical ones) or its short spelling
        ``{"age": (17, 90), "sex": ["Female", "Male"]}``
        (:meth:`Domain.from_spec <synthinfer.data.Domain.from_spec>`).

        Spends ``(epsilon, delta)`` from ``ledger`` (a new ledger for exactly that budget when
        None) before any training; raises :class:`~synthinfer.errors.BudgetExceededError`
        without touching the data if it does not fit.
        """
        self._start_fit()
        self._validate()
        if domain is None:
            raise ParameterError(f"{type(self).__name__} needs the public schema of the data: pass a Domain "
                                 "or a dict of bounds / categories")
        full = TabularSchema.from_spec(domain)
        feat_schema, label_col = self._split_schema(full)
        X = feat_schema.transform(data).astype(np.float32)
        labels = self._label_codes(data, label_col)
        n = X.shape[0]
        if n < 2:
            raise EmptyDataError(f"{type(self).__name__} needs at least 2 rows, got {n}")
        budget = PrivacyBudget(self.epsilon, default_delta(n) if self.delta is None else self.delta)
        ledger = self._ledger_for(budget, data, ledger)

        q = min(1.0, self.batch_size / n)
        steps_per_epoch = max(1, round(1.0 / q))
        steps = int(self.epochs * steps_per_epoch)
        eps_label = budget.epsilon * self.label_epsilon_fraction if self._conditional else 0.0
        eps_sgd = budget.epsilon - eps_label
        sigma = dpsgd_noise_multiplier(eps_sgd, budget.delta, q, steps)
        eps_check = dpsgd_epsilon(sigma, q, steps, budget.delta)
        # Checked before anything is spent, so a conditional fit cannot spend half.
        ledger.check(self._charge_name, budget.epsilon, budget.delta, mechanism="DP-SGD")
        rng = make_rng(self.seed)
        label_probs = None
        if self._conditional:
            label_probs = self._noisy_label_distribution(labels, label_col, eps_label, ledger)
        ledger.spend(
            f"{self._charge_name} discriminator",
            eps_sgd,
            budget.delta,
            mechanism="DP-SGD (Poisson-subsampled Gaussian; PLD accountant, substitution neighbours)",
            noise_multiplier=sigma,
            sampling_probability=q,
            steps=steps,
            clip_norm=float(self.clip_norm),
            batch_size=int(self.batch_size),
            epochs=int(self.epochs),
        )

        self.schema_ = full
        self.feature_schema_ = feat_schema
        self.label_column_ = label_col
        self.label_probabilities_ = label_probs
        self.noise_multiplier_ = sigma
        self.sampling_probability_ = q
        self.steps_ = steps
        self.epsilon_dpsgd_ = eps_check
        self.delta_ = budget.delta
        self.ledger_ = ledger
        self.n_ = n
        # Each step shows the discriminator B generated rows against B real rows in
        # expectation, so it is trained on balanced classes: N_G = N_D per epoch.
        self.n_synthetic_ = n
        self.seed_fixed_ = seed_fixed(self.seed)

        self._sampler = self._disc_jit = None
        t0 = time.perf_counter()
        self._train(X, labels, rng)
        self.fit_seconds_ = time.perf_counter() - t0
        self._fit_complete()
        return self

    def _split_schema(self, full: TabularSchema) -> tuple[TabularSchema, Any]:
        return full, None

    def _label_codes(self, df: pd.DataFrame, label_col: Any) -> np.ndarray | None:
        return None

    # -- networks ------------------------------------------------------------------------
    def _dims(self) -> tuple[int, int, int, int]:
        d = self.feature_schema_.n_features
        c = 0 if self.label_column_ is None else self.label_column_.size
        hidden = self.hidden_dim or (d + c)
        latent = self.latent_dim or (d + c)
        return d, c, hidden, latent

    def _init_params(self, key):
        from synthinfer._jax import jax, jnp

        d, c, hidden, latent = self._dims()

        def dense(k, n_in, n_out):
            w = jax.random.normal(k, (n_in, n_out), dtype=jnp.float32) * jnp.sqrt(2.0 / (n_in + n_out)).astype(jnp.float32)
            return {"w": w, "b": jnp.zeros((n_out,), dtype=jnp.float32)}

        k = jax.random.split(key, 6)
        gen = [dense(k[0], latent + c, hidden), dense(k[1], hidden, hidden), dense(k[2], hidden, d)]
        disc = [dense(k[3], d + c, hidden), dense(k[4], hidden, hidden), dense(k[5], hidden, 1)]
        return gen, disc

    @staticmethod
    def _mlp(params, x, act):
        for layer in params[:-1]:
            x = act(x @ layer["w"] + layer["b"])
        return x @ params[-1]["w"] + params[-1]["b"]

    def _disc_logit(self, dparams, x, cond):
        from synthinfer._jax import jax, jnp

        inp = x if cond is None else jnp.concatenate([x, cond], axis=-1)
        return self._mlp(dparams, inp, jax.nn.leaky_relu)[..., 0]

    def _gen_output(self, gparams, z, cond, key, hard: bool):
        """Generator: sigmoid for continuous columns, per-column categories for categorical ones.

        In training (``hard=False``) categorical blocks are Gumbel-softmax relaxations; when
        sampling (``hard=True``) they are exact one-hot draws from the softmax (Gumbel-max).
        """
        from synthinfer._jax import jax, jnp

        inp = z if cond is None else jnp.concatenate([z, cond], axis=-1)
        logits = self._mlp(gparams, inp, jax.nn.relu)
        parts = []
        for col, (a, b) in zip(self.feature_schema_.columns, self.feature_schema_.blocks):
            block = logits[:, a:b]
            if isinstance(col, Continuous):
                parts.append(jax.nn.sigmoid(block))
                continue
            key, sub = jax.random.split(key)
            g = jax.random.gumbel(sub, block.shape, dtype=block.dtype)
            if hard:
                parts.append(jax.nn.one_hot(jnp.argmax(block + g, axis=-1), b - a, dtype=block.dtype))
            else:
                parts.append(jax.nn.softmax((block + g) / _GUMBEL_TAU, axis=-1))
        return jnp.concatenate(parts, axis=-1)

    def _sample_cond(self, key, size):
        from synthinfer._jax import jax, jnp

        if self.label_column_ is None:
            return None
        probs = jnp.asarray(self.label_probabilities_, dtype=jnp.float32)
        codes = jax.random.categorical(key, jnp.log(probs), shape=(size,))
        return jax.nn.one_hot(codes, probs.shape[0], dtype=jnp.float32)

    # -- DP-SGD training -----------------------------------------------------------------
    def _optimizers(self):
        import optax

        if self.generator_optimizer == "sgd":
            gen = optax.sgd(self.generator_learning_rate)
        else:
            gen = optax.adam(self.generator_learning_rate, b1=0.5)
        return optax.sgd(self.learning_rate), gen

    def _train(self, X: np.ndarray, labels: np.ndarray | None, rng: np.random.Generator) -> None:
        import optax

        from synthinfer._jax import jax, jnp

        n = X.shape[0]
        B, C, sigma = int(self.batch_size), float(self.clip_norm), float(self.noise_multiplier_)
        q, steps = self.sampling_probability_, self.steps_
        _, c, _, latent = self._dims()
        k_init = jax_key(rng)
        key = secret_jax_key()  # the training chain carries DP-SGD's noise keys: never from seed
        gparams, dparams = self._init_params(k_init)
        opt_d, opt_g = self._optimizers()
        state_d, state_g = opt_d.init(dparams), opt_g.init(gparams)
        Xj = jnp.asarray(X)
        Cj = None if labels is None else jax.nn.one_hot(jnp.asarray(labels), c, dtype=jnp.float32)

        # Poisson lots padded to one fixed width (masked), so that the whole epoch runs as one
        # compiled scan; the padding never changes the sum of clipped gradients.
        lot_idx, lot_mask = poisson_lots(n, q, steps, secret_rng(), width_multiple=16)
        steps_per_epoch = steps // int(self.epochs)

        def disc_real_loss(dp, x, cond):
            # -log D(x) for one private row
            logit = self._disc_logit(dp, x[None, :], None if cond is None else cond[None, :])
            return jax.nn.softplus(-logit[0])

        def disc_fake_loss(dp, x, cond):
            # -log(1 - D(x)) for one generated row
            logit = self._disc_logit(dp, x[None, :], None if cond is None else cond[None, :])
            return jax.nn.softplus(logit[0])

        cond_axis = 0 if Cj is not None else None
        per_example_grad = jax.vmap(jax.grad(disc_real_loss), in_axes=(None, 0, cond_axis))
        per_example_fake_grad = jax.vmap(jax.grad(disc_fake_loss), in_axes=(None, 0, cond_axis))
        ones = jnp.ones((B,), dtype=jnp.float32)

        def step(data, carry, inp):
            X_all, C_all = data
            gp, dp, sd, sg, key = carry
            idx, mask = inp
            key, kz, kc, kgum, kn, kz2, kc2, kgum2 = jax.random.split(key, 8)
            xb = X_all[idx]
            cb = None if C_all is None else C_all[idx]
            # Discriminator: clipped per-example gradients of the real rows, summed, noised.
            grads = per_example_grad(dp, xb, cb)
            noisy = noisy_clipped_sum(grads, mask, C, sigma, kn)
            real_grad = jax.tree_util.tree_map(lambda g: g / B, noisy)
            cf = self._sample_cond(kc, B)
            xf = jax.lax.stop_gradient(self._gen_output(gp, jax.random.normal(kz, (B, latent), dtype=jnp.float32), cf, kgum, False))
            # Generated rows' gradients are clipped too (without noise): clipping only the real
            # side would bias the discriminator towards "generated" (cf. Algorithm 1 of
            # Ghalebikesabi et al., which clips every example and noises only the real ones).
            fake_grads = per_example_fake_grad(dp, xf, cf)
            fake_sum = noisy_clipped_sum(fake_grads, ones, C, 0.0, kn)
            fake_grad = jax.tree_util.tree_map(lambda g: g / B, fake_sum)
            gd = jax.tree_util.tree_map(jnp.add, real_grad, fake_grad)
            upd, sd = opt_d.update(gd, sd, dp)
            dp = optax.apply_updates(dp, upd)
            # Generator (post-processing): non-saturating loss -log D(G(z)).
            cf2 = self._sample_cond(kc2, B)
            z2 = jax.random.normal(kz2, (B, latent), dtype=jnp.float32)

            def gen_loss(p):
                return jnp.mean(jax.nn.softplus(-self._disc_logit(dp, self._gen_output(p, z2, cf2, kgum2, False), cf2)))

            upd, sg = opt_g.update(jax.grad(gen_loss)(gp), sg, gp)
            gp = optax.apply_updates(gp, upd)
            return (gp, dp, sd, sg, key), None

        # The private rows are an *argument* of the compiled epoch: a closure would bake them
        # into the program as a constant, and the persistent compilation cache (the CLI's
        # default) would write them to disk (tests/test_compiled_programs_hold_no_rows.py).
        run_epoch = jax.jit(
            lambda carry, idx, mask, data: jax.lax.scan(functools.partial(step, data), carry, (idx, mask))[0]
        )
        carry = (gparams, dparams, state_d, state_g, key)
        for e in range(int(self.epochs)):
            epoch = slice(e * steps_per_epoch, (e + 1) * steps_per_epoch)
            carry = run_epoch(carry, jnp.asarray(lot_idx[epoch]), jnp.asarray(lot_mask[epoch], dtype=jnp.float32),
                              (Xj, Cj))
        self.generator_params_ = jax.device_get(carry[0])
        self.discriminator_params_ = jax.device_get(carry[1])

    def _summary_details(self) -> list[str]:
        return [f"  DP-SGD: noise multiplier {self.noise_multiplier_:.4g}, sampling probability "
                f"{self.sampling_probability_:.4g}, {self.steps_} steps; accountant's epsilon "
                f"{self.epsilon_dpsgd_:.4g} at delta {self.delta_:.3g}; trained in {self.fit_seconds_:.1f} s"]

    # -- using the fitted model ----------------------------------------------------------
    def release_record(self) -> ReleaseRecord:
        """The release's record of this fit; its Domain is the public schema the GAN was fitted
        with (continuous columns with their public bounds, categorical ones)."""
        return dataclasses.replace(super().release_record(), domain=self.schema_.domain)

    @uses_float64
    def generate(self, m: int, n: int | None = None, seed: SeedLike = None) -> list[pd.DataFrame]:
        """Draw ``m`` synthetic datasets of ``n`` rows (default: as many as the real data).

        Post-processing of the DP generator: costs no privacy budget.
        """
        from synthinfer._jax import jax

        self._check_fitted()
        m, n = self._check_m_n(m, n)
        key = jax_key(self._generate_rng(seed))
        sample = self._jitted_sampler()
        out = []
        for _ in range(m):
            key, sub = jax.random.split(key)
            # compiled for power-of-two sizes only, then cut to n (fewer recompilations)
            x, cond = sample(self.generator_params_, sub, _bucket(n))
            out.append(self._decode(np.asarray(x)[:n], None if cond is None else np.asarray(cond)[:n]))
        return out

    def _jitted_sampler(self):
        """``(params, key, n) -> (features, condition)``, compiled once per fitted model and n."""
        from synthinfer._jax import jax, jnp

        if getattr(self, "_sampler", None) is None:
            _, _, _, latent = self._dims()

            def sample(gp, key, n):
                kz, kc, kg = jax.random.split(key, 3)
                cond = self._sample_cond(kc, n)
                z = jax.random.normal(kz, (n, latent), dtype=jnp.float32)
                return self._gen_output(gp, z, cond, kg, True), cond

            self._sampler = jax.jit(sample, static_argnums=2)
        return self._sampler

    def _decode(self, x: np.ndarray, cond: np.ndarray | None) -> pd.DataFrame:
        cont, cats = [], []
        for col, (a, b) in zip(self.feature_schema_.columns, self.feature_schema_.blocks):
            (cont if isinstance(col, Continuous) else cats).append(x[:, a] if isinstance(col, Continuous) else np.argmax(x[:, a:b], axis=1))
        n = x.shape[0]
        scaled = np.stack(cont, axis=1) if cont else np.zeros((n, 0))
        codes = np.stack(cats, axis=1) if cats else np.zeros((n, 0), dtype=np.int64)
        df = self.feature_schema_.inverse_transform(scaled, codes)
        if cond is not None:
            lab = self.label_column_
            df[lab.name] = pd.Categorical.from_codes(np.argmax(cond, axis=1), categories=list(lab.categories))
            df = df[list(self.schema_.names)]
        return df

    @uses_float64
    def discriminator_log_odds(self, df: pd.DataFrame) -> np.ndarray:
        """``logit D(x)`` of the trained discriminator for each row of ``df`` (real or synthetic).

        Post-processing of the DP discriminator (no privacy cost). It estimates
        ``log p_D(x) / p_G(x)`` up to the class-balance offset ``log(n_synthetic_ / n_)``,
        which is 0 for the balanced batches used in training (Ghalebikesabi et al. 2022,
        Section 3.5; see the module docstring on eq. 1).
        """
        from synthinfer._jax import jax, jnp

        self._check_fitted()
        X = self.feature_schema_.transform(df).astype(np.float32)
        n = X.shape[0]
        X = np.pad(X, ((0, _bucket(n) - n), (0, 0)))
        cond = None
        if self.label_column_ is not None:
            codes = np.pad(self._label_codes(df, self.label_column_), (0, _bucket(n) - n))
            cond = jax.nn.one_hot(jnp.asarray(codes), self.label_column_.size, dtype=jnp.float32)
        if getattr(self, "_disc_jit", None) is None:
            self._disc_jit = jax.jit(self._disc_logit)
        logits = self._disc_jit(self.discriminator_params_, jnp.asarray(X), cond)
        return np.asarray(logits, dtype=np.float64)[:n]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon!r}, delta={self.delta!r})"


class DPCGAN(DPGAN):
    """Conditional DP-GAN (Torkzadehmahani et al. 2019): generator and discriminator see a label.

    Parameters are those of :class:`DPGAN` plus ``label`` (a categorical column of the schema)
    and ``label_epsilon_fraction`` (default 0.05): the share of epsilon spent on the noisy label
    histogram that the generator samples labels from (Laplace mechanism, L1 sensitivity 2
    under substitution neighbours; Dwork & Roth 2014, Thm 3.6). The original DP-CGAN feeds
    the generator the labels of the private batch, which no accountant covers; we do not.
    """

    mechanism = "dpcgan"
    _charge_name = "DP-CGAN"
    _conditional = True

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float | None = None,
        seed: SeedLike = None,
        *,
        label: str,
        label_epsilon_fraction: float = 0.05,
        clip_norm: float = 1.0,
        batch_size: int = 64,
        epochs: int = 50,
        learning_rate: float = 0.15,
        generator_optimizer: str = "adam",
        generator_learning_rate: float = 1e-3,
        hidden_dim: int | None = None,
        latent_dim: int | None = None,
    ) -> None:
        super().__init__(
            epsilon, delta, seed, clip_norm=clip_norm, batch_size=batch_size, epochs=epochs,
            learning_rate=learning_rate, generator_optimizer=generator_optimizer,
            generator_learning_rate=generator_learning_rate, hidden_dim=hidden_dim, latent_dim=latent_dim,
        )
        self.label = label
        self.label_epsilon_fraction = label_epsilon_fraction

    def _release_settings(self) -> dict[str, Any]:
        out = super()._release_settings()
        out.update(label=self.label, label_epsilon_fraction=self.label_epsilon_fraction)
        return out

    def _validate(self) -> None:
        f = self.label_epsilon_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not (0 < f < 1):
            raise PrivacyError(f"label_epsilon_fraction must be in (0, 1), got {f!r}")
        super()._validate()

    def _split_schema(self, full: TabularSchema) -> tuple[TabularSchema, Any]:
        lab = full[self.label]
        if isinstance(lab, Continuous):
            raise DomainError(f"label column {self.label!r} must be categorical, but the schema gives it bounds")
        if len(full.columns) < 2:
            raise DomainError("DPCGAN needs at least one column besides the label")
        return full.without(self.label), lab

    def _label_codes(self, df: pd.DataFrame, label_col: Any) -> np.ndarray:
        from synthinfer.data import Domain, encode

        return encode(df[[label_col.name]], Domain([label_col]))[:, 0]

    def _noisy_label_distribution(self, labels, label_col, eps, ledger) -> np.ndarray:
        """Label histogram with discrete Laplace noise, clipped at 0 and normalised (post-processing)."""
        from synthinfer.privacy import discrete_laplace_mechanism

        counts = np.bincount(labels, minlength=label_col.size)
        noisy, _ = discrete_laplace_mechanism(
            counts, sensitivity=2.0, epsilon=eps, ledger=ledger,
            name=f"{self._charge_name} label histogram",
        )
        noisy = np.clip(noisy, 0, None).astype(np.float64)
        return noisy / noisy.sum() if noisy.sum() > 0 else np.full(label_col.size, 1.0 / label_col.size)
