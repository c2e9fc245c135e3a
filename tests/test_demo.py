"""The demo's command line: which model it runs, and bad settings stop it before any data are read or budget
spent."""

import pytest

from synthinfer import demo


@pytest.mark.parametrize("chains", ["0", "-1"])
def test_too_few_chains_is_a_usage_error(chains, capsys, monkeypatch):
    def no_data(*args, **kwargs):  # the check comes before the private data are loaded
        raise AssertionError("loaded the data")

    monkeypatch.setattr("synthinfer.datasets.load_adult", no_data)
    with pytest.raises(SystemExit) as exc:
        demo.main(["--chains", chains])
    assert exc.value.code == 2
    assert f"--chains must be at least 1, got {chains}" in capsys.readouterr().err


class _Loaded(Exception):
    """Raised in place of loading the data: the test only needs the arguments."""


@pytest.mark.parametrize(("argv", "numbers"), [([], True), (["--numbers"], True), (["--buckets"], False)])
def test_the_numbers_are_the_default_and_buckets_the_papers_model(argv, numbers, monkeypatch):
    asked = {}

    def load_adult(**kwargs):
        asked.update(kwargs)
        raise _Loaded

    monkeypatch.setattr("synthinfer.datasets.load_adult", load_adult)
    with pytest.raises(_Loaded):
        demo.main(argv)
    assert asked == {"paper_subset": True, "numbers": numbers}


def test_numbers_and_buckets_together_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        demo.main(["--numbers", "--buckets"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
