"""The HTML report of a release (synthinfer.reporting, `synthinfer report`)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from typer.testing import CliRunner

from synthinfer.cli import app
from synthinfer.datasets import load_adult, make_toy_logistic
from synthinfer.napsu import NapsuMQ
from synthinfer.release import open_release, write_release
from synthinfer.reporting import report
from synthinfer.reporting.fidelity import marginal_tv, pmse, tv_matrix

TOY_FORMULA = "y ~ C(x1) + C(x2)"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    ds = make_toy_logistic(2000, (1.0, 0.0), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = NapsuMQ([("x1", "x2", "y")], epsilon=1.0, inference="laplace", seed=1, n_chains=1,
                    num_samples=50).fit(ds.data, ds.domain)
    path = write_release(tmp_path_factory.mktemp("rel") / "toy", g.generate(5, seed=2), record=g.release_record(),
                         private_data=ds.data)
    return open_release(path), ds.data


def _images(page: str) -> list[str]:
    return re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)


def test_public_report_shows_the_release_and_nothing_private(toy):
    rel, _ = toy
    page = report(rel, formula=TOY_FORMULA).html
    for section in ("release", "privacy", "marginals", "supports", "diagnostics", "synthetic-marginals"):
        assert f'id="{section}"' in page
    assert 'id="private-warning"' not in page and 'id="fidelity"' not in page and "safe to publish" in page
    assert len(_images(page)) == 2  # the marginals' graph and the synthetic shares
    # numbers that match the manifest
    charge = rel.manifest["privacy"]["charges"][0]
    assert f"<td>{charge['name']}</td>" in page and f"{charge['epsilon']:.4g}" in page
    assert rel.fingerprint in page and f"{rel.n:,}" in page and f"{rel.m} (5 read" in page
    assert str(rel.supports(TOY_FORMULA)) in page
    assert "laplace.max_log_density_gap" in page
    assert rel.manifest["privacy"]["composition"] in page and "measured together with" in page


def test_private_report_warns_and_compares_with_the_real_data(toy):
    rel, private = toy
    rep = report(rel, private, formula=TOY_FORMULA, max_datasets=3)
    page = rep.html
    assert rep.private and 'id="private-warning"' in page and "DO NOT PUBLISH" in page
    assert 'id="fidelity"' in page and 'id="pmse"' in page and 'id="coefficients"' in page
    assert len(_images(page)) == 5  # + the TV and association heatmaps and the forest plot
    assert 'id="association"' in page
    assert "3 read for this report" in page
    # the real-data column is the real fit (statsmodels on the private rows)
    real = smf.logit(TOY_FORMULA, private.astype(int)).fit(disp=0)
    for name, value in real.params.items():
        assert f"<td>{name}</td><td>{value:.4g}</td>" in page
    assert re.search(r"cover\s+\d of 3 real-data estimates", page)


def test_total_variation_matches_brute_force():
    from synthinfer.errors import ParameterError

    rng = np.random.default_rng(0)
    shape = (3, 2, 4)
    real, syn = (np.column_stack([rng.integers(0, k, 500) for k in shape]) for _ in range(2))
    for cols in [(0,), (2,), (0, 1), (1, 2)]:
        keys = lambda a: [tuple(r) for r in a[:, cols]]  # noqa: E731
        cells = set(keys(real)) | set(keys(syn))
        brute = 0.5 * sum(abs(keys(real).count(c) / 500 - keys(syn).count(c) / 500) for c in cells)
        assert marginal_tv(real, syn, shape, cols) == pytest.approx(brute, abs=1e-12)
    tv = tv_matrix(real, [real, real], shape)
    assert np.all(tv == 0)
    tv = tv_matrix(real, [syn], shape)
    assert tv[0, 1] == pytest.approx(marginal_tv(real, syn, shape, (0, 1))) and tv[1, 0] == tv[0, 1]
    # averaged over the datasets, every 1- and 2-way marginal, symmetric
    other = np.column_stack([rng.integers(0, k, 300) for k in shape])
    tv = tv_matrix(real, [syn, other], shape)
    for i, j in [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)]:
        cols = (i,) if i == j else (i, j)
        mean = (marginal_tv(real, syn, shape, cols) + marginal_tv(real, other, shape, cols)) / 2
        assert tv[i, j] == pytest.approx(mean, abs=1e-12) and tv[j, i] == tv[i, j]
    # narrow integer codes (cell index products must not overflow)
    wide = (300, 300)
    a, b = (np.column_stack([rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)]) for _ in range(2))
    assert tv_matrix(a.astype(np.uint16), [b.astype(np.uint16)], wide)[0, 1] == pytest.approx(
        marginal_tv(a, b, wide, (0, 1)), abs=1e-12)
    with pytest.raises(ParameterError, match="no synthetic datasets"):
        tv_matrix(real, [], shape)


def test_cramers_v_matches_scipy():
    from scipy.stats.contingency import association

    from synthinfer.reporting.fidelity import association_differences, cramers_v

    rng = np.random.default_rng(2)
    a = rng.integers(0, 3, 400)
    b = np.where(rng.random(400) < 0.6, a, rng.integers(0, 4, 400))
    codes = np.column_stack([a, b])
    table = np.zeros((3, 4), dtype=np.int64)
    np.add.at(table, (a, b), 1)
    assert cramers_v(codes, (3, 4), 0, 1) == pytest.approx(association(table, method="cramer"), rel=1e-12)
    shuffled = np.column_stack([a, rng.permutation(b)])  # the association broken
    diff = association_differences(codes, [shuffled], (3, 4))
    assert diff[0, 0] == 0 and diff[0, 1] == diff[1, 0]
    assert diff[0, 1] == pytest.approx(cramers_v(shuffled, (3, 4), 0, 1) - cramers_v(codes, (3, 4), 0, 1))
    assert diff[0, 1] < -0.3


def test_pmse_is_near_its_null_for_one_distribution_and_large_otherwise():
    rng = np.random.default_rng(1)
    shape = (4, 3)
    p = [[0.4, 0.3, 0.2, 0.1], [0.5, 0.3, 0.2]]

    def sample(n, probs):
        return np.column_stack([rng.choice(len(q), n, p=q) for q in probs])

    same = pmse(sample(3000, p), sample(3000, p), shape)
    # S_pMSE ~ chi2_(k-1) / (k-1) under the null (k - 1 = 5 here): above 4 with probability < 0.001
    assert 0 < same["s_pmse"] < 4
    other = pmse(sample(3000, p), sample(3000, [[0.1, 0.2, 0.3, 0.4], p[1]]), shape)
    assert other["s_pmse"] > 50
    big = pmse(sample(30_000, p), sample(30_000, p), shape)
    assert big["rows_real"] == big["rows_synthetic"] == 20_000


@pytest.mark.slow
def test_adult_report_with_the_private_data(tmp_path):
    adult = load_adult(paper_subset=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = NapsuMQ(list(adult_marginals()), epsilon=1.0, inference="laplace", seed=0, n_chains=1,
                    num_samples=50).fit(adult.data, adult.domain)
    path = write_release(tmp_path / "adult", g.generate(4, seed=1), record=g.release_record(),
                         private_data=adult.data)
    formula = "income ~ C(age) + C(race) + C(sex)"
    rep = report(path, adult.data, formula=formula)
    assert rep.private and len(_images(rep.html)) == 5
    assert len(rep.html.encode()) < 5e6
    assert "workclass" in rep.html and "total variation, mean 2-way" in rep.html


def adult_marginals():
    from synthinfer.datasets import ADULT_PAPER_MARGINALS

    return ADULT_PAPER_MARGINALS


def test_cli_report_writes_the_page_and_refuses_bad_input(toy, tmp_path):
    rel, private = toy
    csv = tmp_path / "private.csv"
    private.to_csv(csv, index=False)
    runner = CliRunner()
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(rel.path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "public" in r.output and 'id="release"' in out.read_text()
    r = runner.invoke(app, ["report", str(rel.path), "--out", str(out)])
    assert r.exit_code == 2 and "error:" in r.output and "exists already" in r.output
    r = runner.invoke(app, ["report", str(rel.path), "--out", str(tmp_path / "p.html"), "--private", str(csv),
                            "-f", TOY_FORMULA])
    assert r.exit_code == 0, r.output
    assert "do not publish" in r.output.replace("\n", " ") and "DO NOT PUBLISH" in (tmp_path / "p.html").read_text()
    r = runner.invoke(app, ["report", str(rel.path), "--out", str(tmp_path / "q.html"), "--domain", str(csv)])
    assert r.exit_code == 2 and "--private" in r.output and not (tmp_path / "q.html").exists()
    r = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "q.html")])
    assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output


def test_disclosure_measures_match_a_hand_count():
    from synthinfer.reporting.disclosure import disclosure

    # keys (columns 0, 1), target column 2; private keys (0,0) (0,1) (2,0) are unique
    real = np.array([[0, 0, 1], [0, 1, 0], [1, 1, 1], [1, 1, 0], [2, 0, 1]])
    syn = np.array([[0, 0, 1], [0, 0, 1], [1, 1, 1], [2, 0, 0], [2, 1, 1]])
    # repU: only (2,0) is unique in both: 1 of 5 records. DiSCO: synthetic keys with one target
    # value: (0,0)->1, (1,1)->1, (2,0)->0, (2,1)->1; correct for records 0 and 2 (2 of 5)
    assert disclosure(real, [syn], [0, 1], 2) == {"repU": 20.0, "DiSCO": 40.0}
    assert disclosure(real, [real], [0, 1], 2) == {"repU": 60.0, "DiSCO": 60.0}  # the data itself
    assert disclosure(real, [syn, real], [0, 1], 2) == {"repU": 40.0, "DiSCO": 50.0}  # averaged


def test_report_disclosure_section_and_its_errors(toy):
    from synthinfer.errors import ParameterError

    rel, private = toy
    page = report(rel, private, keys=["x1", "x2"], target="y", max_datasets=2).html
    assert 'id="disclosure"' in page and "repU" in page and "DiSCO" in page
    with pytest.raises(ParameterError, match="private data"):
        report(rel, keys=["x1"], target="y")
    with pytest.raises(ParameterError, match="both keys"):
        report(rel, private, keys=["x1"])
    with pytest.raises(ParameterError, match="'nope'"):
        report(rel, private, keys=["nope"], target="y")
    with pytest.raises(ParameterError, match="distinct"):
        report(rel, private, keys=["y"], target="y")


def test_cli_analyze_writes_a_forest_plot(toy, tmp_path):
    rel, _ = toy
    png = tmp_path / "coef.png"
    r = CliRunner().invoke(app, ["analyze", str(rel.path), "-f", TOY_FORMULA, "--plot", str(png), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = CliRunner().invoke(app, ["analyze", str(rel.path), "-f", TOY_FORMULA, "--plot", str(png)])
    assert r.exit_code == 2 and "exists already" in r.output


def test_every_release_holds_its_public_report(toy, tmp_path):
    rel, private = toy
    page = (rel.path / "report.html").read_text()
    assert rel.manifest["report"] == "report.html" and "report.html" in rel.manifest["files"]
    assert 'id="private-warning"' not in page and "safe to publish" in page and "cannot be named here" in page
    assert len(_images(page)) == 2 and f"{rel.m} (5 read" in page
    # the same content as the report of the opened release, less what names the fingerprint or the time
    again = report(rel).html
    strip = lambda h: re.sub(r'<div class="sub">release written.*?</div>', "", h, flags=re.S)  # noqa: E731
    assert strip(page) == strip(again)
    # without it, and tampering with it is caught like any file
    no = write_release(tmp_path / "no", list(rel.datasets), record=_record(rel), private_data=private, report=False)
    assert not (no / "report.html").exists() and "report" not in open_release(no).manifest
    (rel.path / "report.html").write_text(page.replace("safe to publish", "edited"))
    from synthinfer.errors import ReleaseError

    with pytest.raises(ReleaseError, match="report.html was changed"):
        open_release(rel.path)
    (rel.path / "report.html").write_text(page)


def _record(rel):
    from synthinfer.release import ReleaseRecord

    m = rel.manifest
    return ReleaseRecord(mechanism=m["mechanism"], settings={}, ledger=rel.ledger, n=rel.n, seed_fixed=False,
                         domain=rel.domain, marginals=m["marginals"])


def test_real_fit_reads_the_private_rows_as_the_release_holds_them(tmp_path):
    """Raw private numbers and empty cells are put in the release's form before the real fit:
    bin labels for a binned column, the declared "<missing>" level for a numeric column with
    missing values (read as 1.0, 2.0 and NaN); every synthetic coefficient is then compared."""
    from synthinfer.data import Domain

    rng = np.random.default_rng(0)
    n = 1500
    private = pd.DataFrame({"age": rng.uniform(20, 80, n).round(), "grade": rng.choice([1.0, 2.0, np.nan], n),
                            "y": rng.integers(0, 2, n)})
    domain = Domain.from_dict({"columns": [{"name": "age", "bin_edges": [20, 40, 60, 80], "integer": True},
                                           {"name": "grade", "categories": [1, 2], "missing": True},
                                           {"name": "level", "categories": ["lo", "hi"], "derived_from": "grade",
                                            "map": [[1, "lo"], [2, "hi"]]},
                                           {"name": "y", "categories": [0, 1]}]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = NapsuMQ([("age", "y"), ("grade", "y")], epsilon=2.0, inference="laplace", seed=0).fit(private, domain)
    path = write_release(tmp_path / "r", g.generate(4, seed=1), record=g.release_record(), private_data=private)
    page = report(path, private, formula="y ~ C(age) + C(grade)").html
    names = re.findall(r"<tr><td>(C\([^<]*|Intercept)</td><td>", page)
    assert names == ["Intercept", "C(age)[T.[40, 60)]", "C(age)[T.[60, 80]]", "C(grade)[T.2]",
                     "C(grade)[T.&lt;missing&gt;]"]
    # a derived column the private table lacks comes from its source, with the inherited level
    page = report(path, private, formula="y ~ C(level)").html
    assert re.findall(r"<tr><td>(C\([^<]*|Intercept)</td><td>", page) == [
        "Intercept", "C(level)[T.hi]", "C(level)[T.&lt;missing&gt;]"]


def test_charges_show_each_mechanisms_noise():
    from types import SimpleNamespace

    from synthinfer.reporting.page import _charges

    charges = [{"name": "gauss", "mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "details": {"sigma": 3.5}},
               {"name": "dp-sgd", "mechanism": "DP-SGD", "epsilon": 2.0, "delta": 1e-5,
                "details": {"noise_multiplier": 1.25, "clip_norm": 0.5}},
               {"name": "none", "mechanism": "exponential", "epsilon": 0.5, "delta": 0.0}]
    rows = _charges(SimpleNamespace(manifest={"privacy": {"charges": charges}}))
    assert [r["noise"] for r in rows] == ["3.5", "1.25 x clip norm 0.5", ""]
