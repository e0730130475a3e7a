#!/usr/bin/env python3
"""Checks the generated Doxygen site for broken internal links (run by the `docs` target).

  check_links.py <html_dir>

For every <a href="..."> in every page of the site: a link to another page of the site must
name an existing file, and a fragment (#anchor), on the same page or another, must name an
id= or name= that exists on that page. External links (http:, https:, mailto:) and links into
MathJax are not checked. Prints each broken link as `page: href` and exits 1 if there is any.
Doxygen itself does not report these (e.g. 1.9.4's "#nested-classes" link to a section it
leaves out), so without this check they would only be found by clicking.
"""
import html.parser
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name"):
                self.anchors.add(value)
            elif key == "href" and tag == "a":
                self.links.append(value)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(sys.argv[1]).resolve()
    pages: dict[Path, _Page] = {}
    for path in sorted(root.glob("*.html")):
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        pages[path] = page
    if not pages:
        print(f"check_links: no HTML pages in {root}", file=sys.stderr)
        return 2
    broken = []
    checked = 0
    for path, page in pages.items():
        for href in page.links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("javascript:"):
                continue
            target = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
            if root / "mathjax" in target.parents:
                continue
            checked += 1
            if not target.exists():
                broken.append(f"{path.name}: {href} (no such file)")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                anchors = pages[target].anchors if target in pages else set()
                if fragment not in anchors:
                    broken.append(f"{path.name}: {href} (no anchor '{fragment}')")
    for line in broken:
        print(f"check_links: broken link in {line}")
    print(f"check_links: {checked} internal links in {len(pages)} pages, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
