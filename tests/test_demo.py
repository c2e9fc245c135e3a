"""The demo's command line: bad settings stop it before any data are read or budget spent."""

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
