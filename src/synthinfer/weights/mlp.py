"""Neural-network importance weights: MLPWeights (non-private) and DPMLPWeights (Algorithm 1).

Both train a one-hidden-layer perceptron to tell real (``y = 1``) from synthetic (``y = 0``)
rows and turn its logits into log weights with eq. (1) (Section 3.4). Inputs are the public
``[0, 1]`` features of :class:`~synthinfer.weights.features.FeatureMap` (no intercept column:
the network has biases).

``DPMLPWeights`` implements the *relaxed DP-SGD* of Algorithm 1 (Ghalebikesabi et al. 2022,
Section 3.4, after Abadi et al. 2016): lots are Poisson-sampled from the union of real and
synthetic rows with rate ``q = L / (N_D + N_G)``, every per-example gradient (real and
synthetic) is clipped to L2 norm ``C``, and Gaussian noise ``N(0, sigma^2 C^2 I)`` protects the
real rows only; the synthetic rows are already DP and their labels public (Proposition 3).

**Mechanism and guarantee.** Each step releases ``sum_{i in lot} clip(g_i) + N(0, sigma^2 C^2 I)``,
divided by the *expected* lot size ``L`` (the realised number of real rows is private).
Neighbouring datasets replace one real row (synthinfer's substitution neighbours), which
changes the sum by at most ``2 C`` in L2, and only when that row is in the lot; so each step
is a Poisson-subsampled Gaussian mechanism with rate ``q`` and noise multiplier ``sigma`` on the
real data, and ``T`` steps are accounted by the PLD accountant of ``dp-accounting`` for
substitution (:mod:`synthinfer.privacy.dpsgd`, shared with the DP-GAN). ``sigma`` is solved so
that the total is the target ``(epsilon, delta)``. (Abadi et al. and the paper account
add-or-remove neighbours, whose bound ``C`` would understate the loss under substitution.)
We add *one* noise draw per step, as Abadi et al. and the accountant do; Algorithm 1, line 9,
as printed adds a draw per real example in the lot, which only adds noise and makes its
variance depend on the private lot composition.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np
import pandas as pd

from synthinfer._precision import uses_float64
from synthinfer.errors import NonPrivateWarning, ParameterError, PrivacyError, user_stacklevel
from synthinfer.privacy import PrivacyLedger, make_rng, seed_fixed
from synthinfer.privacy.dpsgd import dpsgd_noise_multiplier, noisy_clipped_sum, poisson_lots
from synthinfer.privacy.randomness import SeedLike, jax_key
from synthinfer.privacy.samplers import secret_jax_key, secret_rng
from synthinfer.weights.classifier import WeightEstimator, ledger_for, log_weights_from_logits
from synthinfer.weights.features import Bounds, FeatureMap

def _init_mlp(key, d_in: int, hidden: int):
    from synthinfer._jax import jax, jnp

    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (d_in, hidden)) * jnp.sqrt(2.0 / d_in),
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden,)) * jnp.sqrt(1.0 / hidden),
        "b2": jnp.zeros(()),
    }


def mlp_logits(params, x):
    """Logits of the one-hidden-layer ReLU network."""
    from synthinfer._jax import jax

    return jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def _bce(params, x, y):
    """Binary cross-entropy with logits of one example (numerically stable)."""
    from synthinfer._jax import jax

    z = mlp_logits(params, x)
    return jax.nn.softplus(z) - y * z


def per_example_gradients(params, x, y):
    """Gradients of the cross-entropy of each row ``(x_i, y_i)``, with a leading row axis."""
    from synthinfer._jax import jax

    return jax.vmap(jax.grad(_bce), in_axes=(None, 0, 0))(params, x, y)


@lru_cache(maxsize=None)
def _dp_sgd_runner(learning_rate: float):
    """A jitted scan over DP-SGD steps for a given learning rate (compiled once per shape)."""
    import optax

    from synthinfer._jax import jax

    opt = optax.adam(learning_rate)

    def run(params, x, y, idx, mask, noise_keys, clip_norm, noise_multiplier, lot_size):
        def step(carry, inp):
            params, opt_state = carry
            ix, m, key = inp
            summed = noisy_clipped_sum(per_example_gradients(params, x[ix], y[ix]), m, clip_norm, noise_multiplier, key)
            # divided by the expected lot size L, as in Abadi et al.'s DP-SGD
            noisy = jax.tree_util.tree_map(lambda leaf: leaf / lot_size, summed)
            updates, opt_state = opt.update(noisy, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), (idx, mask, noise_keys))
        return params

    return jax.jit(run)


class DPMLPWeights(WeightEstimator):
    """DP importance weights from an MLP trained with relaxed DP-SGD (Algorithm 1, Prop. 3).

    Sensitivity and guarantee: see the module docstring. The (epsilon, delta) is accounted on
    the real data only and spent through the ledger before training; ``noise_multiplier_`` is
    the solved ``sigma``.

    Parameters
    ----------
    bounds : public column bounds / categories (see :class:`FeatureMap`).
    epsilon, delta : the budget (``delta > 0``).
    hidden : width of the hidden layer (the paper uses ``d``; default 32).
    epochs : passes over the union of real and synthetic rows; ``T = ceil(epochs / q)`` steps.
    lot_size : expected lot size ``L``.
    clip_norm : per-example gradient bound ``C``.
    learning_rate : Adam step size (Adam is post-processing of the noisy gradients).
    seed : randomness of the initialisation (the lots and the noise come from the OS CSPRNG,
        :func:`synthinfer.privacy.samplers.secret_rng` / :func:`~synthinfer.privacy.samplers.secret_jax_key`).
    """

    def __init__(self, bounds: Bounds, *, epsilon: float, delta: float, hidden: int = 32, epochs: float = 5.0,
                 lot_size: int = 256, clip_norm: float = 1.0, learning_rate: float = 0.01,
                 seed: SeedLike = None, clip: bool = False):
        self.bounds = bounds
        self.epsilon = epsilon
        self.delta = delta
        self.hidden = hidden
        self.epochs = epochs
        self.lot_size = lot_size
        self.clip_norm = clip_norm
        self.learning_rate = learning_rate
        self.seed = seed
        self.clip = clip

    def _schedule(self, n_total: int) -> tuple[float, int]:
        if not (isinstance(self.lot_size, (int, np.integer)) and self.lot_size >= 1):
            raise ParameterError(f"lot_size must be a positive integer, got {self.lot_size!r}")
        if not (self.epochs > 0):
            raise ParameterError(f"epochs must be > 0, got {self.epochs!r}")
        if not (self.clip_norm > 0):
            raise PrivacyError(f"clip_norm must be > 0, got {self.clip_norm!r}")
        q = min(1.0, self.lot_size / n_total)
        return q, max(1, math.ceil(self.epochs / q))

    @uses_float64
    def fit(self, real: pd.DataFrame, synthetic: pd.DataFrame, ledger: PrivacyLedger | None = None) -> DPMLPWeights:
        """Solve sigma, spend (epsilon, delta) through the ledger, then train with DP-SGD."""
        from synthinfer._jax import jnp, jax

        self._check_tables(real, synthetic)
        self.ledger_ = ledger_for(ledger, self.epsilon, self.delta, len(real))
        self.features_ = FeatureMap(self.bounds, clip=self.clip, intercept=False)
        x = np.vstack([self.features_.unit_cube(real), self.features_.unit_cube(synthetic)])
        y = np.r_[np.ones(len(real)), np.zeros(len(synthetic))]
        q, steps = self._schedule(len(x))
        sigma = dpsgd_noise_multiplier(self.epsilon, self.delta, q, steps)
        self.ledger_.spend(
            "DPMLPWeights", self.epsilon, self.delta, mechanism="relaxed DP-SGD (Poisson-subsampled Gaussian)",
            noise_multiplier=sigma, sampling_rate=q, steps=steps, clip_norm=float(self.clip_norm),
            accountant="PLD (dp-accounting)", neighbouring="substitution of one real row",
        )
        # lots and noise from the OS CSPRNG (their secrecy is what the accountant assumes);
        # only the initialisation follows the seed
        idx, mask = poisson_lots(len(x), q, steps, secret_rng())
        k_init, k_noise = jax_key(make_rng(self.seed)), secret_jax_key()
        params = _init_mlp(k_init, x.shape[1], int(self.hidden))
        run = _dp_sgd_runner(float(self.learning_rate))
        self.params_ = jax.device_get(run(
            params, jnp.asarray(x), jnp.asarray(y), jnp.asarray(idx), jnp.asarray(mask, dtype=x.dtype),
            jax.random.split(k_noise, steps), float(self.clip_norm), float(sigma),
            float(self.lot_size),
        ))
        self.noise_multiplier_, self.sampling_rate_, self.steps_ = sigma, q, steps
        self.n_real_, self.n_synthetic_ = len(real), len(synthetic)
        self.seed_fixed_ = seed_fixed(self.seed)
        return self

    @uses_float64
    def logits(self, synthetic: pd.DataFrame) -> np.ndarray:
        """Classifier logits ``logit p(y=1|x)``."""
        from synthinfer._jax import jnp

        self._check_fitted("params_")
        return np.asarray(mlp_logits(self.params_, jnp.asarray(self.features_.unit_cube(synthetic))))

    @uses_float64
    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        return log_weights_from_logits(self.logits(synthetic), self.n_real_, self.n_synthetic_)


class MLPWeights(WeightEstimator):
    """Non-private MLP weights (scikit-learn ``MLPClassifier``; Section 3.4 without privacy).

    **Not differentially private.** Parameters: ``hidden`` units, L2 penalty ``alpha``,
    ``max_iter`` epochs (with early stopping on a 10% validation split from 2,000 rows on), ``seed``.
    """

    def __init__(self, bounds: Bounds, *, hidden: int = 32, alpha: float = 1e-4, max_iter: int = 1000,
                 seed: SeedLike = None, clip: bool = False):
        self.bounds = bounds
        self.hidden = hidden
        self.alpha = alpha
        self.max_iter = max_iter
        self.seed = seed
        self.clip = clip

    @uses_float64
    def fit(self, real: pd.DataFrame, synthetic: pd.DataFrame, ledger: PrivacyLedger | None = None) -> MLPWeights:
        from sklearn.neural_network import MLPClassifier

        warnings.warn("MLPWeights uses the real data without privacy protection", NonPrivateWarning,
                      stacklevel=user_stacklevel())
        self._check_tables(real, synthetic)
        self.features_ = FeatureMap(self.bounds, clip=self.clip, intercept=False)
        x = np.vstack([self.features_.unit_cube(real), self.features_.unit_cube(synthetic)])
        y = np.r_[np.ones(len(real)), np.zeros(len(synthetic))]
        seed = int(make_rng(self.seed).integers(2**31 - 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # sklearn's ConvergenceWarning on small data
            self.model_ = MLPClassifier((int(self.hidden),), alpha=self.alpha, max_iter=self.max_iter,
                                        early_stopping=len(x) >= 2000, random_state=seed).fit(x, y)
        self.n_real_, self.n_synthetic_ = len(real), len(synthetic)
        self.ledger_ = ledger
        return self

    @uses_float64
    def log_weights(self, synthetic: pd.DataFrame) -> np.ndarray:
        self._check_fitted("model_")
        p = self.model_.predict_proba(self.features_.unit_cube(synthetic))[:, 1]
        p = np.clip(p, 1e-12, 1 - 1e-12)
        return log_weights_from_logits(np.log(p) - np.log1p(-p), self.n_real_, self.n_synthetic_)
