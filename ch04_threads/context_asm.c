/*
 * context_asm.c — the hand-written back-end: building a coroutine's first
 * frame, and (x86-64) choosing how the switch restores MXCSR. The switch
 * itself is in switch_x86_64.S and switch_aarch64.S.
 *
 * A suspended context is just a stack pointer pointing at saved registers.
 * A coroutine that has never run has no such frame yet, so we write one by
 * hand, laid out exactly as the switch would have saved it, whose "return
 * address" is coro_context_start: the first switch to it then loads these
 * registers and "returns" into coro_context_start, which calls entry(arg).
 */
#include "context.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* Defined in the .S file; never called from C, only returned into. */
void coro_context_start(void);

/* The highest 16-byte-aligned address of the stack: stacks grow down. */
static uintptr_t stack_top(void *stack_lo, size_t size)
{
    return ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
}

#if defined(__x86_64__)

/* Frame slots, in 8-byte words from the saved stack pointer (see the .S). */
enum { SLOT_CONTROL, SLOT_R15, SLOT_R14, SLOT_R13, SLOT_R12, SLOT_RBX,
       SLOT_RBP, SLOT_RETURN, FRAME_WORDS };

/* The floating-point control state a new coroutine starts with: the
 * creator's, as a new thread inherits its creator's. */
static uint64_t current_fp_control(void)
{
    uint32_t mxcsr;
    uint16_t x87_control;

    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(x87_control));
    return (uint64_t)mxcsr | (uint64_t)x87_control << 32;
}

void coro_context_make(coro_context *ctx, void *stack_lo, size_t size,
                       coro_context_entry entry, void *arg)
{
    /* After the switch has jumped to SLOT_RETURN and dropped its frame,
     * sp == top: 16-aligned. */
    uint64_t *frame = (uint64_t *)stack_top(stack_lo, size) - FRAME_WORDS;

    memset(frame, 0, FRAME_WORDS * sizeof *frame);
    frame[SLOT_CONTROL] = current_fp_control();
    frame[SLOT_R13] = (uint64_t)(uintptr_t)entry;
    frame[SLOT_R12] = (uint64_t)(uintptr_t)arg;
    frame[SLOT_RETURN] = (uint64_t)(uintptr_t)coro_context_start;
    ctx->sp = frame;
}

/* The switch reads this byte (switch_x86_64.S): 0 for CORO_MXCSR_COMPARE,
 * 1 for CORO_MXCSR_LOAD. Hidden: only the library's own switch uses it. */
__attribute__((visibility("hidden"))) unsigned char coro_context_mxcsr_load;

void coro_context_set_mxcsr_mode(coro_mxcsr_mode mode)
{
    coro_context_mxcsr_load = mode == CORO_MXCSR_LOAD;
}

coro_mxcsr_mode coro_context_mxcsr_mode(void)
{
    return coro_context_mxcsr_load ? CORO_MXCSR_LOAD : CORO_MXCSR_COMPARE;
}

/* Runs once, before main (a constructor): AMD CPUs get LOAD, the others
 * COMPARE. The vendor is the 12 bytes of CPUID leaf 0, in ebx, edx, ecx:
 * "AuthenticAMD" on AMD, "GenuineIntel" on Intel. */
__attribute__((constructor)) static void choose_mxcsr_mode(void)
{
    unsigned max_leaf, ebx, ecx, edx;

    if (__get_cpuid(0, &max_leaf, &ebx, &ecx, &edx) &&
        ebx == signature_AMD_ebx && edx == signature_AMD_edx &&
        ecx == signature_AMD_ecx)
        coro_context_set_mxcsr_mode(CORO_MXCSR_LOAD);
}

#elif defined(__aarch64__)

/* Frame slots, in 8-byte words from the saved stack pointer (see the .S). */
enum { SLOT_X19, SLOT_X20, SLOT_X29 = 10, SLOT_X30 = 11, FRAME_WORDS = 20 };

void coro_context_make(coro_context *ctx, void *stack_lo, size_t size,
                       coro_context_entry entry, void *arg)
{
    /* After the switch's `add sp, sp, #160`, sp == top: 16-aligned. */
    uint64_t *frame = (uint64_t *)stack_top(stack_lo, size) - FRAME_WORDS;

    memset(frame, 0, FRAME_WORDS * sizeof *frame);
    frame[SLOT_X19] = (uint64_t)(uintptr_t)arg;
    frame[SLOT_X20] = (uint64_t)(uintptr_t)entry;
    frame[SLOT_X29] = 0; /* frame-pointer chain ends here */
    frame[SLOT_X30] = (uint64_t)(uintptr_t)coro_context_start;
    ctx->sp = frame;
}

#else
#error "the assembly back-end supports x86-64 and AArch64; build coro_ucontext"
#endif
