"""No private row may end up inside a compiled program.

A ``jax.jit`` function that *closes over* an array bakes it into the compiled program as a
constant, and the persistent compilation cache (on by default in the CLI) then writes that
program, rows included, to disk. Every estimator that trains on private rows with JAX must pass
them as arguments. This test fits each of them in a fresh process with the cache on and
searches every cache file for the bytes of the private feature matrix.
"""

import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import pandas as pd
    import synthinfer
    from synthinfer.generate import DPCGAN, DPGAN
    from synthinfer.generate.tabular import TabularSchema
    from synthinfer.weights import DPMLPWeights

    cache, out = sys.argv[1], sys.argv[2]
    synthinfer.enable_compilation_cache(cache)
    rng = np.random.default_rng(7)
    n = 160
    df = pd.DataFrame({"x": rng.uniform(0, 10, n), "z": rng.uniform(-1, 1, n),
                       "y": rng.choice(["no", "yes"], n)})
    schema = {"x": (0.0, 10.0), "z": (-1.0, 1.0), "y": ["no", "yes"]}
    DPGAN(epsilon=2.0, delta=1e-4, seed=0, epochs=1, batch_size=32).fit(df, schema)
    DPCGAN(label="y", epsilon=2.0, delta=1e-4, seed=0, epochs=1, batch_size=32).fit(df, schema)
    gan_x = TabularSchema.from_spec(schema).transform(df).astype(np.float32)
    # the conditional GAN's features leave out the label column
    cgan_x = TabularSchema.from_spec({"x": schema["x"], "z": schema["z"]}).transform(df[["x", "z"]]).astype(np.float32)
    bounds = {"x": (0.0, 10.0), "z": (-1.0, 1.0)}
    synth = pd.DataFrame({"x": rng.uniform(0, 10, n), "z": rng.uniform(-1, 1, n)})
    w = DPMLPWeights(bounds, epsilon=1.0, delta=1e-4, epochs=1, lot_size=32, seed=0).fit(df[["x", "z"]], synth)
    mlp_x = w.features_.unit_cube(df[["x", "z"]])
    np.savez(out, gan=gan_x, cgan=cgan_x, mlp=mlp_x)
    """
)


def _decompressed(blob: bytes) -> bytes:
    """A cache entry's serialized executable: JAX stores it zstd-compressed when zstandard is
    installed, zlib-compressed otherwise."""
    if blob[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(blob)
    return zlib.decompress(blob)


def _chunks(a: np.ndarray, rows: int = 4) -> list[bytes]:
    """Byte strings of a few runs of consecutive rows, as a baked-in constant would hold them."""
    a = np.ascontiguousarray(a)
    starts = (0, len(a) // 2, len(a) - rows)
    return [a[s:s + rows].tobytes() for s in starts]


def test_private_rows_never_reach_the_compilation_cache(tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "rows.npz"
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(cache), str(out)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    files = [p for p in Path(cache).rglob("*") if p.is_file()]
    assert len(files) > 3  # the cache was on: the programs are there
    blobs = [_decompressed(p.read_bytes()) for p in files]
    rows = np.load(out)
    for name in ("gan", "cgan", "mlp"):
        assert rows[name].shape[0] == 160
        for chunk in _chunks(rows[name]):
            assert not any(chunk in b for b in blobs), f"{name}: private rows found in a cached program"
