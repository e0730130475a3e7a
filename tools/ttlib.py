"""Shared helpers of the project's tools: the exercise list and CTest results.

Standard library only (runs with any python3 >= 3.9).
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TODO_RE = re.compile(r'TT_TODO\(\s*"(ch(\d\d)\.(\d+))"\s*,\s*"((?:[^"\\]|\\.)*)"')
# Same rule as cmake/TTAddTests.cmake: suite ChNN_M_What (optionally behind "Prefix/").
TEST_ID_RE = re.compile(r'(?:^|/)Ch(\d\d)_(\d+)_')


@dataclasses.dataclass
class Exercise:
    id: str          # "ch01.3"
    chapter: str     # "01"
    number: int      # 3
    title: str       # "Tensor::permute"
    hint: str        # the full hint
    starter: str     # chapters/01_tensor/src/tensor_views.cc (relative to ROOT)


def chapter_dirs() -> dict[str, str]:
    """{"01": "01_tensor", ...} for every chapter folder."""
    out = {}
    for d in sorted((ROOT / "chapters").iterdir()):
        m = re.match(r"(\d\d)_", d.name)
        if d.is_dir() and m:
            out[m.group(1)] = d.name
    return out


def exercises(chapter: str | None = None) -> list[Exercise]:
    """Every exercise id found in solutions/, in (chapter, number) order; first TT_TODO wins."""
    found: dict[str, Exercise] = {}
    for path in sorted((ROOT / "solutions").glob("*/*")):
        if path.suffix not in (".cc", ".cu"):
            continue
        for m in TODO_RE.finditer(path.read_text(encoding="utf-8")):
            ex_id, ch, num, hint = m.group(1), m.group(2), int(m.group(3)), m.group(4)
            if chapter is not None and ch != chapter:
                continue
            if ex_id not in found:
                title = hint.split(": ", 1)[0].strip() if ": " in hint else hint
                starter = f"chapters/{path.parent.name}/src/{path.name}"
                found[ex_id] = Exercise(ex_id, ch, num, title, hint, starter)
    return sorted(found.values(), key=lambda e: (e.chapter, e.number))


@dataclasses.dataclass
class TestResult:
    name: str
    status: str      # "passed", "failed", "skipped"
    output: str

    @property
    def exercise(self) -> str | None:
        m = TEST_ID_RE.search(self.name.split(".", 1)[0])
        return f"ch{m.group(1)}.{m.group(2)}" if m else None


def run_ctest(build_dir: Path, label_regex: str, jobs: int = 2, quiet: bool = True) -> list[TestResult]:
    """Runs ctest -L label_regex in build_dir and returns one result per test."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = ["ctest", "--test-dir", str(build_dir), "-L", label_regex, "-j", str(jobs),
               "--output-junit", str(junit), "--no-tests=error"]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not junit.exists():
            sys.stdout.write(proc.stdout)
            raise SystemExit(f"ctest produced no results (exit {proc.returncode}); "
                             f"is {build_dir} configured and built?")
        results = []
        for case in ET.parse(junit).getroot().iter("testcase"):
            status = case.get("status", "run")
            status = {"run": "passed", "fail": "failed", "notrun": "skipped",
                      "disabled": "skipped"}.get(status, status)
            out = case.findtext("system-out") or ""
            if case.find("failure") is not None:
                status = "failed"
            if case.find("skipped") is not None:
                status = "skipped"
            results.append(TestResult(case.get("name", ""), status, out))
        return results


def list_gtests(exe: Path) -> list[str]:
    """Names (Suite.Test) of the tests of a gtest executable, without disabled ones."""
    out = subprocess.run([str(exe), "--gtest_list_tests"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, check=True).stdout
    names, suite = [], ""
    for line in out.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("."):
            suite = line.strip()
        elif line.startswith("  ") and suite:
            name = suite + line.strip().split()[0]
            if "DISABLED_" not in name:
                names.append(name)
    return names


def run_gtests_each(exe: Path, jobs: int = 2, timeout: int = 300) -> list[TestResult]:
    """Runs every test of a gtest executable in its own process (so a crash is attributed to its
    test) and classifies it like CTest would."""
    import concurrent.futures

    def one(name: str) -> TestResult:
        try:
            proc = subprocess.run([str(exe), f"--gtest_filter={name}"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout,
                                  cwd=ROOT)
            out, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = (e.stdout or b"").decode(errors="replace") + "\n(timeout)", -1
        if "[  SKIPPED ]" in out and rc == 0:
            status = "skipped"
        else:
            status = "passed" if rc == 0 else "failed"
        return TestResult(name, status, out)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, list_gtests(exe)))


def first_failure_line(output: str) -> str:
    """The most telling line of a failed gtest's output (a TODO message, else the first failure)."""
    lines = output.splitlines()
    for line in lines:
        if "TODO ch" in line:
            return line[line.find("TODO ch"):].removesuffix('" thrown in the test body.').strip()
    for i, line in enumerate(lines):
        if "Failure" in line or "exception" in line:
            rest = " ".join(x.strip() for x in lines[i:i + 3])
            return rest[:300]
    return (lines[-1] if lines else "").strip()[:300]


def completed(result: TestResult) -> bool:
    """True when gtest ran the test to its end (passed, skipped or failed an assertion or with an
    exception), False when the process crashed, aborted or timed out."""
    return result.status != "failed" or "[  FAILED  ]" in result.output


def color(text: str, code: str) -> str:
    if sys.stdout.isatty() and os.environ.get("NO_COLOR") is None:
        return f"\033[{code}m{text}\033[0m"
    return text
