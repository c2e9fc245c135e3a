import os

# Keep XLA from spawning more threads than the CI machine's two cores can use.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
# In-process CLI tests must not write JAX's compilation cache into the home directory (and
# must not switch it on for the rest of the session); test_napsu_cli checks it in a subprocess.
os.environ["SYNTHINFER_COMPILE_CACHE"] = "0"


import zlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

#: test modules that check the privacy samplers and mechanisms themselves: they draw OpenDP's
#: real noise (or set their own test stream)
REAL_NOISE_MODULES = ("test_privacy",)


@pytest.fixture(autouse=True)
def seeded_noise(request, monkeypatch):
    """Each test draws its privacy noise from a numpy Generator seeded by the test's own id
    (``samplers._TEST_ONLY_noise_rng``), so it passes or fails the same way on every run:
    OpenDP's samplers cannot be seeded, and a statistical test on one noisy fit would otherwise
    depend on the noise of the day. Module-scoped fixtures (set up before this), the privacy
    modules (:data:`REAL_NOISE_MODULES`) and tests marked ``real_noise`` (checks of a sampler's
    distribution) keep OpenDP's samplers; a test may set its own stream."""
    if request.node.get_closest_marker("real_noise") or \
            request.module.__name__.rsplit(".", 1)[-1].startswith(REAL_NOISE_MODULES):
        yield
        return
    from synthinfer.privacy import samplers

    monkeypatch.setattr(samplers, "_TEST_ONLY_noise_rng", np.random.default_rng(zlib.crc32(request.node.nodeid.encode())))
    yield


@pytest.fixture(scope="module")
def float64():
    """Run the test in synthinfer's float64 context: for tests that call lower-level JAX code
    (a network's passes, likelihoods, losses) directly; the public entry points enter the
    context themselves, and tests of them run without this fixture. Module-scoped, so the
    module's own fixtures compute in float64 too."""
    from synthinfer import float64 as context

    with context():
        yield


@pytest.fixture()
def toy_files(tmp_path):
    """A folder with the 200-row toy table (``toy.csv``) and its public Domain (``domain.json``),
    for command-line tests."""
    from synthinfer.datasets import make_toy_logistic

    ds = make_toy_logistic(200, (1.0, 0.0), seed=0)
    ds.data.to_csv(tmp_path / "toy.csv", index=False)
    ds.domain.to_json(tmp_path / "domain.json")
    return tmp_path
