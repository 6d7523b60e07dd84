/*
 * check x87_control — Chapter 1, exercise 3 (x86-64 only).
 *
 * The exercise: remove `fnstcw`/`fldcw` from the x86-64 switch and write a
 * test that fails because of it (hint: the x87 precision control and
 * `long double`).
 *
 * What you provide: the file `answers/x87_control.c` in your lab, with
 *
 *     int x87_control_test(void);
 *
 * your test. It returns 0 when the switch keeps the x87 control word with
 * each context (your test passes) and anything else when it does not (your
 * test fails); it may also die, say of a failed assert(). It uses only the
 * public API (coro.h) and may be run more than once in a process.
 *
 * You do not have to edit the switch in your lab: leave switch_x86_64.S
 * as the lesson shows it. This check removes the two instructions itself,
 * in memory, in a child process: it finds `fnstcw` and `fldcw` in the
 * machine code of coro_context_switch (opcode 0xD9 with a memory operand,
 * ModRM reg field 7 and 5) and overwrites them with no-ops. The saved slot
 * then holds whatever was on the stack, and nothing ever loads it: the x87
 * control word stops travelling with each context and becomes the
 * thread's, which is exactly the switch with the two lines deleted.
 *
 * What this check verifies, in two cases; each runs your test in a child
 * process of its own (a crash counts as "the test failed"; a run over 3 s
 * is killed):
 *   1. intact: with the switch as it is, x87_control_test() returns 0;
 *   2. removed: with fnstcw and fldcw turned into no-ops, it does not.
 * Built with the ucontext back-end, which has no switch_x86_64.S to edit,
 * only the first case runs (swapcontext() keeps the x87 control word per
 * context too, so a right test passes there); the second says it was
 * skipped. The assembly back-end is the one that grades the exercise.
 * A test that passes both ways tests nothing about the x87 word (usual
 * causes: `double` arithmetic, which x86-64 does in SSE registers and
 * MXCSR, not x87; or operands the compiler folds into a constant at
 * compile time). A test that fails both ways is wrong on a correct switch.
 *
 * Built by `tools/lab check ch01 x87_control` with the lab's library
 * sources and answers/x87_control.c. Prints `check x87_control: ok` and
 * exits 0, or one `check x87_control: FAIL: CASE: ...` line per failed
 * case and exits 1.
 */
#define CHECK_NAME "x87_control"
#include "lab_check.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "coro.h"

int x87_control_test(void);

#if !defined(__x86_64__)

static void case_x86_64(void)
{
    check_fail("this exercise is about the x86-64 switch; this machine is "
               "not x86-64");
}

int main(void)
{
    static const check_case cases[] = {{"x86-64", case_x86_64}};

    return check_main(cases, sizeof cases / sizeof cases[0]);
}

#else

/* The switch and the function after it in switch_x86_64.S (context.h and
 * context_asm.c declare them inside the library; the check needs only
 * their addresses). The ucontext back-end has a coro_context_switch() of
 * its own, in C, and no coro_context_start: weak, so that the check still
 * links there, and can tell which back-end it was built with. */
int coro_context_switch(void *from, void *to, int value);
void coro_context_start(void) __attribute__((weak));

enum { SCAN_MAX = 512, MAX_FOUND = 8 };

/* The test's child exits with this plus an errno when it could not make
 * the switch's code writable. */
enum { REMOVE_FAILED = 100 };

struct found {
    size_t offset, length;
    int reg; /* 7: fnstcw, 5: fldcw */
};

/* The length of the memory operand that starts at `modrm` (ModRM, an
 * optional SIB, a displacement), or 0 for a register operand. */
static size_t operand_length(const unsigned char *modrm)
{
    unsigned mod = modrm[0] >> 6, rm = modrm[0] & 7;
    size_t length = 1;

    if (mod == 3)
        return 0;
    if (rm == 4) {
        length++; /* SIB */
        if (mod == 0 && (modrm[1] & 7) == 5)
            length += 4;
    } else if (mod == 0 && rm == 5) {
        length += 4; /* rip-relative */
    }
    if (mod == 1)
        length += 1;
    else if (mod == 2)
        length += 4;
    return length;
}

/* fnstcw m16 is D9 /7, fldcw m16 is D9 /5, each maybe after a REX prefix.
 * The scan runs from the switch to coro_context_start (the next function
 * of the .S file) when that lies close after it, else SCAN_MAX bytes. */
static int find_x87_control(const unsigned char *code, size_t size,
                            struct found *out)
{
    int n = 0;

    for (size_t i = 0; i + 2 < size && n < MAX_FOUND; i++) {
        size_t start = i, at = i;
        int reg;

        if ((code[at] & 0xf0) == 0x40)
            at++; /* REX */
        if (code[at] != 0xd9)
            continue;
        reg = (code[at + 1] >> 3) & 7;
        if (reg != 7 && reg != 5)
            continue;
        size_t operand = operand_length(&code[at + 1]);
        if (operand == 0)
            continue;
        out[n].offset = start;
        out[n].length = at + 1 + operand - start;
        out[n].reg = reg;
        n++;
        i = at + operand; /* past this instruction */
    }
    return n;
}

/* Overwrite each found instruction with no-ops (0x90), through a writable
 * window on the code pages. In the child only: the parent's code stays. */
static int remove_instructions(unsigned char *code, const struct found *f,
                               int n)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)code & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)code + SCAN_MAX + page - 1) &
                   ~(uintptr_t)(page - 1);

    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
        return errno;
    for (int i = 0; i < n; i++)
        memset(code + f[i].offset, 0x90, f[i].length);
    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC))
        return errno;
    return 0;
}

/* Runs the student's test in a child, with the switch as it is or with
 * the instructions removed. Returns the child's wait status. */
static int run_test(int remove, unsigned char *code, const struct found *f,
                    int n)
{
    int status;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        struct rlimit no_core = {0, 0};

        setrlimit(RLIMIT_CORE, &no_core);
        alarm(3);
        if (remove) {
            int err = remove_instructions(code, f, n);
            if (err != 0)
                _exit(REMOVE_FAILED + (err < 100 ? err : 0));
        }
        _exit(x87_control_test() == 0 ? 0 : 1);
    }
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    return status;
}

static void describe(int status, char *out, size_t size)
{
    if (WIFEXITED(status))
        snprintf(out, size, WEXITSTATUS(status) == 0 ? "passed"
                            : "failed (returned nonzero)");
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        snprintf(out, size, "hung (killed after 3 s)");
    else if (WIFSIGNALED(status))
        snprintf(out, size, "died of signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "ended with wait status %d", status);
}

/* The fnstcw and fldcw of the assembly switch, found once per case. */
static unsigned char *switch_code;
static struct found found[MAX_FOUND];
static int found_count;

static void find_in_switch(void)
{
    uintptr_t next = (uintptr_t)coro_context_start;
    size_t size = SCAN_MAX;
    int stores = 0, loads = 0;

    switch_code = (unsigned char *)(uintptr_t)coro_context_switch;
    if (next > (uintptr_t)switch_code &&
        next - (uintptr_t)switch_code < SCAN_MAX)
        size = next - (uintptr_t)switch_code;
    found_count = find_x87_control(switch_code, size, found);
    for (int i = 0; i < found_count; i++) {
        if (found[i].reg == 7)
            stores++;
        else
            loads++;
    }
    CHECK(stores > 0 && loads > 0,
          "found %d fnstcw and %d fldcw in coro_context_switch; the check "
          "removes them itself, so your lab's switch_x86_64.S must have both, "
          "as in the lesson (put them back if you deleted them)",
          stores, loads);
}

/* The ucontext back-end: no coro_context_start (see above). */
static int built_with_ucontext(void)
{
    return coro_context_start == NULL;
}

static void case_intact(void)
{
    char what[80];
    int intact;

    if (!built_with_ucontext())
        find_in_switch();
    intact = run_test(0, switch_code, found, found_count);
    if (!WIFEXITED(intact) || WEXITSTATUS(intact) != 0) {
        describe(intact, what, sizeof what);
        check_fail("with the switch intact your test %s; it must pass when the "
                   "switch keeps the x87 control word per context", what);
    }
}

static void case_removed(void)
{
    char what[80];
    int removed;

    if (built_with_ucontext()) {
        printf("x87_control: built with the ucontext back-end, which has no "
               "fnstcw or fldcw to remove: the removed case runs on the "
               "assembly back-end only\n");
        return;
    }
    find_in_switch();
    removed = run_test(1, switch_code, found, found_count);
    if (WIFEXITED(removed) && WEXITSTATUS(removed) >= REMOVE_FAILED)
        check_fail("cannot make the switch's code writable to remove the "
                   "instructions: %s",
                   strerror(WEXITSTATUS(removed) - REMOVE_FAILED));
    if (WIFEXITED(removed) && WEXITSTATUS(removed) == 0) {
        char offsets[8 * MAX_FOUND] = "";

        for (int i = 0; i < found_count; i++)
            snprintf(offsets + strlen(offsets),
                     sizeof offsets - strlen(offsets), " %zu", found[i].offset);
        check_fail("your test still passes with fnstcw and fldcw removed (%d "
                   "instructions at offsets%s of coro_context_switch): it does "
                   "not notice the x87 control word leaking from one context "
                   "to another (long double arithmetic, in a precision one "
                   "side set, with operands the compiler cannot fold?)",
                   found_count, offsets);
    }
    describe(removed, what, sizeof what);
    printf("x87_control: without fnstcw and fldcw your test %s, as it "
           "should\n", what);
}

int main(void)
{
    static const check_case cases[] = {
        {"intact", case_intact},
        {"removed", case_removed},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}

#endif
