// course_search.js — the search page of the course (search_course.html).
//
// COURSE_INDEX (course_index.js, written by docs/site.py) holds one entry
// per section of every lesson, API entry and states page: its chapter (c),
// kind (k), title (t), address (u) and text (x). A result is an entry that
// holds every word of the query, in any case; titles that hold them come
// first. Everything runs in the page: no server.
(function () {
  "use strict";
  var query = new URLSearchParams(window.location.search).get("q") || "";
  var box = document.getElementById("course-query");
  var results = document.getElementById("course-results");
  box.value = query;
  var words = query.toLowerCase().split(/\s+/).filter(function (w) { return w; });
  if (!words.length) {
    results.textContent = "Type a word or two above: a function, an error, an idea.";
    return;
  }

  function escapeHtml(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  // Some text around the first word found, with every word marked.
  function snippet(text) {
    var lower = text.toLowerCase(), at = lower.indexOf(words[0]);
    var start = Math.max(0, at - 80), piece = text.substr(start, 240);
    var html = (start ? "… " : "") + escapeHtml(piece) + (start + 240 < text.length ? " …" : "");
    words.forEach(function (w) {
      var re = new RegExp("(" + w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + ")", "gi");
      html = html.replace(re, "<mark>$1</mark>");
    });
    return html;
  }

  var found = [];
  COURSE_INDEX.forEach(function (e) {
    var title = e.t.toLowerCase(), text = e.x.toLowerCase();
    var all = words.every(function (w) { return title.indexOf(w) >= 0 || text.indexOf(w) >= 0; });
    if (!all) return;
    var inTitle = words.filter(function (w) { return title.indexOf(w) >= 0; }).length;
    found.push({ e: e, score: inTitle });
  });
  found.sort(function (a, b) { return b.score - a.score; });   // stable: course order
  var shown = found.slice(0, 100);
  var out = "<p>" + found.length + " section" + (found.length === 1 ? "" : "s") +
            " of the course hold " + escapeHtml(words.join(" and ")) +
            (found.length > shown.length ? " (the first " + shown.length + " shown)" : "") + ".</p><ol>";
  shown.forEach(function (f) {
    out += '<li><a href="' + f.e.u + '">' + escapeHtml(f.e.t) + "</a> " +
           '<span class="course-where">' + escapeHtml(f.e.c) + " · " + escapeHtml(f.e.k) + "</span><br/>" +
           snippet(f.e.x || f.e.t) + "</li>";
  });
  results.innerHTML = out + "</ol>";
})();
