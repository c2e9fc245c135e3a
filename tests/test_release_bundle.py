"""Release bundles: round trip, checksums, format version, no-overwrite, atomicity, guards."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synthinfer.data import MISSING, Domain, decode, with_missing_category
from synthinfer.errors import ArgumentTypeError, ParameterError, ReleaseError
from synthinfer.privacy import PrivacyLedger
from synthinfer.release import FORMAT_VERSION, ReleaseRecord, mark_private, open_release, write_release

DOMAIN = Domain.from_dict(
    {"columns": [{"name": "sex", "categories": ["F", "M"]}, {"name": "grade", "categories": [1, 2, 3, 4]}]}
)


def _codes(m: int = 3, n: int = 40, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # grade never takes its last category: the unused category must survive the round trip
    return [np.stack([rng.integers(0, 2, n), rng.integers(0, 3, n)], axis=1) for _ in range(m)]


def _ledger() -> PrivacyLedger:
    led = PrivacyLedger((1.0, 1e-6))
    led.spend("marginals", 0.7, 1e-6, mechanism="gaussian", sigma=4.2)
    led.spend("selection", 0.3, 0.0, mechanism="exponential")
    return led


_WRITE_OPTIONS = ("weights", "overwrite", "zip", "private_data", "skip_private_data_check")


def _write(path, datasets=None, **kw):
    """write_release with a test record; keywords change the record's fields or pass write options."""
    fields = dict(
        mechanism="napsu-mq",
        settings={"epsilon": 1.0, "delta": 1e-6, "n_chains": np.int64(2), "marginals": [("sex", "grade")]},
        domain=DOMAIN,
        marginals=[("sex", "grade")],
        ledger=_ledger(),
        n=40,
        seed_fixed=True,
    )
    options = {k: kw.pop(k) for k in _WRITE_OPTIONS if k in kw}
    if "private_data" not in options:  # the fixtures' codes stand for no private table
        options.setdefault("skip_private_data_check", True)
    fields.update(kw)
    return write_release(path, _codes() if datasets is None else datasets, record=ReleaseRecord(**fields), **options)


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("as_zip", [False, True])
def test_round_trip(tmp_path, as_zip):
    codes = _codes()
    rng = np.random.default_rng(1)
    weights = [rng.uniform(0.5, 2.0, len(c)) for c in codes]
    draws = {"theta": rng.normal(size=(2, 25, 3))}
    path = _write(tmp_path / "rel", codes, weights=weights, posterior=draws, zip=as_zip)
    assert path.exists() and (path.suffix == ".zip") == as_zip
    rel = open_release(path)
    assert rel.m == 3 and rel.n == 40 and rel.n_syn == 40
    for got, c, w, w_got in zip(rel.datasets, codes, weights, rel.weights, strict=True):
        pd.testing.assert_frame_equal(got, decode(c, DOMAIN))
        assert list(got["grade"].cat.categories) == [1, 2, 3, 4]
        np.testing.assert_array_equal(w_got, w)
    np.testing.assert_array_equal(rel.posterior.posterior["theta"].values, draws["theta"])
    man = rel.manifest
    assert man["format_version"] == FORMAT_VERSION
    assert man["mechanism"] == "napsu-mq" and man["settings"]["n_chains"] == 2
    assert man["seed_fixed"] is True and man["m"] == 3
    assert man["marginals"] == [["sex", "grade"]]
    assert rel.domain == DOMAIN
    spent = {c["name"]: (c["epsilon"], c["delta"]) for c in man["privacy"]["charges"]}
    assert spent == {"marginals": (0.7, 1e-6), "selection": (0.3, 0.0)}
    assert rel.ledger.spent == pytest.approx((1.0, 1e-6))
    assert set(man["files"]) == set(man["datasets"]) | {"posterior.nc", "report.html"}
    assert all(len(v["sha256"]) == 64 for v in man["files"].values())
    assert _leftovers(tmp_path) == []
    # the public report, checksummed like the rest: from the release alone
    assert man["report"] == "report.html"
    from synthinfer.release.manifest import sha256_bytes

    manifest_bytes = (path / "manifest.json").read_bytes() if not as_zip else zipfile.ZipFile(path).read("manifest.json")
    assert rel.fingerprint == sha256_bytes(manifest_bytes)
    assert open_release(path, fingerprint=rel.fingerprint.upper()).m == 3
    with pytest.raises(ReleaseError, match="published"):
        open_release(path, fingerprint="0" * 64)


def test_tampered_file_is_detected(tmp_path):
    path = _write(tmp_path / "rel")
    f = path / "data" / "synthetic_001.parquet"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(ReleaseError, match="synthetic_001.parquet was changed"):
        open_release(path)


def test_tampered_zip_member_is_detected(tmp_path):
    path = _write(tmp_path / "rel", zip=True)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["data/synthetic_000.parquet"] = members["data/synthetic_002.parquet"]
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    with pytest.raises(ReleaseError, match="synthetic_000.parquet was changed"):
        open_release(path)


def test_missing_and_extra_files_are_detected(tmp_path):
    path = _write(tmp_path / "rel")
    (path / "notes.txt").write_text("added later")
    with pytest.raises(ReleaseError, match="does not list"):
        open_release(path)
    (path / "notes.txt").unlink()
    (path / "data" / "synthetic_002.parquet").unlink()
    with pytest.raises(ReleaseError, match="missing"):
        open_release(path)


def test_newer_format_is_refused(tmp_path):
    path = _write(tmp_path / "rel")
    man = json.loads((path / "manifest.json").read_text())
    man["format_version"] = FORMAT_VERSION + 1
    (path / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ReleaseError, match="newer"):
        open_release(path)


def test_not_a_release(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseError, match="manifest"):
        open_release(tmp_path / "empty")
    with pytest.raises(ReleaseError, match="no release"):
        open_release(tmp_path / "nothing")


def test_no_overwrite_unless_asked(tmp_path):
    path = _write(tmp_path / "rel")
    before = (path / "manifest.json").read_text()
    with pytest.raises(ReleaseError, match="already exists"):
        _write(tmp_path / "rel", n=99)
    assert (path / "manifest.json").read_text() == before
    _write(tmp_path / "rel", n=99, overwrite=True)
    assert open_release(path).n == 99
    assert _leftovers(tmp_path) == []


def _failing_posterior(monkeypatch):
    import xarray as xr

    def boom(self, *a, **k):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    return {"theta": np.zeros((1, 5, 2))}


def test_failure_mid_write_leaves_nothing(tmp_path, monkeypatch):
    post = _failing_posterior(monkeypatch)
    with pytest.raises(OSError, match="simulated"):
        _write(tmp_path / "rel", posterior=post)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="simulated"):
        _write(tmp_path / "rel", posterior=post, zip=True)
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_old_release(tmp_path, monkeypatch):
    path = _write(tmp_path / "rel")
    post = _failing_posterior(monkeypatch)
    with pytest.raises(OSError):
        _write(tmp_path / "rel", n=99, posterior=post, overwrite=True)
    assert open_release(path).n == 40
    assert _leftovers(tmp_path) == []


def test_refuses_private_rows(tmp_path):
    private = decode(_codes(1)[0], DOMAIN)
    with pytest.raises(ReleaseError, match="private input itself"):
        _write(tmp_path / "a", [private], private_data=private)
    with pytest.raises(ReleaseError, match="exactly the rows"):
        _write(tmp_path / "b", [private.copy()], private_data=private)
    with pytest.raises(ReleaseError, match="marked as private"):
        _write(tmp_path / "c", [mark_private(private.copy())])
    shuffled = private.sample(frac=1.0, random_state=0)
    with pytest.raises(ReleaseError, match="exactly the rows"):
        _write(tmp_path / "d", [shuffled], private_data=private)
    with pytest.raises(ReleaseError, match="exactly the rows"):  # the private table with an extra column
        _write(tmp_path / "e", [private.copy()], private_data=private.assign(extra=1.0))
    assert list(tmp_path.iterdir()) == []


def test_private_data_is_required_unless_the_check_is_given_up(tmp_path):
    private = decode(_codes(1)[0], DOMAIN)
    with pytest.raises(ParameterError, match="private_data=.*skip_private_data_check=True"):
        _write(tmp_path / "a", [private.copy()], skip_private_data_check=False)
    with pytest.raises(ParameterError, match="not both"):
        _write(tmp_path / "b", skip_private_data_check=True, private_data=private)
    with pytest.raises(ArgumentTypeError, match="private_data"):
        _write(tmp_path / "c", private_data=private.to_numpy())
    with pytest.raises(ParameterError, match="skip_private_data_check"):
        _write(tmp_path / "d", skip_private_data_check="yes")
    assert list(tmp_path.iterdir()) == []
    other = decode(_codes(2)[1], DOMAIN)
    assert open_release(_write(tmp_path / "ok", [other], private_data=private)).m == 1


def test_refuses_seed_values_and_bad_arguments(tmp_path):
    with pytest.raises(ReleaseError, match="seed"):
        _write(tmp_path / "a", settings={"epsilon": 1.0, "seed": 1234})
    with pytest.raises(ReleaseError, match="nested.random_state"):
        _write(tmp_path / "a", settings={"nested": {"random_state": 7}})
    with pytest.raises(ReleaseError, match="ledger"):
        _write(tmp_path / "a", ledger={"epsilon": 1.0})
    with pytest.raises(ReleaseError, match="list of the m synthetic datasets"):
        _write(tmp_path / "a", decode(_codes(1)[0], DOMAIN))
    with pytest.raises(ReleaseError, match="weights\\[1\\]"):
        _write(tmp_path / "a", weights=[np.ones(40), np.ones(3), np.ones(40)])
    with pytest.raises(ReleaseError, match="cannot be written"):
        _write(tmp_path / "a", settings={"f": object()})
    with pytest.raises(ReleaseError, match="not in the release's Domain"):
        _write(tmp_path / "a", [pd.DataFrame({"zzz": [1, 2]})])
    assert not any(p.name == "a" for p in tmp_path.iterdir())
    # the seed_fixed flag is recorded, never a value
    path = _write(tmp_path / "ok", settings={"seed": None, "epsilon": 1.0})
    assert "seed_fixed" in json.loads((path / "manifest.json").read_text())


def test_manifest_has_no_seed_and_checksums_match_files(tmp_path):
    path = _write(tmp_path / "rel")
    from synthinfer.release.manifest import sha256_file

    man = json.loads((path / "manifest.json").read_text())
    for name, meta in man["files"].items():
        assert sha256_file(path / name) == meta["sha256"]
        assert os.path.getsize(path / name) == meta["bytes"]


def test_every_dataset_keeps_its_categories(tmp_path):
    a = pd.DataFrame({"sex": pd.Categorical(["F", "M"], categories=["F", "M"]), "grade": [1, 2]})
    b = pd.DataFrame({"sex": pd.Categorical(["F", "X"], categories=["F", "X"]), "grade": [1, 2]})
    # the manifest holds one category list per column: the writer refuses datasets that differ
    with pytest.raises(ReleaseError, match="column 'sex': dataset 1 has categories"):
        _write(tmp_path / "a", [a, b], domain=None)
    assert not (tmp_path / "a").exists()
    # a release whose data disagree with its manifest (checksums intact) is refused on opening,
    # rather than read with the unknown values turned into NaN
    from synthinfer.release.manifest import sha256_file

    path = _write(tmp_path / "b", [a, a], domain=None)
    name = "data/synthetic_001.parquet"
    b.assign(sex=b.sex.astype(str)).to_parquet(path / name, index=False)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": sha256_file(path / name), "bytes": (path / name).stat().st_size}
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ReleaseError, match=r"synthetic_001.parquet, column 'sex' holds \['X'\]"):
        open_release(path)


def test_values_outside_the_domain_are_refused(tmp_path):
    good = decode(_codes(1)[0], DOMAIN)
    good = good.assign(grade=good.grade.astype(int))
    bad = good.assign(grade=good.grade.replace({1: 7}))
    with pytest.raises(ReleaseError, match=r"dataset 1, column 'grade': values \['7'\]"):
        _write(tmp_path / "a", [good, bad])
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("as_zip", [False, True])
def test_numeric_categories_with_missing_round_trip(tmp_path, as_zip):
    """A Domain's numeric categories with "<missing>" appended mix numbers and text, which a
    Parquet column cannot hold: the release stores their text and reads the categories back."""
    domain = with_missing_category(DOMAIN, ["grade"])
    rng = np.random.default_rng(1)
    datasets = [decode(np.stack([rng.integers(0, 2, 50), rng.integers(0, 5, 50)], axis=1), domain) for _ in range(2)]
    assert list(datasets[0].grade.cat.categories) == [1, 2, 3, 4, MISSING]
    path = _write(tmp_path / ("r.zip" if as_zip else "r"), datasets, domain=domain, zip=as_zip)
    release = open_release(path)
    assert release.manifest["categories"]["grade"] == [1, 2, 3, 4, MISSING]
    for got, want in zip(release.datasets, datasets):
        pd.testing.assert_frame_equal(got, want)
