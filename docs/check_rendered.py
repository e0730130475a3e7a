#!/usr/bin/env python3
"""Checks the generated Doxygen site for Markdown that did not render (run by the `docs` target).

  check_rendered.py [--no-mathjax] <html_dir> [page.html ...]

Doxygen 1.9.4 renders most of GitHub's Markdown, but not all of it, and says nothing when it
does not: the text then shows the Markdown itself. In the text of every page (outside code,
preformatted blocks and math), this fails on

  * a literal `**` (a bold span Doxygen did not take),
  * a literal `<br>` (shown as text),
  * `[src/...`, `[tests/...` and a literal `](` (a link whose `[` went into the text),
  * a literal `\\_`, `\\f$` or `\\f[`, or a `$` (math md_filter.py did not convert),
  * a numbered list right after a paragraph that stops mid-sentence ("... instead of" then
    "24. A framework ...": a line that starts with a number became a list),

and, with headless Chromium (`chromium`, `chromium-browser` or $TT_CHROMIUM), on any formula
MathJax could not typeset ("Math input error", e.g. `\\#` in math): every page with math is
loaded in turn into one browser session and each `merror` node is reported with its page and
message.
Without Chromium the MathJax check fails too (the site's math would go unchecked) unless
--no-mathjax is given. Pages are all *.html of <html_dir>, or the ones named. Prints each defect
as `page: what: context` and exits 1 if there is any.

docs/tests/defects.md is a page with one of each defect: `ctest -R docs_check_rendered` builds
it with Doxygen and checks that this script reports every one of them.
"""
import argparse
import html
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP_TAGS = {"code", "pre", "script", "style", "tt"}
# Math as Doxygen writes it for MathJax: \( ... \) inline, \[ ... \] displayed.
MATH = re.compile(r"\\\(.*?\\\)|\\\[.*?\\\]", re.S)
PATHS = r"(?:src|tests|tools|include|apps|solutions|chapters|common|benchmarks|docs)/"
TEXT_DEFECTS = [
    (re.compile(r"\*\*"), "literal ** (bold that did not render)"),
    (re.compile(r"<br\s*/?>", re.I), "literal <br>"),
    (re.compile(r"\[\s*" + PATHS), "literal [ before a path (a link that did not render)"),
    (re.compile(r"\]\("), "literal ]( (a link that did not render)"),
    (re.compile(r"\\_"), "literal \\_"),
    (re.compile(r"\\f[$\[\]]"), "literal \\f$ or \\f[ (unconverted math)"),
    # (not $NAME: an environment variable)
    (re.compile(r"\$(?![A-Z_]{2,}\b)"), "literal $ (math that did not convert)"),
]


class _Page(html.parser.HTMLParser):
    """Collects the text of a page's text blocks (div.textblock: the pages and the detailed
    descriptions; not the declarations) outside code, by chunk."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.divs: list[bool] = []  # for each open div: is it a text block?
        self.skip: list[str] = []  # open code-like elements
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        cls = (dict(attrs).get("class") or "").split()
        if tag == "div":
            self.divs.append("textblock" in cls)
        if tag in SKIP_TAGS or (tag == "div" and ("fragment" in cls or "MathJax" in cls)):
            self.skip.append(tag)
        elif self.skip and tag == self.skip[-1]:
            self.skip.append(tag)

    def handle_endtag(self, tag):
        if self.skip and tag == self.skip[-1]:
            self.skip.pop()
        if tag == "div" and self.divs:
            self.divs.pop()

    def handle_data(self, data):
        if not self.skip and any(self.divs):
            self.text.append(data)


def context(text, m):
    s = text[max(0, m.start() - 40):m.end() + 40]
    return " ".join(s.split())


# A paragraph that stops mid-sentence (a letter or a comma) and a numbered list right after it,
# on the same line: the paragraph's next source line started with "NN." and became a list.
LIST_IN_SENTENCE = re.compile(r"([^<>]{0,60}[A-Za-z,])</p><ol")


def static_defects(path: Path) -> list[str]:
    raw = path.read_text(encoding="utf-8", errors="replace")
    page = _Page()
    page.feed(raw)
    found = []
    for chunk in page.text:
        chunk = MATH.sub(" M ", chunk)
        for pattern, what in TEXT_DEFECTS:
            m = pattern.search(chunk)  # one report per chunk and kind
            if m:
                found.append(f"{path.name}: {what}: {context(chunk, m)}")
    for m in LIST_IN_SENTENCE.finditer(raw):
        found.append(f"{path.name}: a numbered list that continues a sentence: "
                     f"...{' '.join(m.group(1).split())}")
    return found


# --- MathJax errors, with headless Chromium ------------------------------------------------------
HARNESS = r"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>check</title></head><body>
<pre id="out"></pre><iframe id="f" width="1000" height="700"></iframe><script>
const pages = %s;
const out = document.getElementById('out');
const f = document.getElementById('f');
const results = [];
let next = 0;
function load() {
  if (next === pages.length) {
    const mark = (what) => ['TT-RESULT', what].join('-');  // not in this script's text
    out.textContent = mark('BEGIN') + '\n' + results.join('\n') + '\n' + mark('END');
    return;
  }
  const page = pages[next++];
  f.onload = () => {
    const w = f.contentWindow;
    let tries = 0;
    const wait = () => {
      let hub = null;
      try {
        hub = w.MathJax && w.MathJax.Hub;
      } catch (e) {
        results.push(page + '\tcannot read: ' + e);
        load();
        return;
      }
      if (hub && hub.Queue) {
        hub.Queue(() => {
          for (const n of w.document.querySelectorAll('.merror, .MathJax_Error, .noError'))
            results.push(page + '\t' +
                         (n.getAttribute('title') || n.textContent).replace(/\s+/g, ' ').trim());
          load();
        });
      } else if (++tries > 400) {  // 10 s
        results.push(page + '\tMathJax did not load');
        load();
      } else {
        setTimeout(wait, 25);
      }
    };
    wait();
  };
  f.src = page;
}
load();
</script></body></html>
"""


def find_chromium():
    for name in (os.environ.get("TT_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def mathjax_defects(chromium: str, pages: list[Path]) -> list[str]:
    """The MathJax errors of the pages with math, all loaded in one headless Chromium."""
    with_math = [p for p in pages
                 if MATH.search(p.read_text(encoding="utf-8", errors="replace"))]
    if not with_math:
        return []
    with tempfile.TemporaryDirectory(prefix="tt_check_rendered_") as tmp:
        harness = Path(tmp) / "harness.html"
        harness.write_text(HARNESS % repr([p.resolve().as_uri() for p in with_math]),
                           encoding="utf-8")
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-extensions", "--no-first-run",
               "--allow-file-access-from-files", f"--user-data-dir={tmp}/profile",
               "--virtual-time-budget=120000", "--dump-dom", harness.as_uri()]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return ["(chromium): timed out after 600 s loading the pages with math"]
    m = re.search(r"TT-RESULT-BEGIN\n(.*?)\n?TT-RESULT-END", html.unescape(run.stdout), re.S)
    if not m:
        return [f"(chromium): no result (exit {run.returncode}); stderr: "
                + " ".join(run.stderr.split()[-40:])]
    found = []
    for line in filter(None, m.group(1).split("\n")):
        uri, _, error = line.partition("\t")
        found.append(f"{Path(uri).name}: MathJax error: {error}")
    print(f"check_rendered: MathJax typeset {len(with_math)} pages with math in one Chromium")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-mathjax", action="store_true",
                    help="skip the MathJax check (no Chromium needed)")
    ap.add_argument("html_dir", type=Path)
    ap.add_argument("pages", nargs="*", help="pages of html_dir to check (default: all)")
    args = ap.parse_args()
    root = args.html_dir.resolve()
    pages = [root / p for p in args.pages] if args.pages else sorted(root.glob("*.html"))
    if not pages or not all(p.is_file() for p in pages):
        print(f"check_rendered: no such pages in {root}", file=sys.stderr)
        return 2
    defects = []
    for path in pages:
        defects += static_defects(path)
    if not args.no_mathjax:
        chromium = find_chromium()
        if chromium is None:
            defects.append("(site): no Chromium to check the math (install chromium, "
                           "tools/install_deps does; or pass --no-mathjax)")
        else:
            defects += mathjax_defects(chromium, pages)
    report = [f"check_rendered: {d}" for d in defects]
    report.append(f"check_rendered: {len(pages)} pages, {len(defects)} rendering defects")
    print("\n".join(report))
    return int(bool(defects))


if __name__ == "__main__":
    sys.exit(main())
