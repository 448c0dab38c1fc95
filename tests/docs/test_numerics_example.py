"""docs/numerics.md's worked example is what scripts/numerics_example.py prints
now: the table of losses between the page's markers, and the PNG it draws."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_numerics_page_shows_the_example_as_the_script_prints_it():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "numerics_example.py"), "--print"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    doc = (ROOT / "docs" / "numerics.md").read_text()
    m = re.search(r"<!-- numerics example: start[^>]*-->\n(.*?)\n<!-- numerics example: end -->", doc, re.S)
    assert m, "docs/numerics.md lost its markers"
    assert m.group(1).strip() == out.stdout.strip(), "run python scripts/numerics_example.py to update the page"
    assert (ROOT / "docs" / "images" / "numerics_sr_loss.png").stat().st_size > 1000


def test_the_example_shows_what_it_claims():
    """Round to nearest stalls, stochastic rounding follows fp32."""
    doc = (ROOT / "docs" / "numerics.md").read_text()
    last = [line for line in doc.splitlines() if line.startswith("| 399 |")]
    assert last, "the table has no last step"
    fp32, rne, sr = (float(v) for v in last[0].strip("|").split("|")[1:])
    assert rne > 10 * sr and sr < 2 * fp32 + 1e-3
