// trace_events.h — reading a trace back, for the suites that test the
// events of Chapters 3 to 5 (timers.TraceWaits, threads.TraceThreads,
// shutdown.TraceShutdown).
//
// A test records into a file of its own (TraceFile: a unique path under
// TEST_TMPDIR; the trace is stopped when the TraceFile goes, also when an
// assertion returns early, so that one failure does not make the next
// test's start EBUSY), reads it back (ReadTrace: a strict JSON reader,
// and the shape of the file checked), and compares what it says with what
// the program did, as one line (Summary), like the suites' logs:
//
//   "spawn#1 park#1 A#1:parked wake~1>#1 f~1 A#1:finished"
//
// read in the file's order (within a lane, the order things were
// recorded: a slice is recorded when it ends, after what happened inside
// it). The items:
//
//   go#1, spawn#1          a coroutine was created (coro_go, coro_spawn)
//   A#1:parked             a resume of coroutine #1, named A ("coro#1" if
//                          unnamed), and how it left: yielded, parked,
//                          finished
//   sleep#1, park#1,       coroutine #1 starts to wait (its deadline is
//   await#1                checked apart, with Deadline())
//   timer#1                its timer fired
//   wake~1>#1              arrow ~1 starts: coroutine #1 was made ready
//                          here (a wake, a set, a timer, a cancel)
//   go~1:sent, post~1:sent,
//   wake~1:sent            arrow ~1 starts on another thread's lane: a go,
//                          post or wake sent to a scheduler it does not own
//   f~1                    arrow ~1 ends: at the start of the slice after
//                          it (a resume's, or a post's)
//   post~1:ran             the slice of the run of the post of arrow ~1
//   taken-in               the owner's pump took a wake in
//   cancel, cancel(#1),    Chapter 5's marks: a cancel (with the coroutine
//   close,                 when its owner cancelled it), a close, a close
//   close-taken-in,        taken in (with the signal that sent it, if
//   close-taken-in(signal 10),  one did), the drain, each abandon, and the
//   drain, abandon(#1),    drain's end with how many were abandoned
//   drained(1)
//
// Coroutines (#) and arrows (~) are numbered 1, 2... in the order the
// whole file first names them, so a line does not depend on the
// process-wide ids, and one lane's line (Summary(t, tid)) numbers them as
// the whole file does. Anything else reads "ph:cat:name": an event no
// test expects.
//
// ArrowProblems() checks every arrow's two ends: a start and an end with
// the same id and category, the end on the slice that starts at its time.
//
// (tests/scheduler_test.cc, Chapter 2's group scheduler.Trace, has its own
// reader of the same kind, for the events of Chapter 2.)
#ifndef CORO_TESTS_TRACE_EVENTS_H
#define CORO_TESTS_TRACE_EVENTS_H

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coro.h"

namespace coro_trace_test {

// A JSON value: just what a trace holds.
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = kNull;
  double number = 0;                                 // kNumber (kBool: 0 or 1)
  std::string text;                                  // kString
  std::vector<Json> items;                           // kArray
  std::vector<std::pair<std::string, Json>> fields;  // kObject, in order

  // The field `key` of an object, or nullptr.
  const Json* Get(const std::string& key) const {
    for (const auto& [name, value] : fields)
      if (name == key) return &value;
    return nullptr;
  }
  // The string field `key`, or "" if there is none.
  std::string Text(const std::string& key) const {
    const Json* v = Get(key);
    return v != nullptr && v->kind == kString ? v->text : "";
  }
  // The number field `key`, or -1 if there is none.
  double Number(const std::string& key) const {
    const Json* v = Get(key);
    return v != nullptr && v->kind == kNumber ? v->number : -1;
  }
  // Whether args.`key` is there at all.
  bool HasArg(const std::string& key) const {
    const Json* args = Get("args");
    return args != nullptr && args->Get(key) != nullptr;
  }
  // args.`key` (a number), or -1.
  double Arg(const std::string& key) const {
    const Json* args = Get("args");
    return args != nullptr ? args->Number(key) : -1;
  }
  // args.`key` (a string), or "".
  std::string ArgText(const std::string& key) const {
    const Json* args = Get("args");
    return args != nullptr ? args->Text(key) : "";
  }
};

// A strict reader of RFC 8259 JSON (what Perfetto's importer reads):
// Parse() returns false, and says where, unless `text` is exactly one
// value with nothing but whitespace around it.
class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}

  bool Parse(Json* out, std::string* error) {
    if (Value(out, 0)) {
      Space();
      if (at_ == s_.size()) return true;
      Fail("text after the document");
    }
    *error = error_ + " at byte " + std::to_string(at_);
    return false;
  }

 private:
  bool Fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  void Space() {
    while (at_ < s_.size() && std::strchr(" \t\r\n", s_[at_]) != nullptr) ++at_;
  }
  bool Eat(char c) {
    Space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool Word(const char* word) {
    const std::size_t n = std::strlen(word);
    if (s_.compare(at_, n, word) != 0) return Fail("not a value");
    at_ += n;
    return true;
  }
  bool Value(Json* v, int depth) {
    if (depth > 32) return Fail("nested too deep");
    Space();
    if (at_ >= s_.size()) return Fail("the text ends in a value");
    const char c = s_[at_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = Json::kString;
      return String(&v->text);
    }
    if (c == 't' || c == 'f') {
      v->kind = Json::kBool;
      v->number = c == 't';
      return Word(c == 't' ? "true" : "false");
    }
    if (c == 'n') return Word("null");
    return Number(v);
  }
  bool Object(Json* v, int depth) {
    v->kind = Json::kObject;
    ++at_;  // '{'
    if (Eat('}')) return true;
    do {
      std::string key;
      Space();
      if (at_ >= s_.size() || s_[at_] != '"')
        return Fail("a key is not a string");
      if (!String(&key)) return false;
      if (!Eat(':')) return Fail("no ':' after a key");
      v->fields.emplace_back(key, Json{});
      if (!Value(&v->fields.back().second, depth + 1)) return false;
    } while (Eat(','));
    return Eat('}') || Fail("an object does not end with '}'");
  }
  bool Array(Json* v, int depth) {
    v->kind = Json::kArray;
    ++at_;  // '['
    if (Eat(']')) return true;
    do {
      v->items.emplace_back();
      if (!Value(&v->items.back(), depth + 1)) return false;
    } while (Eat(','));
    return Eat(']') || Fail("an array does not end with ']'");
  }
  bool String(std::string* out) {
    ++at_;  // '"'
    while (at_ < s_.size() && s_[at_] != '"') {
      const unsigned char c = static_cast<unsigned char>(s_[at_++]);
      if (c < 0x20) return Fail("a control character in a string");
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (at_ >= s_.size()) break;
      const char e = s_[at_++];
      const char* plain = std::strchr("\"\\/bfnrt", e);
      if (e != '\0' && plain != nullptr) {
        *out += "\"\\/\b\f\n\r\t"[plain - "\"\\/bfnrt"];
      } else if (e == 'u' && at_ + 4 <= s_.size() &&
                 std::all_of(s_.begin() + at_, s_.begin() + at_ + 4,
                             [](char h) { return std::isxdigit(h) != 0; })) {
        *out += '?';  // (a trace's names are ASCII)
        at_ += 4;
      } else {
        return Fail("a bad escape in a string");
      }
    }
    if (at_ >= s_.size()) return Fail("a string does not end");
    ++at_;  // '"'
    return true;
  }
  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
  bool Number(Json* v) {
    const std::size_t start = at_;
    auto digits = [&] {
      const std::size_t from = at_;
      while (at_ < s_.size() &&
             std::isdigit(static_cast<unsigned char>(s_[at_])))
        ++at_;
      return at_ - from;
    };
    if (at_ < s_.size() && s_[at_] == '-') ++at_;
    const std::size_t first = at_;
    const std::size_t whole = digits();
    if (whole == 0 || (whole > 1 && s_[first] == '0'))
      return Fail("not a value");
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      if (digits() == 0) return Fail("no digit after a decimal point");
    }
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (digits() == 0) return Fail("no digit in an exponent");
    }
    v->kind = Json::kNumber;
    v->number = std::strtod(s_.substr(start, at_ - start).c_str(), nullptr);
    return true;
  }

  const std::string& s_;
  std::size_t at_ = 0;
  std::string error_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Nanoseconds, from a trace's microseconds with three decimals (exact: the
// file writes whole nanoseconds).
inline long long Ns(double us) { return std::llround(us * 1000); }

// The kernel's id of the calling thread: its lane.
inline long ThisThreadsLane() { return static_cast<long>(syscall(SYS_gettid)); }

// A trace file read back.
struct Trace {
  std::string problem;       // "" when the file is a complete, valid trace
  std::vector<Json> events;  // in the file's order
  double dropped = -1;       // otherData.dropped_events
  std::map<long, std::string> lanes;  // tid -> its thread_name
};

// Reads the trace in `path`, and says in `problem` how it is not a
// complete trace of this process: not one JSON document of the right
// shape, not one event per line, the process's name not first, an event
// of another process, a lane named twice or not at all, an event without
// its time, events dropped.
inline Trace ReadTrace(const std::string& path) {
  Trace t;
  const std::string text = ReadFile(path);
  const std::string head = "{\"traceEvents\":[\n";
  if (text.compare(0, head.size(), head) != 0 || text.size() < 3 ||
      text.compare(text.size() - 3, 3, "}}\n") != 0) {
    t.problem = "not a whole trace (head or tail missing): [" + text + "]";
    return t;
  }
  Json doc;
  std::string error;
  if (!JsonReader(text).Parse(&doc, &error)) {
    t.problem = "not JSON: " + error + ": [" + text + "]";
    return t;
  }
  const Json* events = doc.Get("traceEvents");
  const Json* other = doc.Get("otherData");
  if (doc.kind != Json::kObject || events == nullptr ||
      events->kind != Json::kArray || doc.Text("displayTimeUnit") != "ns" ||
      other == nullptr || other->Number("dropped_events") < 0 ||
      doc.fields.size() != 3) {
    t.problem = "not the document's shape: [" + text + "]";
    return t;
  }
  t.events = events->items;
  t.dropped = other->Number("dropped_events");
  if (t.dropped != 0) {
    t.problem = "events were dropped: " + std::to_string(t.dropped);
    return t;
  }
  if (t.events.empty()) {
    t.problem = "no events, not even the process's name";
    return t;
  }
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n';
  if (lines != t.events.size() + 2) {
    t.problem = "not one event per line: " + std::to_string(lines) +
                " lines for " + std::to_string(t.events.size()) + " events";
    return t;
  }
  const long pid = getpid();
  for (std::size_t i = 0; i < t.events.size() && t.problem.empty(); ++i) {
    const Json& e = t.events[i];
    const std::string ph = e.Text("ph"),
                      where = " (event " + std::to_string(i) + ")";
    const long tid = static_cast<long>(e.Number("tid"));
    if (e.kind != Json::kObject || e.Number("pid") != pid) {
      t.problem = "an event of another process" + where;
    } else if (i == 0) {
      if (ph != "M" || e.Text("name") != "process_name")
        t.problem = "the process's name is not the first event";
    } else if (ph == "M") {
      if (e.Text("name") != "thread_name" || t.lanes.count(tid) != 0)
        t.problem = "a lane named twice, or a stray metadata event" + where;
      t.lanes[tid] = e.ArgText("name");
    } else if (e.Number("ts") < 0 || (ph == "X" && e.Number("dur") < 0)) {
      t.problem = "an event without its times" + where;
    }
  }
  for (std::size_t i = 1; i < t.events.size() && t.problem.empty(); ++i)
    if (t.lanes.count(static_cast<long>(t.events[i].Number("tid"))) == 0)
      t.problem =
          "an event on a lane with no name (event " + std::to_string(i) + ")";
  return t;
}

// A new path under the test's temporary directory, unique to this process,
// test and call.
inline std::string TempPath(const std::string& what) {
  static int made = 0;
  const char* dir = std::getenv("TEST_TMPDIR");
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(dir != nullptr && dir[0] != '\0' ? dir : "/tmp") +
         "/coro_" + what + "_" + std::to_string(getpid()) + "_" +
         (test != nullptr ? test->name() : "none") + "_" +
         std::to_string(++made);
}

// A trace file of the test's own. The trace is stopped when this goes,
// also when an assertion returned early, so that the next test can start
// one; the file is removed unless the test failed (then its path is in
// the log, to look at).
class TraceFile {
 public:
  TraceFile() : path_(TempPath("trace") + ".json") {}
  ~TraceFile() {
    coro_trace_stop();
    if (::testing::Test::HasFailure())
      std::printf("[   INFO   ] the trace: %s\n", path_.c_str());
    else
      std::remove(path_.c_str());
  }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  // coro_trace_start() on this file; `before` and `after` (if not null)
  // get coro_now() around it: the trace's time 0 lies between them.
  int Start(uint64_t* before = nullptr, uint64_t* after = nullptr) {
    if (before != nullptr) *before = coro_now();
    const int rc = coro_trace_start(path_.c_str());
    if (after != nullptr) *after = coro_now();
    return rc;
  }
  const char* path() const { return path_.c_str(); }
  Trace Read() const { return ReadTrace(path_); }

 private:
  std::string path_;
};

#if CORO_CHAPTER >= 4
// Runs `fn` on a new thread named `name` (at most 15 characters: the
// kernel's limit), which detaches from the library at the end (Chapter
// 4's coro_thread_detach()); returns the thread's id, its lane, once the
// thread has ended.
inline long OnANamedThread(const char* name, const std::function<void()>& fn) {
  long tid = 0;
  std::thread thread([&] {
    pthread_setname_np(pthread_self(), name);
    tid = ThisThreadsLane();
    fn();
    coro_thread_detach();
  });
  thread.join();
  return tid;
}
#endif

// --- Looking events up -------------------------------------------------------

// An event's name; for an arrow sent from another thread, what was sent
// (args.sent: "go", "post" or "wake"), since a go's arrow is named after
// where it ends, "wake".
inline std::string SentOrName(const Json& e) {
  if (e.HasArg("sent")) return e.Get("args")->Text("sent");
  return e.Text("name");
}

// The events of `t` with this `ph` and `cat` (and `name`, unless empty:
// SentOrName()), in the file's order.
inline std::vector<Json> EventsOf(const Trace& t, const std::string& ph,
                                  const std::string& cat,
                                  const std::string& name = "") {
  std::vector<Json> found;
  for (const Json& e : t.events)
    if (e.Text("ph") == ph && e.Text("cat") == cat &&
        (name.empty() || SentOrName(e) == name))
      found.push_back(e);
  return found;
}

// The one event of `t` with this ph and cat (and name, unless empty), or
// a null event (ph "") if there are none or several.
inline Json TheOne(const Trace& t, const std::string& ph, const std::string& cat,
                   const std::string& name = "") {
  const std::vector<Json> found = EventsOf(t, ph, cat, name);
  return found.size() == 1 ? found[0] : Json{};
}

// The resume slices of the coroutine whose trace id is `id`, in time order.
inline std::vector<Json> ResumesOf(const Trace& t, double id) {
  std::vector<Json> found;
  for (const Json& e : EventsOf(t, "X", "resume"))
    if (e.Arg("id") == id) found.push_back(e);
  std::stable_sort(found.begin(), found.end(), [](const Json& a, const Json& b) {
    return a.Number("ts") < b.Number("ts");
  });
  return found;
}

// The trace id of the coroutine whose slices are named `name` (-1 if no
// slice has that name, -2 if two coroutines have it).
inline double IdNamed(const Trace& t, const std::string& name) {
  double id = -1;
  for (const Json& e : EventsOf(t, "X", "resume", name)) {
    if (id != -1 && e.Arg("id") != id) return -2;
    id = e.Arg("id");
  }
  return id;
}

// Whether instant `e` lies within slice `slice` (same lane, start <= its
// time <= end), in nanoseconds.
inline bool Within(const Json& e, const Json& slice) {
  const long long at = Ns(e.Number("ts")), from = Ns(slice.Number("ts"));
  return e.Number("tid") == slice.Number("tid") && from <= at &&
         at <= from + Ns(slice.Number("dur"));
}

// The slice (resume or post's run) on lane `tid` that starts at `ts` ns,
// or nullptr.
inline const Json* SliceStartingAt(const Trace& t, double tid, long long ts) {
  for (const Json& e : t.events)
    if (e.Text("ph") == "X" && e.Number("tid") == tid && Ns(e.Number("ts")) == ts)
      return &e;
  return nullptr;
}

// Whether lane `tid` has a "taken in" mark (the owner's pump took in a wake
// from another thread) at `ts` ns.
inline bool TakenInAt(const Trace& t, double tid, long long ts) {
  for (const Json& e : t.events)
    if (e.Text("ph") == "i" && e.Text("cat") == "wake" &&
        e.Text("name") == "taken in" && e.Number("tid") == tid &&
        Ns(e.Number("ts")) == ts)
      return true;
  return false;
}

// A wait mark's deadline in nanoseconds on the trace's time axis, or -1 for
// "none" (no deadline), -2 if it has neither.
inline long long Deadline(const Json& wait) {
  if (wait.ArgText("deadline") == "none") return -1;
  const double us = wait.Arg("deadline");
  return us >= 0 ? Ns(us) : -2;
}

// What is wrong with the arrows (flow events) of `t`, "" if nothing: each
// start ("s") has an id of its own; each end ("f") has "bp":"e", comes from
// a start with the same id and category at or before its time, and lies
// at the very start of a slice of its lane (the slice it points to), or,
// for a wake sent from another thread, where the owner's pump took it in
// (a "taken in" mark at the same time); no start is left without its end. (Flows are matched by id and category,
// as tools/timeline matches them.)
inline std::string ArrowProblems(const Trace& t) {
  std::map<double, const Json*> starts;
  std::map<double, int> ends;
  for (const Json& e : t.events) {
    if (e.Text("ph") != "s") continue;
    if (!starts.emplace(e.Number("id"), &e).second)
      return "two arrows start with id " + std::to_string(e.Number("id"));
  }
  for (const Json& e : t.events) {
    if (e.Text("ph") != "f") continue;
    const double id = e.Number("id");
    const std::string which = "the end of arrow " + std::to_string(id);
    auto start = starts.find(id);
    if (start == starts.end()) return which + " has no start";
    if (start->second->Text("cat") != e.Text("cat"))
      return which + " is of category " + e.Text("cat") + ", its start of " +
             start->second->Text("cat");
    // Perfetto pairs an arrow's ends by id, category and name.
    if (start->second->Text("name") != e.Text("name"))
      return which + " is named " + e.Text("name") + ", its start " +
             start->second->Text("name");
    if (e.Text("bp") != "e") return which + " is not bound to its slice";
    if (Ns(e.Number("ts")) < Ns(start->second->Number("ts")))
      return which + " comes before its start";
    if (SliceStartingAt(t, e.Number("tid"), Ns(e.Number("ts"))) == nullptr &&
        !TakenInAt(t, e.Number("tid"), Ns(e.Number("ts"))))
      return which + " is neither at the start of a slice of its lane nor "
                     "where its pump took a wake in";
    if (++ends[id] > 1) return which + " is there twice";
  }
  for (const auto& [id, start] : starts)
    if (ends.count(id) == 0)
      return "arrow " + std::to_string(id) + " (" + start->Text("name") +
             ") has no end";
  return "";
}

// --- The events as one line ----------------------------------------------------

// The events of `t` as one line (see the top of this file), those of lane
// `tid` only if it is not 0. Metadata events are left out (ReadTrace
// checks them).
inline std::string Summary(const Trace& t, long tid = 0) {
  std::map<double, int> coroutines, arrows;
  auto number = [](std::map<double, int>& seen, double id) {
    return seen.emplace(id, static_cast<int>(seen.size()) + 1).first->second;
  };
  auto coroutine = [&](double id) { return "#" + std::to_string(number(coroutines, id)); };
  auto arrow = [&](double id) { return "~" + std::to_string(number(arrows, id)); };
  auto unsigned_text = [](double n) {
    std::ostringstream text;
    text << static_cast<unsigned long long>(n);
    return text.str();
  };
  std::string line;
  for (const Json& e : t.events) {
    const std::string ph = e.Text("ph"), cat = e.Text("cat"),
                      name = e.Text("name");
    if (ph == "M") continue;
    // Numbered in the whole file's order, shown for the lane asked for.
    std::string item;
    if (ph == "i" && cat == "start") {
      item = name + coroutine(e.Arg("coroutine"));
    } else if (ph == "X" && cat == "resume") {
      const double id = e.Arg("id");
      item = (name == "coro " + unsigned_text(id) ? "coro" : name) +
             coroutine(id) + ":" + e.ArgText("left");
    } else if (ph == "i" && cat == "wait") {
      item = name + coroutine(e.Arg("coroutine"));
    } else if (ph == "i" && cat == "timer" && name == "timer") {
      item = "timer" + coroutine(e.Arg("coroutine"));
    } else if (ph == "s" && e.HasArg("across_threads")) {
      const Json* across = e.Get("args")->Get("across_threads");
      item = across->kind == Json::kBool && across->number == 1
                 ? SentOrName(e) + arrow(e.Number("id")) + ":sent"
                 : "s:" + cat + ":" + name + ":across_threads?";
    } else if (ph == "s" && cat == "wake" && name == "wake" &&
               e.HasArg("coroutine")) {
      const std::string a = arrow(e.Number("id"));
      item = "wake" + a + ">" + coroutine(e.Arg("coroutine"));
    } else if (ph == "f") {
      item = "f" + arrow(e.Number("id"));
    } else if (ph == "X" && cat == "post" && name == "post") {
      item = "post" + arrow(e.Arg("post")) + ":ran";
    } else if (ph == "i" && cat == "wake" && name == "taken in") {
      item = "taken-in";
    } else if (ph == "i" && cat == "shutdown") {
      static const std::map<std::string, std::string> marks = {
          {"cancel", "cancel"},
          {"close", "close"},
          {"close taken in", "close-taken-in"},
          {"shutdown: drain", "drain"},
          {"shutdown: drained", "drained"},
          {"abandon", "abandon"},
      };
      auto mark = marks.find(name);
      item = mark != marks.end() ? mark->second : "i:shutdown:" + name;
      if (e.HasArg("coroutine"))
        item += "(" + coroutine(e.Arg("coroutine")) + ")";
      if (e.HasArg("signal")) item += "(signal " + unsigned_text(e.Arg("signal")) + ")";
      if (e.HasArg("abandoned"))
        item += "(" + unsigned_text(e.Arg("abandoned")) + ")";
    } else {
      item = ph + ":" + cat + ":" + name;  // not an event a test expects
    }
    if (tid != 0 && e.Number("tid") != tid) continue;
    line += (line.empty() ? "" : " ") + item;
  }
  return line;
}

}  // namespace coro_trace_test

#endif  // CORO_TESTS_TRACE_EVENTS_H
