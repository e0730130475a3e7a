#!/usr/bin/env python3
"""Doxygen input filter for the READMEs in the site (chapters/NN_topic/README.md, docs/README.md).

The READMEs are written for GitHub first; this filter makes the same text render in the
Doxygen site (1.9.4 knows neither $...$ math nor links to files outside its input):

  * the first level-1 heading gets the page label {#chNN} (docs/README.md: {#docs_readme})
    unless it has one, so pages can say \\ref ch03 and the site can list the chapters;
  * math: $...$ (on one line or going on on the next) -> \\f$...\\f$, $$...$$ (one or more
    lines) and ```math blocks -> \\f[...\\f];
  * links: [t](../NN_x/README.md) -> [t](@ref chNN); [t](include/tt/x.h) -> [t](@ref x.h);
    [t](docs/foo.md)-style links into docs/ pages -> @ref of that page's label (see PAGE_LABELS);
    other relative links (src/x.cc, tests/...) -> the text plus the repository path in code;
  * folds: a line `<details><summary>text</summary>` and a line `</details>` become the same
    HTML inside \\htmlonly[block] (Doxygen 1.9.4 otherwise closes the <details> at the end of
    each paragraph, so only the summary would be inside the fold); `code` in the summary
    becomes <code>.
  * Markdown that GitHub renders but Doxygen 1.9.4 shows literally: a bold span that begins or
    ends with code, math or punctuation (**`x` is y**) -> <b>...</b>; <br> -> <br/>; \_ inside
    a word -> _ (Doxygen keeps the backslash inside "quotes"); a line "24. text" that continues
    a paragraph -> "24\. text" (CommonMark starts a list inside a paragraph only at "1.");
  * chapter pages (chapters/NN_topic/README.md) get, generated from the chapter number: a label
    on every `##` heading ({#chNN_goal}, ...), links to the previous and next chapters at the
    top and the bottom, a "Start here" box after the Goal section (the learner configure line,
    the check-chNN command, the exercises, the page's sections), and a status box written
    between the title and the first `##` heading (a `>` quote) moved to the end of the page.

Code spans and fenced code blocks are left untouched. The lines keep their numbers (what is
added goes on blank lines or after the last line), so Doxygen's warnings point at the right
README line. check_rendered.py checks the built site for what this filter must not leave.
Usage (by Doxygen): md_filter.py <file>.
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
# The text holds no [ (else "[a, b) | [f](f)" would take "[a, b) | [f" as the text).
LINK = re.compile(r"(!?)\[([^\[\]]*)\]\(([^)\s]+)\)")
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


def outside(pattern, text, convert):
    """text with convert applied to the parts outside the matches of pattern (kept as they are)."""
    out, pos = [], 0
    for span in pattern.finditer(text):
        out += [convert(text[pos:span.start()]), span.group(0)]
        pos = span.end()
    return "".join(out + [convert(text[pos:])])


def convert_inline(line, readme_dir, repo_root):
    """Math, links, <br> and \\_ outside code spans of one line."""
    return outside(CODE_SPAN, line, lambda text: convert_text(text, readme_dir, repo_root))


# Doxygen shows <br> literally after a word and before a code span ("itself<br>`f`").
BR = re.compile(r"<br\s*>", re.IGNORECASE)
# \_ inside a word: Doxygen keeps the backslash inside "quotes" ("adamw\_step").
WORD_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])\\_")
MATH_SPAN = re.compile(r"\\f\$.*?\\f\$|\\f\[.*?\\f\]")


def convert_text(text, readme_dir, repo_root):
    text = DISPLAY_ONE_LINE.sub(lambda m: r"\f[" + m.group(1) + r"\f]", text)
    text = INLINE_MATH.sub(lambda m: r"\f$" + m.group(1) + r"\f$", text)
    return outside(MATH_SPAN, text, lambda prose: convert_prose(prose, readme_dir, repo_root))


def convert_prose(text, readme_dir, repo_root):
    """Text outside code and math."""
    text = BR.sub("<br/>", text)
    text = WORD_UNDERSCORE.sub("_", text)
    return LINK.sub(lambda m: rewrite_link(m, readme_dir, repo_root), text)


# Inline math that goes on on the next line of the paragraph ("$a +" then "b$"): the opening $
# (not followed by a space, not closed on its line) and the closing one (the first $ of the next
# line, not after a space nor before a digit).
MATH_OPEN = re.compile(r"(?<![\\$])\$(?=[^\s$])")
MATH_CLOSE = re.compile(r"^[^$`]*?[^\s\\]\$(?![\d$])")


def math_across_lines(line, following):
    """(column of the opening $ in line, column of the closing $ in following), or (None, None)
    when no inline math of line continues on the following line."""
    if not following.strip() or FENCE.match(following) or following.strip() == "$$":
        return None, None
    # The line without its code spans and its complete formulas (same length, no $ left).
    masked = CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)
    masked = INLINE_MATH.sub(lambda c: " " * len(c.group(0)), masked)
    masked = DISPLAY_ONE_LINE.sub(lambda c: " " * len(c.group(0)), masked)
    opening = list(MATH_OPEN.finditer(masked))
    close = MATH_CLOSE.match(following)
    if len(opening) != 1 or "$" in masked[opening[0].end():] or not close:
        return None, None
    return opening[0].start(), close.end() - 1


# --- Bold spans ---------------------------------------------------------------------------------
# Doxygen 1.9.4 leaves **...** literal when it begins or ends with a code span, math or some
# punctuation (**`f` is given**); GitHub renders it. <b>...</b> renders in both.
PROTECTED = re.compile(r"(`+).+?\1|\\f\$.*?\\f\$|\\f\[.*?\\f\]|\\htmlonly.*?\\endhtmlonly")


def bold_markers(line):
    """Positions of the ** of a line outside code spans, math and raw HTML."""
    found, pos = [], 0
    for span in list(PROTECTED.finditer(line)) + [None]:
        end = span.start() if span else len(line)
        for m in re.finditer(r"\*\*", line[pos:end]):
            found.append(pos + m.start())
        pos = span.end() if span else end
    return found


def convert_bold(lines, text_lines):
    """Turns the **...** pairs of each paragraph (a run of text lines) into <b>...</b> where
    Doxygen would not render them."""
    markers = []  # (line index, column) of the ** of the current paragraph

    def flush():
        edits = {}
        for (l1, c1), (l2, c2) in zip(markers[0::2], markers[1::2]):
            first = lines[l1][c1 + 2:c1 + 3]
            last = lines[l2][c2 - 1:c2] if c2 > 0 else ""
            if not first or not last or first.isspace() or last.isspace():
                continue  # not a bold span for Markdown either
            if first.isalnum() and last.isalnum():
                continue  # Doxygen renders it
            edits.setdefault(l1, []).append((c1, "<b>"))
            edits.setdefault(l2, []).append((c2, "</b>"))
        for l, cuts in edits.items():
            for c, tag in sorted(cuts, reverse=True):
                lines[l] = lines[l][:c] + tag + lines[l][c + 2:]
        markers.clear()

    for i, line in enumerate(lines):
        if i not in text_lines or not line.strip():
            flush()
            continue
        markers.extend((i, c) for c in bold_markers(line))
    flush()


# --- Ordered lists ------------------------------------------------------------------------------
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
NUMBERED = re.compile(r"^(\d+)\.(\s)")


def is_paragraph_line(line):
    s = line.strip()
    return bool(s) and not line[0].isspace() and not LIST_ITEM.match(line) and \
        s[0] not in "#|>\\<"


# --- Chapter pages: navigation, "Start here", status box ----------------------------------------
H2 = re.compile(r"^##\s+(.*?)\s*(\{#[\w-]+\})?\s*$")


def slug(text):
    text = re.sub(r"`|\*\*|\$|\\f\$", "", text).lower()
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_") or "section"


def plain(text):
    """A heading as HTML text: code spans become <code>, other Markdown marks go."""
    parts, pos = [], 0
    for span in CODE_SPAN.finditer(text):
        parts.append(html.escape(text[pos:span.start()].replace("**", "")))
        parts.append("<code>" + html.escape(span.group(2).strip()) + "</code>")
        pos = span.end()
    parts.append(html.escape(text[pos:].replace("**", "")))
    return "".join(parts)


def chapter_title(readme):
    with open(readme, encoding="utf-8") as f:
        for line in f:
            h = HEADING.match(line)
            if h:
                return LABEL.sub("", h.group(1)).strip()
    return os.path.basename(os.path.dirname(readme))


def neighbour(repo_root, num):
    """(label, title) of chapter num if its README exists, else None."""
    if num < 1:
        return None
    chapters = os.path.join(repo_root, "chapters")
    for name in sorted(os.listdir(chapters)) if os.path.isdir(chapters) else []:
        readme = os.path.join(chapters, name, "README.md")
        if name.startswith(f"{num:02d}_") and os.path.isfile(readme):
            return f"ch{num:02d}", chapter_title(readme)
    return None


def nav_html(repo_root, num, where):
    prev, nxt = neighbour(repo_root, num - 1), neighbour(repo_root, num + 1)
    items = []
    items.append(f'<a class="tt-prev" href="{prev[0]}.html">&larr; {plain(prev[1])}</a>' if prev
                 else '<span class="tt-prev"></span>')
    items.append('<a class="tt-up" href="chapters.html">All chapters</a>')
    items.append(f'<a class="tt-next" href="{nxt[0]}.html">{plain(nxt[1])} &rarr;</a>' if nxt
                 else '<span class="tt-next"></span>')
    return (f'\\htmlonly[block]<nav class="tt-chapter-nav tt-nav-{where}">' + "".join(items) +
            "</nav>\\endhtmlonly")


def start_box(label, num, topic_dir, sections):
    """The "Start here" box of chapter num (one line of HTML)."""
    prev = num - 1
    before = (f"chapters 01&ndash;{prev:02d} use the reference solutions, your code starts here"
              if prev > 1 else "chapter 01 uses the reference solution, your code starts here"
              if prev == 1 else "no chapter comes before this one")
    ex = [s for s in sections if s[1] == f"{label}_exercises"]
    exercises = (f'<a href="{label}.html#{ex[0][1]}">the exercises</a>' if ex
                 else "the exercises")
    toc = " &middot; ".join(f'<a href="{label}.html#{anchor}">{plain(title)}</a>'
                            for title, anchor in sections)
    return ('\\htmlonly[block]<div class="tt-start"><div class="tt-start-title">Start here</div>'
            '<dl>'
            f'<dt>Configure once</dt><dd><code>cmake --preset learner '
            f'-DTT_SOLUTIONS_UPTO={prev}</code> ({before}; see the '
            '<a href="learner_guide.html">learner guide</a>)</dd>'
            f'<dt>Work</dt><dd>{exercises}: your files are in '
            f'<code>chapters/{topic_dir}/src/</code></dd>'
            f'<dt>Check</dt><dd><code>cmake --build --preset learner --target check-{label}</code>'
            ' (how many exercises pass, and the next one)</dd>'
            f'<dt>On this page</dt><dd>{toc}</dd>'
            '</dl></div>\\endhtmlonly')


def structure_chapter(lines, text_lines, label, repo_root, topic_dir):
    """Adds the navigation, the "Start here" box and the section labels of a chapter page, and
    moves its status box to the end. Returns the lines to append after the last one."""
    num = int(label[2:])
    title_at = next((i for i in sorted(text_lines) if HEADING.match(lines[i])), None)
    if title_at is None:
        return []
    # Headings: a label on each ## heading, the page's sections in order.
    sections, used = [], set()
    for i in sorted(text_lines):
        h = H2.match(lines[i])
        if not h:
            continue
        anchor = h.group(2)[2:-1] if h.group(2) else f"{label}_{slug(h.group(1))}"
        while anchor in used:
            anchor += "_"
        used.add(anchor)
        if not h.group(2):
            lines[i] = f"## {h.group(1)} {{#{anchor}}}"
        sections.append((i, h.group(1), anchor))
    first_h2 = sections[0][0] if sections else len(lines)
    # A status box: the quote between the title and the first ## heading.
    status = []
    for i in range(title_at + 1, first_h2):
        if lines[i].startswith(">"):
            status.append(lines[i])
            lines[i] = ""
    toc = [(t, a) for _, t, a in sections]
    if status:
        toc.append(("Development status", f"{label}_status"))
    # Top navigation on the blank line after the title.
    if title_at + 1 < len(lines) and not lines[title_at + 1].strip():
        lines[title_at + 1] = nav_html(repo_root, num, "top")
    # "Start here" on the last blank line before the heading that follows the Goal (or the first
    # ## heading when there is no Goal section).
    goal = next((k for k, (_, t, _a) in enumerate(sections) if t.strip().lower() == "goal"), None)
    after = sections[goal + 1][0] if goal is not None and goal + 1 < len(sections) else first_h2
    spot = next((i for i in range(after - 1, title_at + 1, -1) if not lines[i].strip()), None)
    if spot is not None:
        lines[spot] = start_box(label, num, topic_dir, toc)
    tail = [""]
    if status:
        tail += [f"## Development status {{#{label}_status}}", ""] + status + [""]
    tail.append(nav_html(repo_root, num, "bottom"))
    return tail


def filter_markdown(text, path):
    readme_dir = os.path.dirname(os.path.abspath(path))
    repo_root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    label = page_label(os.path.abspath(path))
    out = []
    text_lines = set()  # indices of the output lines that are Markdown text (not code, math, folds)
    fence = None  # the fence string of the open code block, or None
    in_math_block = False  # inside ```math or a multi-line $$ block
    labelled = label is None
    previous = ""  # the previous source line outside code and math
    in_list = False
    source = text.split("\n")
    closes_math = None  # the column of the $ that closes inline math opened on the line before
    for number, line in enumerate(source):
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
        # A list starts inside a paragraph only at "1." (CommonMark); Doxygen starts one at any.
        n = NUMBERED.match(line)
        if n and n.group(1) != "1" and not in_list and is_paragraph_line(previous):
            line = f"{n.group(1)}\\.{line[n.end(1) + 1:]}"
        elif LIST_ITEM.match(line):
            in_list = True
        elif line.strip() and not line[0].isspace() and not previous.strip():
            in_list = False
        previous = line
        text_lines.add(len(out))
        head, line = "", line
        if closes_math is not None:  # the end of a formula: kept as it is
            head, line = line[:closes_math] + r"\f$", line[closes_math + 1:]
        following = source[number + 1] if number + 1 < len(source) else ""
        opens, closes_math = math_across_lines(line, following)
        if opens is not None:
            out.append(head + convert_inline(line[:opens], readme_dir, repo_root) + r"\f$" +
                       line[opens + 1:])
        else:
            out.append(head + convert_inline(line, readme_dir, repo_root))
    convert_bold(out, text_lines)
    chapter = re.search(r"/chapters/((\d\d)_[^/]+)/README\.md$",
                        os.path.abspath(path).replace(os.sep, "/"))
    if chapter and label:
        out += structure_chapter(out, text_lines, label, repo_root, chapter.group(1))
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: md_filter.py <file.md>")
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    sys.stdout.write(filter_markdown(text, sys.argv[1]))


if __name__ == "__main__":
    main()
