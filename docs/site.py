#!/usr/bin/env python3
"""site.py — the pieces of the course site that Doxygen does not make.

docs/build_docs.sh runs Doxygen once per chapter and once for the course's
landing page. Around those runs it calls this script:

    site.py chapter ...   before a chapter's run: its header and footer (the
                          course bar: index, chapters, previous and next),
                          and its page "Changes from the previous stage"
                          (every file of the chapter but its lab/)
    site.py course ...    before the landing page's run: the landing page
                          (docs/index.md with a richer chapter map, its
                          links to CHAPTER/lab/instructors.md made links to
                          their pages), the search page, and their header
                          and footer
    site.py finish ...    after every run: the search index of the whole
                          course, and links on API names written with
                          arguments, such as `coro_create(fn, arg, size)`

Every option is described by `site.py COMMAND --help`. Everything here is
the Python standard library, plus Pygments (Debian's python3-pygments) for
the colours of the diff.
"""

import argparse
import difflib
import html
import html.parser
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import xml.etree.ElementTree as ElementTree

try:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer
except ImportError:  # say what to install rather than print a traceback
    sys.exit("site.py: Pygments is missing (Debian: apt-get install python3-pygments)")

HERE = os.path.dirname(os.path.realpath(__file__))


def load_stage_diff(root):
    """tools/stage_diff as a module: the diff page decides what a file is
    (hidden, binary) exactly as the course's own diff tool does."""
    path = os.path.join(root, "tools", "stage_diff")
    if not os.path.exists(path):        # by hand, next to this script
        path = os.path.join(HERE, "..", "tools", "stage_diff")
    loader = importlib.machinery.SourceFileLoader("stage_diff", path)
    spec = importlib.util.spec_from_loader("stage_diff", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def esc(text):
    return html.escape(text, quote=True)


# --------------------------------------------------------------------------
# The chapters: titles and the course bar
# --------------------------------------------------------------------------

def chapter_title(root, chapter):
    """The first "# " heading of the lesson, without a {#label}."""
    with open(os.path.join(root, chapter, "README.md"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("# "):
                return re.sub(r"\s*\{#[^}]*\}\s*$", "", line[2:].strip())
    return chapter


def short_title(title):
    """"Chapter 3 — Timers: who wakes the sleepers" -> "Chapter 3 — Timers"."""
    return title.split(":", 1)[0]


def chapter_number(chapter):
    return int(chapter[2:4])


def course_bar(root, chapters, current, up):
    """The bar at the top of every page: the course index, every chapter
    (the current one marked), this chapter's four pages, the search box.

    up is the path from the page to the site's root: "../../" from a
    chapter's html/ directory, "" from the landing page."""
    parts = ['<div id="course-bar">',
             '<a class="course-home" href="%sindex.html">Coroutines in C</a>' % up,
             '<span class="course-chapters">Chapters:']
    for chapter in chapters:
        title = chapter_title(root, chapter)
        mark = ' aria-current="page" class="course-current"' if chapter == current else ""
        parts.append('<a%s href="%s%s/html/index.html" title="%s">%d</a>'
                     % (mark, up, chapter, esc(title), chapter_number(chapter)))
    parts.append("</span>")
    if current:
        parts.append('<span class="course-chapter">%s</span>'
                     % esc(short_title(chapter_title(root, current))))
        parts.append('<span class="course-pages">'
                     '<a href="index.html">Lesson</a>'
                     '<a href="coro_8h.html">API</a>'
                     '<a href="states.html">States</a>'
                     '<a href="changes.html">Changes</a></span>')
    parts.append('<form class="course-search" action="%ssearch_course.html">'
                 '<input type="search" name="q" placeholder="Search the course"'
                 ' aria-label="Search the course"/></form>' % up)
    parts.append("</div>")
    return "\n".join(parts)


def course_pager(root, chapters, current, up):
    """The links at the bottom of every page: previous chapter, the course
    index, next chapter (the landing page's "next" is chapter 1)."""
    index = chapters.index(current) if current else -1
    prev = chapters[index - 1] if index > 0 else None
    nxt = chapters[index + 1] if index + 1 < len(chapters) else None
    cells = []
    if prev:
        cells.append('<a rel="prev" class="course-prev" href="%s%s/html/index.html">'
                     '&larr; %s</a>' % (up, prev, esc(short_title(chapter_title(root, prev)))))
    else:
        cells.append('<span class="course-prev"></span>')
    cells.append('<a class="course-index" href="%sindex.html">The course</a>' % up)
    if nxt:
        cells.append('<a rel="next" class="course-next" href="%s%s/html/index.html">'
                     '%s &rarr;</a>' % (up, nxt, esc(short_title(chapter_title(root, nxt)))))
    else:
        cells.append('<span class="course-next"></span>')
    return '<nav id="course-pager">\n%s\n</nav>' % "\n".join(cells)


def write_header_footer(root, chapters, current, up, pages):
    """docs/header.html and docs/footer.html with the course bar and the
    pager filled in: Doxygen's HTML_HEADER and HTML_FOOTER for one run."""
    for name, marker, text in (
            ("header.html", "<!--COURSE_BAR-->", course_bar(root, chapters, current, up)),
            ("footer.html", "<!--COURSE_PAGER-->", course_pager(root, chapters, current, up))):
        with open(os.path.join(root, "docs", name), encoding="utf-8") as f:
            template = f.read()
        write(os.path.join(pages, name), template.replace(marker, text))


# --------------------------------------------------------------------------
# The page "Changes from the previous stage"
# --------------------------------------------------------------------------

# A chapter's lab/ (tools/lab: the lab's scope, the exercises' checks and
# reference answers, the instructors' notes) is course material about the
# chapter, not the chapter's code: the diff page leaves it out.
LAB_DIRECTORY = "lab"


def tree_files(stage_diff, top):
    """Every file under top, as a path relative to it, hidden ones left out
    (as tools/stage_diff does), and the chapter's lab/ too."""
    found = []

    def walk(directory, prefix):
        for name in sorted(stage_diff.visible_entries(directory)):
            if not prefix and name == LAB_DIRECTORY:
                continue
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                walk(path, prefix + name + "/")
            else:
                found.append(prefix + name)
    if top:
        walk(top, "")
    return found


def read_bytes(path):
    if path is None or not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def is_prose(path):
    """The lesson and the other Markdown pages: prose, shown apart."""
    return path.endswith(".md")


def anchor_for(path):
    return "file-" + re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")


def file_changes(stage_diff, old_dir, new_dir):
    """One record per file that is new, changed or removed: (path, status,
    unified diff lines or None for a binary file, +, -); the new files
    first, each group in the order of its paths."""
    old_files = set(tree_files(stage_diff, old_dir))
    new_files = set(tree_files(stage_diff, new_dir))
    changes = []
    for path in sorted(old_files | new_files):
        old = read_bytes(os.path.join(old_dir, path)) if path in old_files else None
        new = read_bytes(os.path.join(new_dir, path)) if path in new_files else None
        if old == new:
            continue
        status = "new" if old is None else "removed" if new is None else "changed"
        if any(data is not None and stage_diff.is_binary(data) for data in (old, new)):
            changes.append((path, status, None, 0, 0))
            continue
        old_lines = old.decode("utf-8").splitlines(keepends=True) if old else []
        new_lines = new.decode("utf-8").splitlines(keepends=True) if new else []
        lines = []
        # Without file names: the section's heading names the file. A new
        # file is one hunk of added lines: shown whole, as `diff -N` does.
        for line in list(difflib.unified_diff(old_lines, new_lines, n=3))[2:]:
            lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        plus = sum(1 for line in lines if line.startswith("+"))
        minus = sum(1 for line in lines if line.startswith("-"))
        changes.append((path, status, lines, plus, minus))
    # What the chapter adds first: its new files, then the changed ones.
    order = {"new": 0, "changed": 1, "removed": 2}
    return sorted(changes, key=lambda change: order[change[1]])


def colour_diff(lines):
    """The diff as HTML, each line coloured by Pygments' diff lexer."""
    return highlight("".join(lines), DiffLexer(), HtmlFormatter(nowrap=True))


# The link to the lesson's section "What changed". Its anchor is Doxygen's
# (autotoc_mdN), known only once the lesson is built: `finish` puts it in.
WHAT_CHANGED_LINK = "index.html#what-changed"

STATUS_WORDS = {"new": "new file", "changed": "changed", "removed": "removed"}


def count_cell(plus, minus):
    cells = []
    if plus:
        cells.append('<span class="diff-plus">+%d</span>' % plus)
    if minus:
        cells.append('<span class="diff-minus">&minus;%d</span>' % minus)
    return " ".join(cells) or "&nbsp;"


def file_section(change, prev, chapter):
    path, status, lines, plus, minus = change
    out = ['<section class="diff-file" id="%s">' % anchor_for(path),
           '<h3><code>%s</code> <span class="diff-status diff-%s">%s</span> %s</h3>'
           % (esc(path), status, STATUS_WORDS[status], count_cell(plus, minus))]
    if lines is None:
        out.append("<p>A binary file: not shown.</p>")
    else:
        where = {"new": "%s/%s, whole" % (chapter, path),
                 "removed": "%s/%s, gone in %s" % (prev, path, chapter),
                 "changed": "%s/%s &rarr; %s/%s" % (prev, path, chapter, path)}[status]
        out.append('<p class="diff-where">%s</p>' % esc(where).replace("&amp;rarr;", "&rarr;"))
        out.append('<pre class="diff">%s</pre>' % colour_diff(lines))
    out.append('<p class="diff-top"><a href="#diff-files">&uarr; the list of files</a></p>')
    out.append("</section>")
    return "\n".join(out)


def file_table(changes):
    rows = ['<table class="diff-files">',
            "<tr><th>File</th><th>Change</th><th>Lines</th></tr>"]
    for path, status, _, plus, minus in changes:
        rows.append('<tr><td><a href="#%s"><code>%s</code></a></td>'
                    '<td class="diff-%s">%s</td><td>%s</td></tr>'
                    % (anchor_for(path), esc(path), status, STATUS_WORDS[status],
                       count_cell(plus, minus)))
    rows.append("</table>")
    return "\n".join(rows)


def changes_body(changes, prev, chapter):
    """The HTML of the diff page, under Doxygen's title: a summary, the list
    of files (each a link to its section), the code's sections, and the
    prose's sections folded away."""
    code = [c for c in changes if not is_prose(c[0])]
    prose = [c for c in changes if is_prose(c[0])]
    new = sum(1 for c in code if c[1] == "new")
    changed = sum(1 for c in code if c[1] == "changed")
    removed = sum(1 for c in code if c[1] == "removed")
    plus = sum(c[3] for c in code)
    minus = sum(c[4] for c in code)
    out = ['<div class="course-diff">']
    if prev:
        out.append("<p>What <code>%s</code> adds to <code>%s</code>, file by file: "
                   "%d new files, %d changed, %d removed in the code "
                   "(%s lines): what <code>diff -ruN %s %s</code> prints, one section "
                   "per file. New files are shown whole. The lesson's section "
                   "<a href=\"%s\">What changed</a> explains every function "
                   "named here.</p>"
                   % (chapter, prev, new, changed, removed, count_cell(plus, minus),
                      prev, chapter, WHAT_CHANGED_LINK))
    else:
        out.append("<p>The first chapter starts from nothing: here is every file "
                   "of <code>%s</code>, whole (%d files). Read the "
                   "<a href=\"index.html\">lesson</a> first.</p>" % (chapter, new))
    out.append('<h2 id="diff-files">The files</h2>')
    out.append("<p>The code:</p>")
    out.append(file_table(code))
    if prose:
        out.append("<p>The prose: the lesson and the other pages "
                   "(shown at the end, folded).</p>")
        out.append(file_table(prose))
    out.append('<h2 id="diff-code">The code, file by file</h2>')
    for change in code:
        out.append(file_section(change, prev, chapter))
    if prose:
        out.append('<h2 id="diff-prose">The prose</h2>')
        out.append("<p>A lesson is mostly rewritten from one chapter to the next: "
                   "read it as a page, not as a diff. Its diff is here, folded, "
                   "for the curious.</p>")
        for change in prose:
            out.append('<details class="diff-prose"><summary><code>%s</code> %s %s</summary>'
                       % (esc(change[0]), STATUS_WORDS[change[1]], count_cell(change[3], change[4])))
            out.append(file_section(change, prev, chapter))
            out.append("</details>")
    out.append("</div>")
    return "\n".join(out) + "\n"


def write_changes_page(root, sources, prev, chapter, pages):
    stage_diff = load_stage_diff(root)
    old_dir = os.path.join(sources, prev) if prev else None
    changes = file_changes(stage_diff, old_dir, os.path.join(sources, chapter))
    write(os.path.join(pages, "changes_body.html"), changes_body(changes, prev, chapter))
    title = "Changes from the previous stage" if prev else "The first stage: every file is new"
    write(os.path.join(pages, "changes.md"),
          "# %s {#changes}\n\n\\htmlinclude changes_body.html\n" % title)


# --------------------------------------------------------------------------
# The landing page and the search page
# --------------------------------------------------------------------------

# The instructors' notes of a chapter's lab, CHAPTER/lab/instructors.md:
# the page Doxygen makes of it in the chapter's run (a Markdown file without
# a {#label} is named after its path: md_lab_instructors.html).
INSTRUCTORS_MD = "lab/instructors.md"
INSTRUCTORS_PAGE = "md_lab_instructors.html"

TABLE_ROW_RE = re.compile(r"^\|\s*(\d+)\s*\|\s*\[[^\]]*\]\(\.\./(ch\d\d_\w+)/README\.md\)\s*\|(.*)\|\s*$")


def write_course_pages(root, chapters, pages):
    """course.md: docs/index.md, whose chapter map becomes a table with each
    chapter's lesson, API, states and diff (every line of index.md that
    starts with "|" is that map: the page has no other table), and whose
    links to a chapter's lab/instructors.md lead to that page of the
    chapter's reference; search_course.md: the search."""
    with open(os.path.join(root, "docs", "index.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    concept = {}
    for line in lines:
        match = TABLE_ROW_RE.match(line)
        if match:
            concept[match.group(2)] = match.group(3).strip()
    table = ["| Chapter | What it teaches | Its pages |",
             "| ------- | --------------- | --------- |"]
    for chapter in chapters:
        base = chapter + "/html/"
        table.append("| [%s](%sindex.html) | %s | [lesson](%sindex.html) · "
                     "[API](%scoro_8h.html) · [states](%sstates.html) · "
                     "[diff](%schanges.html) |"
                     % (chapter_title(root, chapter), base, concept.get(chapter, ""),
                        base, base, base, base))
    out, in_table = [], False
    for line in lines:
        if line.startswith("|"):
            if not in_table:
                out.extend(table)
                in_table = True
            continue
        in_table = False
        # Any other link to a lesson on disk: to that chapter's HTML; a
        # link to a chapter's instructors' notes: to their page.
        line = re.sub(r"\]\(\.\./(ch\d\d_\w+)/README\.md\)", r"](\1/html/index.html)", line)
        line = re.sub(r"\]\(\.\./(ch\d\d_\w+)/%s\)" % re.escape(INSTRUCTORS_MD),
                      r"](\1/html/%s)" % INSTRUCTORS_PAGE, line)
        out.append(line)
    write(os.path.join(pages, "course.md"), "\n".join(out))
    write(os.path.join(pages, "search_course.md"), SEARCH_PAGE)


SEARCH_PAGE = r"""# Search the course {#search_course}

Every lesson, every API entry and the states page of every chapter (not
the instructors' notes). Words are matched anywhere, in any case; a result
has all of them.

\htmlonly
<form class="course-search-page" action="search_course.html">
<input type="search" id="course-query" name="q" aria-label="Search the course" size="40"/>
<input type="submit" value="Search"/>
</form>
<div id="course-results"></div>
<script type="text/javascript" src="course_index.js"></script>
<script type="text/javascript" src="course_search.js"></script>
\endhtmlonly
"""


# --------------------------------------------------------------------------
# After the runs: the search index, and links on API names with arguments
# --------------------------------------------------------------------------

class Sections(html.parser.HTMLParser):
    """Cuts a Doxygen page into sections: one per heading (h1-h4) or API
    entry (h2.memtitle), each with its anchor and its text."""

    HEADINGS = {"h1", "h2", "h3", "h4"}
    SKIP = {"script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.sections = []          # [anchor, title, text parts]
        self.depth_contents = None  # depth of div.contents, once inside
        self.depth = 0
        self.skip = 0
        self.in_heading = None      # the tag of the heading being read
        self.title = []
        self.anchor = ""
        self.pending_anchor = ""
        self.toc_depth = 0          # depth of div.toc, while inside

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag not in ("br", "img", "hr", "meta", "link", "input"):
            self.depth += 1
        if tag == "div" and "contents" in (attrs.get("class") or "").split():
            self.depth_contents = self.depth
            self.sections.append(["", "", []])
        if self.depth_contents is None:
            return
        if tag in self.SKIP:
            self.skip += 1
        if tag == "div" and "toc" in (attrs.get("class") or "").split() and not self.toc_depth:
            self.toc_depth = self.depth       # the table of contents: not a section
        if tag == "a" and attrs.get("id"):
            self.pending_anchor = attrs["id"]
        if tag == "a" and self.in_heading and (attrs.get("href") or "").startswith("#"):
            self.anchor = attrs["href"][1:]       # a memtitle's permalink
        if tag in self.HEADINGS and not self.in_heading:
            self.in_heading = tag
            self.title = []
            self.anchor = attrs.get("id") or self.pending_anchor

    def handle_endtag(self, tag):
        if self.depth_contents is not None:
            if tag in self.SKIP and self.skip:
                self.skip -= 1
            if tag == self.in_heading:
                title = " ".join("".join(self.title).replace("\u25c6", "").split())
                self.sections.append([self.anchor, title, []])
                self.in_heading = None
                self.pending_anchor = ""
            if self.depth == self.depth_contents and tag == "div":
                self.depth_contents = None
            if self.depth == self.toc_depth and tag == "div":
                self.toc_depth = 0
        self.depth -= 1

    def handle_data(self, data):
        if self.depth_contents is None or self.skip or self.toc_depth:
            return
        if self.in_heading:
            self.title.append(data)
        elif self.sections:
            self.sections[-1][2].append(data)


def page_kind(name):
    if name == "index.html":
        return "Lesson"
    if name == "states.html":
        return "States"
    if name.startswith("md_"):
        return "Notes"          # a companion page of the lesson
    return "API"


def indexed_pages(html_dir):
    """The pages worth searching: the lesson, its companion pages
    (notes/*.md, examples/*.md: Doxygen's md_*.html), the states, the API
    entries (groups, the header, the structs); not the diff, the source
    listing or Doxygen's lists of names. Nor the instructors' notes of the
    lab (md_lab_*.html): the search box is on every page a student reads,
    and those notes say what a good answer to each exercise contains; a
    student searching a topic should land in the lesson, not in the
    grading notes. The landing page links them for instructors."""
    names = ["index.html", "states.html"]
    for name in sorted(os.listdir(html_dir)):
        if name.startswith("md_%s_" % LAB_DIRECTORY):
            continue
        if re.match(r"^(md_.*|group__.*|struct.*|coro_8h)\.html$", name):
            names.append(name)
    return [n for n in names if os.path.exists(os.path.join(html_dir, n))]


def search_entries(out, chapters, root):
    entries = []
    for chapter in chapters:
        html_dir = os.path.join(out, chapter, "html")
        if not os.path.isdir(html_dir):
            continue
        label = short_title(chapter_title(root, chapter))
        seen = set()
        for name in indexed_pages(html_dir):
            parser = Sections()
            with open(os.path.join(html_dir, name), encoding="utf-8") as f:
                parser.feed(f.read())
            for anchor, title, parts in parser.sections:
                text = " ".join("".join(parts).split())
                if not text and not title:
                    continue
                # coro_8h.html repeats the group pages' entries: keep one.
                key = (title, text[:200])
                if key in seen:
                    continue
                seen.add(key)
                url = "%s/html/%s%s" % (chapter, name, "#" + anchor if anchor else "")
                entries.append({"c": label, "k": page_kind(name), "t": title or label,
                                "u": url, "x": text[:4000]})
    return entries


def api_links(tagfile):
    """name -> "file.html#anchor" for every function and macro in the
    chapter's Doxygen tag file, the group's page first (as Doxygen links)."""
    links = {}
    if not os.path.exists(tagfile):
        return links
    tree = ElementTree.parse(tagfile)
    compounds = sorted(tree.getroot().iter("compound"),
                       key=lambda c: c.get("kind") != "group")
    for compound in compounds:
        for member in compound.iter("member"):
            if member.get("kind") not in ("function", "define"):
                continue
            name = member.findtext("name")
            if name and name not in links:
                links[name] = "%s#%s" % (member.findtext("anchorfile"), member.findtext("anchor"))
    return links


CODE_CALL_RE = re.compile(r"<code>([A-Za-z_]\w*)\(([^<>()]*)\)</code>")


def link_calls(html_dir, links):
    """<code>coro_create(fn, arg, size)</code> -> the same, with the name a
    link to its entry. Doxygen links `coro_create()` but not a call written
    with its arguments. Returns how many were linked."""
    count = 0
    for name in os.listdir(html_dir):
        if not name.endswith(".html"):
            continue
        path = os.path.join(html_dir, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()

        def link(match):
            nonlocal count
            target = links.get(match.group(1))
            if not target or not match.group(2).strip():
                return match.group(0)
            count += 1
            return '<code><a class="el" href="%s">%s</a>(%s)</code>' % (
                target, match.group(1), match.group(2))
        new = CODE_CALL_RE.sub(link, text)
        if new != text:
            write(path, new)
    return count


def link_what_changed(html_dir):
    """Point the diff page's link to "What changed" at that section of the
    lesson (or at the lesson's top if it has no such section)."""
    with open(os.path.join(html_dir, "index.html"), encoding="utf-8") as f:
        match = re.search(r'<a class="anchor" id="([^"]+)"></a>\s*What changed\s*</h', f.read())
    path = os.path.join(html_dir, "changes.html")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    write(path, text.replace('href="%s"' % WHAT_CHANGED_LINK,
                             'href="index.html%s"' % ("#" + match.group(1) if match else "")))


def finish(root, out, chapters):
    for chapter in chapters:
        html_dir = os.path.join(out, chapter, "html")
        if os.path.isdir(html_dir):
            link_calls(html_dir, api_links(os.path.join(out, chapter, "pages", "coro.tag")))
            link_what_changed(html_dir)
    entries = search_entries(out, chapters, root)
    write(os.path.join(out, "course_index.js"),
          "// The search index of the course, written by docs/site.py.\n"
          "var COURSE_INDEX = %s;\n" % json.dumps(entries, ensure_ascii=False, indent=0))


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("chapter", "course", "finish"):
        p = sub.add_parser(name)
        p.add_argument("--root", required=True, help="the directory holding docs/ and the chapters")
        p.add_argument("--chapters", nargs="+", required=True, help="every chapter, in course order")
        if name == "chapter":
            p.add_argument("--chapter", required=True)
            p.add_argument("--sources", required=True,
                           help="where the chapters' files are read for the diff")
            p.add_argument("--pages", required=True, help="the chapter's generated pages")
        elif name == "course":
            p.add_argument("--pages", required=True)
        else:
            p.add_argument("--out", required=True, help="the site's root")
    args = parser.parse_args(argv)
    if args.command == "chapter":
        index = args.chapters.index(args.chapter)
        prev = args.chapters[index - 1] if index else None
        write_header_footer(args.root, args.chapters, args.chapter, "../../", args.pages)
        write_changes_page(args.root, args.sources, prev, args.chapter, args.pages)
    elif args.command == "course":
        write_header_footer(args.root, args.chapters, None, "", args.pages)
        write_course_pages(args.root, args.chapters, args.pages)
    else:
        finish(args.root, args.out, args.chapters)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
