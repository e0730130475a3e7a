#!/usr/bin/env python3
"""Self-test of docs/check_rendered.py (the CTest test docs_check_rendered).

  selftest.py <doxygen> <site Doxyfile> <mathjax dir> <out dir>

Builds two small pages with the site's Doxygen settings: docs/tests/defects.md (one of each
rendering defect, not filtered) and docs/tests/README.md (the same constructs written for
GitHub, through md_filter.py). check_rendered.py must report every defect of the first, by
kind, MathJax error included, and nothing on the second.
"""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = [
    "literal ** (bold that did not render)",
    "literal <br>",
    "literal [ before a path",
    "literal \\_",
    "literal $",
    "a numbered list that continues a sentence",
    "MathJax error",
]


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    doxygen, base, mathjax, out = sys.argv[1:]
    base = Path(base).resolve()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doxyfile = out / "Doxyfile"
    doxyfile.write_text(f"""@INCLUDE = "{base}"
INPUT = "{HERE / 'defects.md'}" "{HERE / 'README.md'}"
OUTPUT_DIRECTORY = "{out}"
WARN_AS_ERROR = NO
WARN_LOGFILE = "{out / 'warnings.txt'}"
HAVE_DOT = NO
GENERATE_TREEVIEW = NO
SEARCHENGINE = NO
IMAGE_PATH =
DOTFILE_DIRS =
MATHJAX_RELPATH = {Path(mathjax).resolve().as_uri()}
""", encoding="utf-8")
    subprocess.run([doxygen, str(doxyfile)], check=True, cwd=out)
    checker = [sys.executable, str(HERE.parent / "check_rendered.py"), str(out / "html")]
    failures = []
    bad = subprocess.run(checker + ["tt_defects.html"], capture_output=True, text=True)
    print(bad.stdout, end="")
    if bad.returncode != 1:
        failures.append(f"defects.md: exit {bad.returncode}, expected 1")
    for what in EXPECTED:
        if f"tt_defects.html: {what}" not in bad.stdout:
            failures.append(f"defects.md: no report of '{what}'")
    good = subprocess.run(checker + ["tt_fixture_clean.html"], capture_output=True, text=True)
    print(good.stdout, end="")
    if good.returncode != 0:
        failures.append(f"README.md (filtered): exit {good.returncode}, expected 0")
    print("".join(f"selftest: FAIL: {line}\n" for line in failures) +
          f"selftest: {len(EXPECTED)} kinds of defect expected, {len(failures)} failures")
    return min(len(failures), 1)


if __name__ == "__main__":
    sys.exit(main())
