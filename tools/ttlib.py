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
# TT_TODO("chNN.M", "Title: contract"): the text may be split into adjacent string literals.
_C_STRING = r'"(?:[^"\\\n]|\\.)*"'
TODO_RE = re.compile(r'TT_TODO\(\s*"(ch(\d\d)\.(\d+))"\s*,\s*((?:' + _C_STRING + r'\s*)+)\)')
_C_STRING_RE = re.compile(_C_STRING)
_C_ESCAPES = {"n": "\n", "t": "\t"}
# Same rule as cmake/TTAddTests.cmake: suite ChNN_M_What (optionally behind "Prefix/").
TEST_ID_RE = re.compile(r'(?:^|/)Ch(\d\d)_(\d+)_')


@dataclasses.dataclass
class Todo:
    """One TT_TODO(...) of a solution file."""
    id: str          # "ch01.6"
    chapter: str     # "01"
    number: int      # 6
    text: str        # the whole text: "Tensor::squeeze: ..." (adjacent literals joined)
    solution: str    # solutions/01_tensor/tensor_views.cc (relative to ROOT)
    starter: str     # chapters/01_tensor/src/tensor_views.cc (relative to ROOT)

    @property
    def title(self) -> str:
        """The short name before the first ": " (the function), or the whole text."""
        return self.text.split(": ", 1)[0].strip() if ": " in self.text else self.text

    @property
    def contract(self) -> str:
        """What must hold: the text after the title."""
        return self.text.split(": ", 1)[1].strip() if ": " in self.text else ""


@dataclasses.dataclass
class Exercise:
    id: str          # "ch01.6"
    chapter: str     # "01"
    number: int      # 6
    todos: list[Todo]  # every TT_TODO of this id, in file order

    @property
    def title(self) -> str:
        """The titles of its TT_TODOs: "Tensor::squeeze, Tensor::unsqueeze"."""
        return ", ".join(dict.fromkeys(t.title for t in self.todos))

    @property
    def hint(self) -> str:
        """The text of its first TT_TODO."""
        return self.todos[0].text

    @property
    def starter(self) -> str:
        """The starter file of its first TT_TODO (relative to ROOT)."""
        return self.todos[0].starter

    @property
    def starters(self) -> list[str]:
        """Every starter file holding one of its TT_TODOs, in order."""
        return list(dict.fromkeys(t.starter for t in self.todos))


def chapter_dirs() -> dict[str, str]:
    """{"01": "01_tensor", ...} for every chapter folder."""
    out = {}
    for d in sorted((ROOT / "chapters").iterdir()):
        m = re.match(r"(\d\d)_", d.name)
        if d.is_dir() and m:
            out[m.group(1)] = d.name
    return out


def parse_todos(source: str) -> list[tuple[str, str]]:
    """(id, text) of every TT_TODO(...) in a C++/CUDA source text, in order. The text is the
    concatenation of the adjacent string literals, with C escapes resolved."""
    out = []
    for m in TODO_RE.finditer(source):
        text = "".join(
            re.sub(r"\\(.)", lambda e: _C_ESCAPES.get(e.group(1), e.group(1)), lit[1:-1])
            for lit in _C_STRING_RE.findall(m.group(4)))
        out.append((m.group(1), text))
    return out


def solution_files() -> list[Path]:
    """The single-source exercise files: solutions/NN_topic/*.cc and *.cu, sorted."""
    return [p for p in sorted((ROOT / "solutions").glob("*/*")) if p.suffix in (".cc", ".cu")]


def todos(chapter: str | None = None) -> list[Todo]:
    """Every TT_TODO of solutions/ (of one chapter "NN" if given), in file and line order."""
    out = []
    for path in solution_files():
        for ex_id, text in parse_todos(path.read_text(encoding="utf-8")):
            ch, num = ex_id[2:4], int(ex_id.split(".", 1)[1])
            if chapter is None or ch == chapter:
                out.append(Todo(ex_id, ch, num, text, str(path.relative_to(ROOT)),
                                f"chapters/{path.parent.name}/src/{path.name}"))
    return out


def exercises(chapter: str | None = None) -> list[Exercise]:
    """Every exercise id found in solutions/, in (chapter, number) order."""
    found: dict[str, Exercise] = {}
    for t in todos(chapter):
        found.setdefault(t.id, Exercise(t.id, t.chapter, t.number, [])).todos.append(t)
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
        return read_junit(junit)


def read_junit(junit: Path) -> list[TestResult]:
    """One result per test of a JUnit file written by `ctest --output-junit` (tools/test_all
    writes build/ctest-results.xml)."""
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


def gpu_names() -> list[str]:
    """The names of this machine's GPUs (nvidia-smi), one per GPU; [] without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line.strip() for line in out if line.strip()]


def color(text: str, code: str) -> str:
    if sys.stdout.isatty() and os.environ.get("NO_COLOR") is None:
        return f"\033[{code}m{text}\033[0m"
    return text
