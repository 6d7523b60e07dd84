"""coro.py — gdb commands that look inside the course's coroutines.

    (gdb) source tools/gdb/coro.py
    (gdb) coro bt EXPR        the backtrace of a suspended coroutine

EXPR is any expression gdb can evaluate to a `coro *` (or a `struct coro`)
in the selected frame: a variable (`coro bt ping`), a field
(`coro bt s->current`), an address (`coro bt (coro *)0x4052a0`).

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


class CoroPrefix(gdb.Command):
    """Commands for the course's coroutines: coro bt EXPR."""

    def __init__(self):
        super().__init__("coro", gdb.COMMAND_STACK, prefix=True)


class CoroBacktrace(gdb.Command):
    """Backtrace of a suspended coroutine: coro bt EXPR.

EXPR evaluates to a coro * (or a struct coro) in the selected frame. The
registers come from the coroutine's saved context (its last switch), and
the walk follows the frame pointers on the coroutine's own stack."""

    def __init__(self):
        super().__init__("coro bt", gdb.COMMAND_STACK)

    def invoke(self, argument, from_tty):
        if not argument.strip():
            raise CoroError("usage: coro bt EXPR (a coro *)")
        c = as_coro(gdb.parse_and_eval(argument))
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
