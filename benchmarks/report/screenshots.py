r"""Render the report of a toy and an Adult release, time it, and screenshot the pages in headless Chromium.

Makes two NAPSU-MQ releases (the toy logistic data, n = 2,000, m = 5; the paper's Adult table with
its 10 marginals, n = 46,043, m = 20, Laplace at epsilon 1), writes each one's public report and its
report with the private data (``synthinfer.report``), times the Adult one with the private data
(the issue's target: < 30 s on 2 cores, < 5 MB), and opens every page in Debian's Chromium
(``apt-get install chromium``; ``--headless --screenshot``) at a laptop width (1280 px) and a
phone width (412 px). Writes ``results/report_timing.json`` and the PNGs under ``results/``; the
HTML pages go to a scratch folder (they hold the private data's fidelity figures: not committed).

    PYTHONPATH=src python benchmarks/report/screenshots.py [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _release(data, domain, marginals, m, folder):
    from synthinfer.napsu import NapsuMQ
    from synthinfer.release import write_release

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = NapsuMQ(marginals, epsilon=1.0, inference="laplace", seed=0).fit(data, domain)
        return write_release(folder, g.generate(m, seed=1), record=g.release_record(), private_data=data)


def _shot(chromium: str, page: Path, png: Path, width: int, height: int) -> None:
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    from synthinfer.datasets import ADULT_PAPER_MARGINALS, load_adult, make_toy_logistic
    from synthinfer.reporting import report

    RESULTS.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="synthinfer-report-"))
    toy = make_toy_logistic(2000, (1.0, 0.0), seed=0)
    adult = load_adult(paper_subset=True)
    cases = {
        "toy": (_release(toy.data, toy.domain, [("x1", "x2", "y")], 5, scratch / "toy"), toy.data,
                "y ~ C(x1) + C(x2)"),
        "adult": (_release(adult.data, adult.domain, ADULT_PAPER_MARGINALS, 20, scratch / "adult"), adult.data,
                  "income ~ C(age) + C(race) + C(sex)"),
    }
    timing = {"command": " ".join(["python", "benchmarks/report/screenshots.py", *sys.argv[1:]]),
              "cpu_count": os.cpu_count(), "loadavg_start": os.getloadavg(), "pages": {}}
    for name, (path, private, formula) in cases.items():
        for kind, data in (("public", None), ("private", private)):
            t, cpu = time.perf_counter(), time.process_time()
            page = report(path, data, formula=formula)
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
            html = scratch / f"{name}_{kind}.html"
            page.save(html)
            timing["pages"][f"{name}_{kind}"] = {"wall_s": wall, "cpu_s": cpu, "bytes": len(page.html.encode())}
            print(name, kind, f"{wall:.1f} s wall, {cpu:.1f} s CPU, {len(page.html.encode()) / 1e6:.2f} MB", flush=True)
            for label, (w, h) in {"laptop": (1280, 2400), "phone": (412, 2400)}.items():
                _shot(a.chromium, html, RESULTS / f"report_{name}_{kind}_{label}.png", w, h)
    timing["loadavg_end"] = os.getloadavg()
    (RESULTS / "report_timing.json").write_text(json.dumps(timing, indent=1))


if __name__ == "__main__":
    main()
