#!/usr/bin/env python3
"""browser_check.py — open every page of the built course site in headless
Chromium, as a student would, and fail on what a student would trip over.

    browser_check.py --site DIR --sources DIR [--shots DIR] CHAPTER...

DIR is what docs/build_docs.sh wrote (index.html at its root, CHAPTER/html/
below); --sources holds the chapter directories (to know each chapter's new
files); the CHAPTERs are in course order. Every page is loaded in Chromium
(Debian's `chromium`), and what the browser made of it is checked:

  1. no literal markup in the rendered text: `**`, a backquote, an HTML tag
     or entity shown as text (`<tt>`, `&lt;`), a Markdown link or heading,
     a Doxygen command. Code (pre, code, tt, Doxygen's code fragments and
     the C declarations of the API pages) is left out: there such
     characters are the point.
  2. no broken link or image: every link, image-map area, image, stylesheet
     and script of the site points at a file that exists, every #fragment
     at an element of that page, and every image was decoded by the browser.
     Links out of the site (http:, https:, mailto:) are counted, not
     followed: the check runs offline.
  3. every page of a chapter links to the course's index, to the previous
     chapter and to the next one; the landing page links to every chapter.
  4. every chapter's diff page (CHAPTER/html/changes.html) has, for each
     file that is new in the chapter, a link named after the file to a part
     of the page that shows every line of it as added; and it lists no file
     of the chapter's lab/ (the lab's scope, checks, answers and notes are
     not the chapter's code; a chapter's new files are counted without it).
  5. the course search finds a lesson's heading.
  6. every chapter with a lab (a lab/ directory in its sources) has its
     instructors' page (CHAPTER/lab/instructors.md, built as
     CHAPTER/html/md_lab_instructors.html), the landing page links to
     every one of them, and no lesson does: students are never sent to the
     instructors' notes from a lesson.
  7. every chapter with a trace (trace.c in its sources) shows, in its
     lesson, the timeline of one of its examples (timeline.svg, built from
     the chapter's current code when the site is), decoded by the browser.

With --shots, it writes a screenshot (PNG) of each chapter's lesson and diff
page, of the diff page at its first new file, of each chapter's instructors'
page, of the landing page and of a search. Exit status: 0 if every check passed, 1 if any failed (each failure
is printed), 2 if Chromium could not be run.

Chromium is driven through its DevTools protocol over a pipe
(--remote-debugging-pipe: JSON messages, each ended by a NUL byte, on file
descriptors 3 and 4), so Python's standard library is enough.
"""

import argparse
import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

# --------------------------------------------------------------------------
# Chromium through the DevTools protocol
# --------------------------------------------------------------------------


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium, one tab, driven over a pipe."""

    def __init__(self, width=1280, height=1000):
        binary = os.environ.get("CHROMIUM") or shutil.which("chromium") or \
            shutil.which("chromium-browser")
        if not binary:
            raise BrowserError("no chromium on the PATH (Debian: apt-get install chromium)")
        self.profile = tempfile.mkdtemp(prefix="browser_check.")
        args = [binary, "--headless", "--remote-debugging-pipe",
                "--user-data-dir=" + self.profile, "--disable-gpu",
                "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--mute-audio",
                "--window-size=%d,%d" % (width, height)]
        # Chromium's own sandbox cannot start as root (CI runs as root).
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        # The pipes: Chromium reads our commands on its fd 3 and writes its
        # answers on its fd 4. Our ends are moved to high numbers first, so
        # that the child's dup2() onto 3 and 4 cannot overwrite them.
        to_child, self.commands = os.pipe()
        self.answers, from_child = os.pipe()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (to_child, from_child)]
        for fd in (to_child, from_child):
            os.close(fd)

        def child_fds():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)
        # Its own home too: a test's HOME may be missing or read-only.
        env = dict(os.environ, HOME=self.profile, XDG_CONFIG_HOME=self.profile,
                   XDG_CACHE_HOME=self.profile)
        log = open(os.path.join(self.profile, "chromium.log"), "w")
        self.process = subprocess.Popen(args + ["about:blank"], stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=log, pass_fds=(3, 4),
                                        preexec_fn=child_fds, env=env)
        log.close()
        for fd in high:
            os.close(fd)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium exited (log: %s/chromium.log)" % self.profile)
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, timeout=30, **params):
        """Send one command; wait for its answer (events are kept)."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise BrowserError("%s: %s" % (method, answer["error"].get("message")))
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    del self.events[: i + 1]
                    return event
            self.events.append(self._read_message(deadline))

    def open(self, url):
        """Load a page and wait until it has loaded (its images too)."""
        self.events.clear()
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError("%s: %s" % (url, result["errorText"]))
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError("script failed: %s" % result["exceptionDetails"].get("text"))
        return result["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except BrowserError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.commands)
        os.close(self.answers)
        shutil.rmtree(self.profile, ignore_errors=True)


# What the page looks like to the browser, gathered in the page itself.
# The text is every text node outside code and scripts, line by line; the
# references are every link, image-map area, image, stylesheet and script.
PAGE_SCRIPT = r"""
(() => {
  const CODE = "PRE,CODE,TT,KBD,SAMP,SCRIPT,STYLE,NOSCRIPT,TEXTAREA";
  // Doxygen's code fragments, and the C declarations of its API pages.
  const DECLARATIONS = "div.fragment, div.line, .memname, .memproto, .memItemLeft, " +
                       ".memItemRight, .memTemplParams, .paramtype, .paramname";
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(CODE) || parent.closest(DECLARATIONS)) continue;
    const text = node.nodeValue;
    if (text.trim()) texts.push(text);
  }
  const refs = [];
  const add = (kind, el, url) => { if (url) refs.push({kind, url, text: el.textContent.trim().slice(0, 80)}); };
  document.querySelectorAll("a[href]").forEach(a => add("link", a, a.href));
  document.querySelectorAll("area[href]").forEach(a => add("link", a, a.href));
  document.querySelectorAll("link[href]").forEach(l => add("stylesheet", l, l.href));
  document.querySelectorAll("script[src]").forEach(s => add("script", s, s.src));
  const images = Array.from(document.images).map(i => ({url: i.src, ok: i.complete && i.naturalWidth > 0}));
  const ids = Array.from(document.querySelectorAll("[id]")).map(e => e.id)
      .concat(Array.from(document.querySelectorAll("a[name]")).map(e => e.name));
  return {title: document.title, texts, refs, images, ids};
})()
"""

# For a diff page: each in-page link's text, and the text of the code
# blocks (pre) of its target, one line a line.
DIFF_SCRIPT = r"""
(() => Array.from(document.querySelectorAll('a[href^="#"]')).map(a => {
  const target = document.getElementById(decodeURIComponent(a.getAttribute("href").slice(1)));
  if (!target) return {text: a.textContent.trim(), target: null};
  const blocks = target.matches("pre") ? [target] : Array.from(target.querySelectorAll("pre"));
  return {text: a.textContent.trim(), target: blocks.map(p => p.textContent).join("\n")};
}))()
"""

# --------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------

HTML_TAGS = (r"tt|b|i|u|s|em|strong|code|kbd|br|p|a|span|div|sup|sub|ul|ol|li|pre|"
             r"h[1-6]|table|tr|td|th|img|small|mark|details|summary|blockquote|hr")
LITERAL_MARKUP = [
    ("Markdown bold or emphasis", re.compile(r"\*\*|(?<![\w*])\*[^\s*][^*\n]*\*(?![\w*])")),
    ("a Markdown code span (backquote)", re.compile(r"`")),
    ("an HTML tag as text", re.compile(r"</?(?:%s)\b[^<>]*>" % HTML_TAGS, re.I)),
    ("an HTML entity as text", re.compile(r"&(?:[a-z]+|#\d+|#x[0-9a-f]+);", re.I)),
    ("a Markdown link or image", re.compile(r"!?\[[^\]\n]+\]\([^)\s]+\)")),
    ("a Markdown heading", re.compile(r"(?m)^\s*#{1,6} \S")),
    ("a Doxygen command", re.compile(
        r"(?<![\w\\])[\\@](?:ref|c|p|a|e|b|em|code|endcode|verbatim|endverbatim|"
        r"htmlinclude|verbinclude|dotfile|brief|param|return|returns|retval|"
        r"tableofcontents|page|section|subsection)\b")),
    ("a table of contents marker", re.compile(r"\[TOC\]")),
]


def literal_markup(texts):
    """(what, snippet) for each piece of markup found in the rendered text."""
    found = []
    for text in texts:
        for what, pattern in LITERAL_MARKUP:
            for match in pattern.finditer(text):
                start = max(0, match.start() - 30)
                found.append((what, " ".join(text[start:match.end() + 30].split())))
    return found


def file_url(path):
    return urllib.parse.urljoin("file:", urllib.request.pathname2url(os.path.abspath(path)))


def url_path(url):
    """A file: URL's path and fragment (fragment "" if none)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.request.url2pathname(parts.path), urllib.parse.unquote(parts.fragment)


def site_pages(site):
    """Every HTML page of the site, except the generated inputs (pages/)."""
    pages = []
    for directory, subdirs, files in os.walk(site):
        subdirs[:] = sorted(d for d in subdirs if d != "pages")
        pages.extend(os.path.join(directory, f) for f in sorted(files) if f.endswith(".html"))
    return pages


# A chapter's lab/ (its lab's scope, the exercises' checks and answers, the
# instructors' notes): not the chapter's code, left out of its diff page.
LAB_DIRECTORY = "lab"
# The instructors' notes of a chapter's lab, and the page Doxygen makes of
# them (a Markdown page without a label is named after its path).
INSTRUCTORS_MD = os.path.join(LAB_DIRECTORY, "instructors.md")
INSTRUCTORS_PAGE = "md_lab_instructors.html"
# A chapter with a trace (its source) shows its timeline (the picture's
# name in the chapter's html/: docs/build_docs.sh puts it there).
TRACE_SOURCE = "trace.c"
TIMELINE = "timeline.svg"


def visible_files(top):
    """The files under top that a diff shows (hidden ones left out, and the
    chapter's lab/)."""
    found = []
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".")
                            and not (directory == top and d == LAB_DIRECTORY))
        for name in sorted(files):
            if not name.startswith("."):
                found.append(os.path.relpath(os.path.join(directory, name), top))
    return found


def new_files(sources, prev, chapter):
    old = set(visible_files(os.path.join(sources, prev))) if prev else set()
    return [f for f in visible_files(os.path.join(sources, chapter)) if f not in old]


class Report:
    def __init__(self, site):
        self.site = site
        self.failures = []

    def fail(self, page, message):
        self.failures.append("%s: %s" % (os.path.relpath(page, self.site), message))


def check_site(browser, site, sources, chapters, shots, report):
    site = os.path.abspath(site)
    index = os.path.join(site, "index.html")
    seen = {}                     # page path -> what the browser saw
    external = 0
    for page in site_pages(site):
        browser.open(file_url(page))
        seen[os.path.realpath(page)] = view = browser.evaluate(PAGE_SCRIPT)
        for what, snippet in literal_markup(view["texts"]):
            report.fail(page, "literal markup (%s) in the text: ...%s..." % (what, snippet))
        for image in view["images"]:
            if not image["ok"]:
                report.fail(page, "broken image %s" % image["url"])

    # Links, once every page's ids are known.
    for page, view in seen.items():
        for ref in view["refs"]:
            scheme = urllib.parse.urlsplit(ref["url"]).scheme
            if scheme in ("http", "https", "mailto"):
                external += 1
                continue
            if scheme == "javascript":
                continue
            if scheme != "file":
                report.fail(page, "%s to an unexpected address %s" % (ref["kind"], ref["url"]))
                continue
            path, fragment = url_path(ref["url"])
            if os.path.isdir(path):
                path = os.path.join(path, "index.html")
            if not os.path.exists(path):
                report.fail(page, "broken %s %s (%r): no such file"
                            % (ref["kind"], os.path.relpath(path, site), ref["text"]))
                continue
            target = seen.get(os.path.realpath(path))
            if fragment and target is not None and fragment not in target["ids"]:
                report.fail(page, "broken link %s#%s (%r): no such anchor"
                            % (os.path.relpath(path, site), fragment, ref["text"]))

    # The way around: the index and the neighbours from every chapter page.
    def links_to(view, path):
        want = os.path.realpath(path)
        return any(url_path(r["url"])[0] and os.path.realpath(url_path(r["url"])[0]) == want
                   for r in view["refs"] if r["kind"] == "link"
                   and urllib.parse.urlsplit(r["url"]).scheme == "file")

    def lesson(chapter):
        return os.path.join(site, chapter, "html", "index.html")

    for i, chapter in enumerate(chapters):
        html_dir = os.path.realpath(os.path.join(site, chapter, "html"))
        needed = [("the course index", index)]
        if i > 0:
            needed.append(("the previous chapter", lesson(chapters[i - 1])))
        if i + 1 < len(chapters):
            needed.append(("the next chapter", lesson(chapters[i + 1])))
        pages = [p for p in seen if os.path.dirname(p) == html_dir]
        if not pages:
            report.fail(os.path.join(site, chapter), "no pages: the chapter was not built")
        for page in pages:
            for what, path in needed:
                if not links_to(seen[page], path):
                    report.fail(page, "no link to %s (%s)" % (what, os.path.relpath(path, site)))
    if os.path.realpath(index) not in seen:
        report.fail(index, "no landing page")
    else:
        for chapter in chapters:
            if not links_to(seen[os.path.realpath(index)], lesson(chapter)):
                report.fail(index, "no link to the lesson of %s" % chapter)

    # The instructors' pages: one per chapter with a lab, each linked from
    # the landing page, none from a lesson.
    instructors = {}              # chapter -> its instructors' page
    for chapter in chapters:
        if not os.path.isdir(os.path.join(sources, chapter, LAB_DIRECTORY)):
            continue
        page = os.path.join(site, chapter, "html", INSTRUCTORS_PAGE)
        if not os.path.exists(os.path.join(sources, chapter, INSTRUCTORS_MD)):
            report.fail(os.path.join(site, chapter), "the chapter has a lab but no %s"
                        % INSTRUCTORS_MD)
            continue
        if os.path.realpath(page) not in seen:
            report.fail(page, "no instructors' page: %s/%s was not built"
                        % (chapter, INSTRUCTORS_MD))
            continue
        instructors[chapter] = page
        if os.path.realpath(index) in seen and \
                not links_to(seen[os.path.realpath(index)], page):
            report.fail(index, "no link to the instructors' page of %s (%s)"
                        % (chapter, os.path.relpath(page, site)))
        for other in chapters:
            view = seen.get(os.path.realpath(lesson(other)))
            if view is not None and links_to(view, page):
                report.fail(lesson(other), "the lesson links to the instructors' page "
                            "of %s (%s): only the landing page may"
                            % (chapter, os.path.relpath(page, site)))

    # Each chapter with a trace shows a timeline in its lesson.
    for chapter in chapters:
        if not os.path.exists(os.path.join(sources, chapter, TRACE_SOURCE)):
            continue
        view = seen.get(os.path.realpath(lesson(chapter)))
        if view is None:
            continue  # no lesson: failed above
        shown = [i for i in view["images"]
                 if urllib.parse.urlsplit(i["url"]).path.endswith("/" + TIMELINE)]
        if not shown:
            report.fail(lesson(chapter), "no timeline: the lesson shows no %s" % TIMELINE)
        elif not all(i["ok"] for i in shown):
            report.fail(lesson(chapter), "the timeline %s does not render" % TIMELINE)

    # Each diff page shows each new file, whole.
    for i, chapter in enumerate(chapters):
        page = os.path.join(site, chapter, "html", "changes.html")
        if not os.path.exists(page):
            report.fail(page, "no diff page")
            continue
        browser.open(file_url(page))
        links = browser.evaluate(DIFF_SCRIPT)
        for text in sorted(set(l["text"] for l in links
                               if l["text"].startswith(LAB_DIRECTORY + "/"))):
            report.fail(page, "the lab's file %s is listed as a change of the chapter"
                        % text)
        prev = chapters[i - 1] if i else None
        first_new = None
        for path in new_files(sources, prev, chapter):
            targets = [l["target"] for l in links if l["text"] == path]
            if not targets:
                report.fail(page, "the new file %s is not in the list of files" % path)
                continue
            shown = targets[0]
            if shown is None:
                report.fail(page, "the link to the new file %s leads nowhere" % path)
                continue
            with open(os.path.join(sources, chapter, path), "rb") as f:
                data = f.read()
            if b"\0" in data:
                continue                    # binary: named, not shown
            added = set(line.rstrip() for line in shown.split("\n") if line.startswith("+"))
            missing = [line for line in data.decode("utf-8", "replace").split("\n")
                       if line.strip() and "+" + line.rstrip() not in added]
            if missing:
                report.fail(page, "the new file %s is not shown whole: %d lines missing, "
                            "the first: %r" % (path, len(missing), missing[0][:60]))
            elif first_new is None:
                first_new = path
        if shots:
            number = chapter[:4]
            browser.screenshot(os.path.join(shots, "%s_diff.png" % number))
            if first_new:
                # Scrolled to the first new file's section, to see it shown whole.
                browser.evaluate(
                    "(() => { const a = Array.from(document.querySelectorAll('a[href^=\"#\"]'))"
                    ".find(a => a.textContent.trim() === %s);"
                    " document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)))"
                    ".scrollIntoView(); })()" % json.dumps(first_new))
                browser.screenshot(os.path.join(shots, "%s_diff_new_file.png" % number))
            browser.open(file_url(lesson(chapter)))
            browser.screenshot(os.path.join(shots, "%s_lesson.png" % number))

    # The course search finds a lesson's heading (the first chapter's first
    # section), in another chapter than the page it is asked from.
    search = os.path.join(site, "search_course.html")
    if os.path.exists(search):
        browser.open(file_url(search) + "?q=" + urllib.parse.quote("code walk"))
        hits = browser.evaluate("document.querySelectorAll('#course-results li a').length")
        if not hits:
            report.fail(search, "searching for 'code walk' finds nothing")
        if shots:
            browser.screenshot(os.path.join(shots, "search.png"))
    if shots:
        for chapter, page in instructors.items():
            browser.open(file_url(page))
            browser.screenshot(os.path.join(shots, "%s_instructors.png" % chapter[:4]))
    if shots and os.path.exists(index):
        browser.open(file_url(index))
        browser.screenshot(os.path.join(shots, "index.png"))
    return len(seen), external


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", required=True)
    parser.add_argument("--sources", required=True)
    parser.add_argument("--shots")
    parser.add_argument("chapters", nargs="+")
    args = parser.parse_args(argv)
    if args.shots:
        os.makedirs(args.shots, exist_ok=True)
    report = Report(os.path.abspath(args.site))
    start = time.monotonic()
    try:
        browser = Browser()
    except (BrowserError, OSError) as error:
        print("browser_check: cannot run Chromium: %s" % error, file=sys.stderr)
        return 2
    try:
        pages, external = check_site(browser, args.site, args.sources, args.chapters,
                                     args.shots, report)
    except BrowserError as error:
        print("browser_check: %s" % error, file=sys.stderr)
        return 2
    finally:
        browser.close()
    for failure in report.failures:
        print("FAIL %s" % failure)
    print("browser_check: %d pages opened in %.1f s, %d links out of the site not followed, "
          "%d failures" % (pages, time.monotonic() - start, external, len(report.failures)))
    if args.shots:
        print("browser_check: screenshots in %s: %s"
              % (args.shots, " ".join(sorted(os.listdir(args.shots)))))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
