"""Releases written chunk by chunk from NapsuMQ.generate_stream, in bounded memory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import synthinfer
from synthinfer.data import Domain
from synthinfer.errors import ParameterError, ReleaseError
from synthinfer.generate import NapsuMQ
from synthinfer.release import DatasetStream

DOMAIN = Domain.from_dict({"columns": [
    {"name": "age", "bin_edges": [17, 30, 45, 60, 90], "integer": True},
    {"name": "sex", "categories": ["F", "M"]},
    {"name": "y", "categories": ["no", "yes"]},
]})


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    n = 3000
    age = rng.integers(17, 91, n)
    df = pd.DataFrame({"age": age, "sex": rng.choice(["F", "M"], n),
                       "y": np.where(rng.random(n) < (age - 10) / 100, "yes", "no")})
    return NapsuMQ([("age", "y"), ("sex", "y")], epsilon=2.0, inference="laplace", seed=0).fit(df, DOMAIN), df


def test_a_streamed_release_is_written_in_row_groups_and_opens_verified(fitted, tmp_path):
    gen, df = fitted
    stream = gen.generate_stream(3, n=2500, seed=1, chunk_rows=1000, numbers=["age"])
    path = synthinfer.write_release(tmp_path / "r", stream, record=gen.release_record(), private_data=df)
    rel = synthinfer.open_release(path)  # checks every file's SHA-256, hashed while writing
    assert rel.m == 3 and rel.n_syn == 2500 and rel.manifest["numbers_in_bins"] == ["age"]
    for name in rel.manifest["datasets"]:
        assert pq.ParquetFile(path / name).num_row_groups == 3
    d = rel.datasets[0]
    assert d["age"].between(17, 90).all() and d["age"].dtype == np.int64 and list(d["y"].cat.categories) == ["no", "yes"]
    # the synthetic data keep the age-outcome relation
    assert d.groupby("y", observed=True)["age"].mean().diff().iloc[-1] > 5
    assert rel.analyze("y ~ age + C(sex)", model="logit", progress=False).params["age"] > 0


def test_a_stream_is_checked_chunk_by_chunk_and_a_bad_one_writes_nothing(fitted, tmp_path):
    gen, df = fitted
    chunks = [df.iloc[:1500], df.iloc[1500:]]  # the private rows, in chunks
    stream = DatasetStream(m=1, n_syn=3000, chunk_rows=1500, datasets=[chunks])
    with pytest.raises(ReleaseError, match="exactly the rows of the private input"):
        synthinfer.write_release(tmp_path / "r", stream, record=gen.release_record(), private_data=df)
    short = DatasetStream(m=2, n_syn=2500, chunk_rows=1000, datasets=list(gen.generate_stream(2, n=2000)))
    with pytest.raises(ReleaseError, match="has 2000 rows, the stream says 2500"):
        synthinfer.write_release(tmp_path / "r", short, record=gen.release_record(), private_data=df)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ParameterError, match="chunk_rows"):
        gen.generate_stream(2, chunk_rows=0)


def test_a_release_read_lazily_gives_the_same_analysis_in_bounded_groups(fitted, tmp_path, monkeypatch):
    from synthinfer.analysis import api
    from synthinfer.release import LazyDatasets

    gen, df = fitted
    path = synthinfer.write_release(tmp_path / "r", gen.generate_stream(6, n=2000, seed=2, chunk_rows=700),
                                    record=gen.release_record(), private_data=df)
    eager, lazy = synthinfer.open_release(path), synthinfer.open_release(path, in_memory=False)
    assert isinstance(lazy.datasets, LazyDatasets) and isinstance(eager.datasets, list)
    pd.testing.assert_frame_equal(lazy.datasets[4], eager.datasets[4])
    monkeypatch.setattr(api, "GROUP_ROWS", 4000)  # two datasets at a time
    loads = []
    real = LazyDatasets.load
    monkeypatch.setattr(LazyDatasets, "load", lambda self, i: loads.append(i) or real(self, i))
    a = eager.analyze("y ~ age + C(sex)", model="logit", progress=False)
    b = lazy.analyze("y ~ age + C(sex)", model="logit", progress=False)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    assert sorted(loads) == list(range(6))  # each dataset read once
    # a file changed after opening is caught when it is read
    name = lazy.manifest["datasets"][1]
    (path / name).write_bytes((path / name).read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(ReleaseError, match="changed after release"):
        lazy.datasets[1]
