#!/usr/bin/env python3
"""Doxygen input filter for the READMEs in the site (chapters/NN_topic/README.md, docs/README.md).

The READMEs are written for GitHub first; this filter makes the same text render in the
Doxygen site (1.9.4 knows neither $...$ math nor links to files outside its input):

  * the first level-1 heading gets the page label {#chNN} (docs/README.md: {#docs_readme})
    unless it has one, so pages can say \\ref ch03 and the site can list the chapters;
  * math: $...$ -> \\f$...\\f$, $$...$$ (one or more lines) and ```math blocks -> \\f[...\\f];
  * links: [t](../NN_x/README.md) -> [t](@ref chNN); [t](include/tt/x.h) -> [t](@ref x.h);
    [t](docs/foo.md)-style links into docs/ pages -> @ref of that page's label (see PAGE_LABELS);
    other relative links (src/x.cc, tests/...) -> the text plus the repository path in code;
  * folds: a line `<details><summary>text</summary>` and a line `</details>` become the same
    HTML inside \\htmlonly[block] (Doxygen 1.9.4 otherwise closes the <details> at the end of
    each paragraph, so only the summary would be inside the fold); `code` in the summary
    becomes <code>.

Code spans and fenced code blocks are left untouched. The line count is preserved, so Doxygen's
warnings point at the right README line. Usage (by Doxygen): md_filter.py <file>.
"""
import html
import os
import re
import sys

# docs/ pages that chapter READMEs may link to, by file name.
PAGE_LABELS = {
    "getting_started.md": "getting_started",
    "learner_guide.md": "learner_guide",
    "diagrams.md": "diagrams",
    "README.md": "docs_readme",
}

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
HEADING = re.compile(r"^#\s+(.*?)\s*$")
LABEL = re.compile(r"\{#[\w-]+\}\s*$")
# Inline math, pandoc's rule: the opening $ is not followed by a space, the closing $ is not
# preceded by a space nor followed by a digit; \$ is a literal dollar.
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\s)((?:[^$\\\n]|\\.)+?)(?<!\s)\$(?![\d$])")
DISPLAY_ONE_LINE = re.compile(r"\$\$(.+?)\$\$")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# A fold as the chapter READMEs write it (tools/readme_exercises checks the form).
DETAILS_OPEN = re.compile(r"^(\s*)<details><summary>(.*)</summary>\s*$")
DETAILS_CLOSE = re.compile(r"^(\s*)</details>\s*$")


def page_label(path):
    """The label of a README page: ch01 for chapters/01_tensor/README.md, docs_readme for
    docs/README.md, else None."""
    path = path.replace(os.sep, "/")
    m = re.search(r"/chapters/(\d\d)_[^/]+/README\.md$", path)
    if m:
        return "ch" + m.group(1)
    return "docs_readme" if path.endswith("/docs/README.md") else None


def rewrite_link(match, readme_dir, repo_root):
    bang, text, target = match.groups()
    if bang or re.match(r"^[a-z][a-z0-9+.-]*:|^#|^@ref", target):
        return match.group(0)  # images, URLs, anchors, explicit refs: unchanged
    path, _, anchor = target.partition("#")
    full = os.path.normpath(os.path.join(readme_dir, path))
    rel = os.path.relpath(full, repo_root).replace(os.sep, "/")
    exists = os.path.isfile(full)
    m = re.match(r"^chapters/(\d\d)_[^/]+/README\.md$", rel)
    if m:  # a chapter not written yet is named, not linked (a broken \ref fails the build)
        return f"[{text}](@ref ch{m.group(1)})" if exists else text
    m = re.match(r"^docs/(?:pages/)?([^/]+\.md)$", rel)
    if m and m.group(1) in PAGE_LABELS and exists:
        return f"[{text}](@ref {PAGE_LABELS[m.group(1)]})"
    m = re.match(r"^(chapters/[^/]+|common|common/testing|testing)/include/tt/([^/]+\.h)$", rel)
    if m and exists:
        return f"[{text}](@ref {m.group(2)})"
    # A file the site does not contain (sources, tests, tools): keep the text, show the path.
    if text.strip("`") == path or text.strip("`") == rel:
        return f"`{rel}`"
    return f"{text} (`{rel}`)"


def convert_fold(line):
    """The \\htmlonly form of a fold's opening or closing line, or None for any other line."""
    m = DETAILS_OPEN.match(line)
    if m:
        summary = CODE_SPAN.sub(lambda c: "<code>" + html.escape(c.group(2).strip()) + "</code>",
                                m.group(2))
        return (f"{m.group(1)}\\htmlonly[block]<details><summary>{summary}</summary>"
                "\\endhtmlonly")
    m = DETAILS_CLOSE.match(line)
    if m:
        return f"{m.group(1)}\\htmlonly[block]</details>\\endhtmlonly"
    return None


def convert_inline(line, readme_dir, repo_root):
    """Math and links outside code spans of one line."""
    out, pos = [], 0
    for span in CODE_SPAN.finditer(line):
        out.append(convert_text(line[pos:span.start()], readme_dir, repo_root))
        out.append(span.group(0))
        pos = span.end()
    out.append(convert_text(line[pos:], readme_dir, repo_root))
    return "".join(out)


def convert_text(text, readme_dir, repo_root):
    text = DISPLAY_ONE_LINE.sub(lambda m: r"\f[" + m.group(1) + r"\f]", text)
    text = INLINE_MATH.sub(lambda m: r"\f$" + m.group(1) + r"\f$", text)
    return LINK.sub(lambda m: rewrite_link(m, readme_dir, repo_root), text)


def filter_markdown(text, path):
    readme_dir = os.path.dirname(os.path.abspath(path))
    repo_root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    label = page_label(os.path.abspath(path))
    out = []
    fence = None  # the fence string of the open code block, or None
    in_math_block = False  # inside ```math or a multi-line $$ block
    labelled = label is None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m and not in_math_block:
            if m.group(2) == "math":
                fence, in_math_block = m.group(1), True
                out.append(r"\f[")
            else:
                fence = m.group(1)
                out.append(line)
            continue
        if fence is not None:
            if line.strip() == fence or (m and m.group(1) == fence and not m.group(2)):
                out.append(r"\f]" if in_math_block else line)
                fence, in_math_block = None, False
            else:
                out.append(line)
            continue
        if line.strip() == "$$":  # a display block on its own lines
            out.append(r"\f]" if in_math_block else r"\f[")
            in_math_block = not in_math_block
            continue
        if in_math_block:
            out.append(line)
            continue
        fold = convert_fold(line)
        if fold is not None:
            out.append(fold)
            continue
        if not labelled:
            h = HEADING.match(line)
            if h:
                labelled = True
                if not LABEL.search(line):
                    line = f"{line.rstrip()} {{#{label}}}"
        out.append(convert_inline(line, readme_dir, repo_root))
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: md_filter.py <file.md>")
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    sys.stdout.write(filter_markdown(text, sys.argv[1]))


if __name__ == "__main__":
    main()
