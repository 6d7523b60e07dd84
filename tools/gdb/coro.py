"""coro.py — gdb commands that look inside the course's coroutines.

    (gdb) source tools/gdb/coro.py
    (gdb) info coroutines     every coroutine of the process, and where
                              each suspended one is suspended
    (gdb) coro bt N           the backtrace of coroutine N of that list
    (gdb) coro bt EXPR        the backtrace of the coroutine EXPR gives

EXPR is any expression gdb can evaluate to a `coro *` (or a `struct coro`)
in the selected frame: a variable (`coro bt ping`), a field
(`coro bt s->current`), an address (`coro bt (coro *)0x4052a0`). A plain
number is a line of `info coroutines`.

Where `info coroutines` finds them: every coroutine stack is on a list
from the moment it is made until it is freed (coro.c, `registry`). The
list is newest first; the command numbers it oldest first, so the numbers
stay the same from one command to the next while no stack is made or
freed. A finished coroutine whose stack a scheduler keeps for reuse is
counted, not listed. For each suspended coroutine, "where" is the first
frame of its stack outside the library's own files (the function that
yielded, parked or slept), found by the walk below.

Why a command of its own: gdb's `bt` walks the stack the thread is on.
A suspended coroutine is not on it: its stack is a block of memory of its
own, and the registers it needs to go on (its stack pointer, its frame
pointer, where it will return to) were saved by its last switch, in its
`ctx`. This command reads them from there and walks that stack.

Where the registers are:
  - the assembly back-end: ctx.sp points at the frame the switch saved
    (the pictures at the top of switch_x86_64.S and switch_aarch64.S).
    On x86-64 the return address into the code that called the switch is
    at sp + 56 and the caller's rbp at sp + 48; on AArch64, x30 (the
    return address) at sp + 88 and x29 (the frame pointer) at sp + 80;
  - the ucontext back-end (context_ucontext.c): swapcontext() saved every
    register in ctx.uc.uc_mcontext: on x86-64 gregs[REG_RIP] is where the
    call of swapcontext() returns and gregs[REG_RBP] its caller's frame
    pointer; on AArch64, regs[30] and regs[29].
From there the walk follows the frame-pointer chain: each frame pointer
points at the caller's saved frame pointer, with the return address just
above it, on both machines (the course builds with
-fno-omit-frame-pointer, as Bazel does). It stops
at the coroutine's first frame (coro_context_start, or context_start on
the ucontext back-end: coroutine_main's caller), at a frame pointer outside the coroutine's stack, or after 64
frames. Each return address is looked up one byte before itself, in the
call instruction, for its line; functions inlined there are named too.

It works the same on a live process and on a core file (gcore), since it
only reads memory. It needs the debug information of the library (build
with -c dbg, or -g), for `struct coro`.
"""

import os
import struct

import gdb

MAX_FRAMES = 64
# glibc's <sys/ucontext.h>, x86-64: indices into mcontext_t.gregs.
REG_RBP, REG_RSP, REG_RIP = 10, 15, 16
# A coroutine's first frame: the assembly back-end's entry, or the
# ucontext back-end's (context_ucontext.c; makecontext's own trampoline,
# glibc's __start_context, is below it).
FIRST_FRAMES = ("coro_context_start", "context_start", "__start_context")


class CoroError(gdb.GdbError):
    pass


def read_u64(address):
    data = gdb.selected_inferior().read_memory(address, 8)
    return struct.unpack("<Q", bytes(data))[0]


def as_coro(value):
    """A `struct coro` gdb.Value from a pointer to one, or one itself."""
    code = value.type.strip_typedefs().code
    if code == gdb.TYPE_CODE_PTR:
        if int(value) == 0:
            raise CoroError("coro: the expression is a NULL pointer")
        value = value.dereference()
    target = value.type.strip_typedefs()
    if target.code != gdb.TYPE_CODE_STRUCT or target.tag != "coro":
        raise CoroError("coro: %s is not a struct coro or a pointer to one"
                        % value.type)
    names = {f.name for f in target.fields()}
    if "ctx" not in names:
        raise CoroError("coro: struct coro has no `ctx`: is this the "
                        "course's library, built with debug information?")
    return value


def field_names(value):
    return {f.name for f in value.type.strip_typedefs().fields()}


def saved_registers(c):
    """(pc, frame pointer, sp, back-end) the coroutine's last switch
    saved. pc is the return address into the code that called the switch.
    """
    arch = gdb.selected_inferior().architecture().name()
    if "x86-64" in arch:
        offsets = X86_64
    elif "aarch64" in arch:
        offsets = AARCH64
    else:
        raise CoroError("coro bt: x86-64 and AArch64 only (this is %s)" % arch)
    ctx = c["ctx"]
    names = field_names(ctx)
    if "sp" in names:
        sp = int(ctx["sp"])
        return (read_u64(sp + offsets["return"]), read_u64(sp + offsets["fp"]),
                sp + offsets["size"], "asm")
    if "uc" in names:
        mcontext = ctx["uc"]["uc_mcontext"]
        return offsets["ucontext"](mcontext) + ("ucontext",)
    raise CoroError("coro bt: struct coro_context has neither `sp` nor `uc`")


def member(value, name):
    """value.name, or value.__name: glibc names mcontext_t's fields
    without the underscores only with _GNU_SOURCE or _DEFAULT_SOURCE, and
    the course compiles strict C11."""
    return value[name if name in field_names(value) else "__" + name]


def x86_64_ucontext(mcontext):
    gregs = member(mcontext, "gregs")
    return int(gregs[REG_RIP]), int(gregs[REG_RBP]), int(gregs[REG_RSP])


def aarch64_ucontext(mcontext):
    # What glibc's swapcontext() saved: x30 (regs[30], equal to its pc
    # slot) points inside swapcontext itself, and x29 is its caller's
    # frame pointer. So the walk shows swapcontext, then the function
    # that called coro_context_switch(): the wrapper's own frame, whose
    # return address swapcontext kept only in a register, is not seen
    # (checked under qemu-aarch64 with gdb-multiarch).
    regs = member(mcontext, "regs")
    return int(regs[30]), int(regs[29]), int(member(mcontext, "sp"))


# The frame each switch_*.S saves at ctx.sp (the pictures at the top of
# those files): where the return address and the caller's frame pointer
# are, and the frame's size.
X86_64 = {"return": 56, "fp": 48, "size": 64, "ucontext": x86_64_ucontext}
AARCH64 = {"return": 88, "fp": 80, "size": 160, "ucontext": aarch64_ucontext}


def stack_bounds(c):
    names = field_names(c)
    if "stack_lo" in names and "stack_size" in names:
        low = int(c["stack_lo"])
        return low, low + int(c["stack_size"])
    return None


def describe_pc(pc):
    """(function, "file:line", inlined-into list) for a return address."""
    look = pc - 1
    names = []
    try:
        block = gdb.block_for_pc(look)
    except RuntimeError:
        block = None
    while block is not None:
        if block.function is not None:
            names.append(block.function.print_name)
        block = block.superblock
    if not names:
        symbol = gdb.execute("info symbol 0x%x" % look, to_string=True)
        if symbol.startswith("No symbol"):
            names = ["??"]
        else:
            names = [symbol.split(" in section")[0].split(" + ")[0].strip()]
    line = gdb.find_pc_line(look)
    where = ""
    if line.symtab is not None:
        where = "%s:%d" % (line.symtab.filename, line.line)
    return names[0], where, names[1:]


def state_name(c):
    try:
        return str(c["state"])
    except gdb.error:
        return "?"


def walk(c):
    """The frames of a suspended coroutine: [(pc, function, where,
    inlined-into)], innermost first."""
    pc, rbp, _, _ = saved_registers(c)
    bounds = stack_bounds(c)
    frames = []
    while pc != 0 and len(frames) < MAX_FRAMES:
        function, where, outer = describe_pc(pc)
        frames.append((pc, function, where, outer))
        if function in FIRST_FRAMES or rbp == 0:
            break
        if bounds is not None and not bounds[0] <= rbp < bounds[1]:
            break
        pc, rbp = read_u64(rbp + 8), read_u64(rbp)
    return frames


# ── The registry: every coroutine of the process ─────────────────────────


def registry():
    """coro.c's `registry` (a struct with `newest` and `stacks`)."""
    try:
        symbols = gdb.lookup_static_symbols("registry")
    except AttributeError:  # gdb before 10
        symbol = gdb.lookup_static_symbol("registry")
        symbols = [symbol] if symbol is not None else []
    for symbol in symbols:
        value = symbol.value()
        if {"newest", "stacks"} <= field_names(value):
            return value, symbol.symtab.filename
    raise CoroError("info coroutines: no coroutine registry in this program "
                    "(is it the course's library, built with -g?)")


def stacks():
    """Every struct coro on the registry, oldest first."""
    value, _ = registry()
    found = []
    c = value["newest"]
    while int(c) != 0 and len(found) <= int(value["stacks"]):
        found.append(c.dereference())
        c = c.dereference()["registry_next"]
    found.reverse()
    return found


def listed():
    """(the coroutines `info coroutines` lists, oldest first; how many
    finished ones a scheduler keeps for reuse)."""
    shown, kept = [], 0
    for c in stacks():
        names = field_names(c)
        done = state_name(c) == "CORO_DONE"
        if done and "detached" in names and bool(c["detached"]):
            kept += 1  # a go coroutine's stack, back in the cache
        else:
            shown.append(c)
    return shown, kept


def enum_name(value, prefix):
    text = str(value)
    return text[len(prefix):].lower() if text.startswith(prefix) else text


def describe_state(c):
    """What a person calls its state: running, ready, parked, sleeping..."""
    names = field_names(c)
    state = state_name(c)
    if state == "CORO_SUSPENDED":
        if "started" in names and not bool(c["started"]):
            return "not started"
        if "queued" in names and bool(c["queued"]):
            return "ready"
        if "waiting" in names:
            waiting = enum_name(c["waiting"], "CORO_WAIT_")
            return {"park": "parked", "sleep": "sleeping",
                    "event": "awaiting an event"}.get(waiting, "suspended")
        return "suspended"
    return enum_name(state, "CORO_")


def coroutine_name(c):
    """Its coro_set_name() name, "" if none (or no such field: Chapter 1)."""
    if "name" not in field_names(c):
        return ""
    try:
        return c["name"].string(length=-1).split("\0")[0]
    except gdb.error:
        return ""


def function_name(pointer):
    """`player` for a function pointer gdb prints as 0x... <player>."""
    text = str(pointer)
    if "<" in text and text.endswith(">"):
        return text[text.index("<") + 1:-1]
    return text


def where_suspended(c, library):
    """function (file:line) of the first frame outside the library."""
    try:
        frames = walk(c)
    except (gdb.error, gdb.MemoryError, CoroError) as error:
        return "(%s)" % error
    for pc, function, where, outer in frames:
        if where and os.path.dirname(where) != library:
            return "%s (%s)" % (function, where)
    if frames:
        return "%s (%s)" % (frames[0][1], frames[0][2])
    return ""


def owner_threads():
    """{a thread's identity (the address of coro.c's this_thread in it):
    its gdb thread number}."""
    owners = {}
    inferior = gdb.selected_inferior()
    selected = gdb.selected_thread()
    try:
        frame = gdb.selected_frame()
    except gdb.error:
        frame = None
    try:
        for thread in inferior.threads():
            thread.switch()
            try:
                owners[int(gdb.parse_and_eval("&this_thread"))] = thread.num
            except gdb.error:
                pass
    finally:
        if selected is not None:
            selected.switch()
        if frame is not None:
            frame.select()
    return owners


class InfoCoroutines(gdb.Command):
    """List every coroutine of the process: info coroutines.

For each: its number (for coro bt N), address, state, scheduler, the gdb
thread that owns it, and, for a suspended one, the function it is
suspended in. The running coroutine of the selected thread is marked *."""

    def __init__(self):
        super().__init__("info coroutines", gdb.COMMAND_STATUS)

    def invoke(self, argument, from_tty):
        value, library_file = registry()
        library = os.path.dirname(library_file)
        # Chapter 1 has no schedulers, and no column for them.
        coro_type = value["newest"].type.target().strip_typedefs()
        with_sched = "sched" in {f.name for f in coro_type.fields()}
        shown, kept = listed()
        owners = owner_threads()
        # The names given with coro_set_name() (Chapter 2 on): a column
        # when any coroutine listed has one.
        names = [coroutine_name(c) for c in shown]
        with_names = any(names)
        rows = [("", "#", "coroutine") + (("name",) if with_names else ())
                + ("function", "state")
                + (("scheduler",) if with_sched else ()) + ("thread", "where")]
        for number, c in enumerate(shown, 1):
            state = describe_state(c)
            sched = ()
            if with_sched:
                sched = ("0x%x" % int(c["sched"]) if int(c["sched"]) != 0
                         else "-",)
            owner = owners.get(int(c["owner"]), "?")
            where = ""
            if state not in ("running", "not started", "done"):
                where = where_suspended(c, library)
            mark = "*" if state == "running" and owner == getattr(
                gdb.selected_thread(), "num", None) else ""
            name = ((names[number - 1] or "-",) if with_names else ())
            rows.append((mark, str(number), "0x%x" % int(c.address)) + name
                        + (function_name(c["fn"]), state) + sched
                        + (str(owner), where))
        columns = len(rows[0]) - 1  # the last one, "where", is not padded
        widths = [max(len(row[i]) for row in rows) for i in range(columns)]
        widths[0] = 1
        for row in rows:
            text = " ".join(cell.ljust(width)
                            for cell, width in zip(row, widths))
            gdb.write((text + " " + row[-1]).rstrip() + "\n")
        gdb.write("%d coroutine%s" % (len(shown), "" if len(shown) == 1
                                         else "s"))
        if kept:
            gdb.write("; %d finished stack%s kept for reuse"
                      % (kept, "" if kept == 1 else "s"))
        gdb.write("\n")


def coroutine_argument(argument):
    """The struct coro an argument of coro bt names: N of info coroutines,
    or an expression."""
    text = argument.strip()
    if text.isdigit():
        shown, _ = listed()
        number = int(text)
        if not 1 <= number <= len(shown):
            raise CoroError("coro bt: no coroutine %d (info coroutines lists "
                            "%d)" % (number, len(shown)))
        return shown[number - 1]
    return as_coro(gdb.parse_and_eval(text))


class CoroPrefix(gdb.Command):
    """Commands for the course's coroutines: coro bt N or EXPR (and info
coroutines)."""

    def __init__(self):
        super().__init__("coro", gdb.COMMAND_STACK, prefix=True)


class CoroBacktrace(gdb.Command):
    """Backtrace of a suspended coroutine: coro bt N, or coro bt EXPR.

N is a number of info coroutines; EXPR evaluates to a coro * (or a struct
coro) in the selected frame. The
registers come from the coroutine's saved context (its last switch), and
the walk follows the frame pointers on the coroutine's own stack."""

    def __init__(self):
        super().__init__("coro bt", gdb.COMMAND_STACK)

    def invoke(self, argument, from_tty):
        if not argument.strip():
            raise CoroError("usage: coro bt N (of info coroutines) or "
                            "coro bt EXPR (a coro *)")
        c = coroutine_argument(argument)
        address = int(c.address) if c.address is not None else 0
        state = state_name(c)
        header = "coroutine 0x%x, %s, fn %s" % (address, state, c["fn"])
        if "started" in field_names(c) and not bool(c["started"]):
            gdb.write("%s: not started yet, no frames\n" % header)
            return
        if state not in ("CORO_SUSPENDED", "CORO_NORMAL"):
            hint = {"CORO_RUNNING": " (it is running: use bt in its thread)",
                    "CORO_DONE": " (it has finished)"}.get(state, "")
            gdb.write("%s: no saved frames%s\n" % (header, hint))
            return
        pc, rbp, rsp, backend = saved_registers(c)
        gdb.write("%s\n  saved by its last switch (%s back-end): pc 0x%x, "
                  "sp 0x%x, rbp 0x%x\n" % (header, backend, pc, rsp, rbp))
        for number, (pc, function, where, outer) in enumerate(walk(c)):
            text = "#%-2d 0x%016x in %s" % (number, pc, function)
            if outer:
                text += " (inlined into %s)" % ", ".join(outer)
            if where:
                text += " at %s" % where
            gdb.write(text + "\n")


CoroPrefix()
CoroBacktrace()
InfoCoroutines()
