/*
 * switch_aarch64.S — the context switch for AArch64 (AAPCS64).
 *
 *   int coro_context_switch(coro_context *from, coro_context *to, int value);
 *                                     x0                 x1        w2
 *
 * A switch is an ordinary function call that returns on another stack, so
 * only what AAPCS64 says a callee must preserve is saved ("Machine
 * Registers": "General-purpose Registers" and "SIMD and Floating-Point
 * Registers"): x19–x28, the frame pointer x29, the link register x30 (our
 * return address), sp, and the low 64 bits of v8–v15, that is d8–d15.
 * `value` is left in w0, the register of an int return value, so the call
 * that suspended "to" returns it (see switch_x86_64.S).
 *
 * FPCR (rounding mode, flush-to-zero, trap enables) is not switched: the
 * same part of AAPCS64 calls it a global register that only functions whose
 * documented purpose is to change it may modify — it is not callee-saved —
 * and FPSR holds cumulative flags that are not preserved across calls.
 *
 * The saved frame, at from->sp while suspended (160 bytes, 16-aligned):
 *
 *    sp + 144  d14 d15        sp + 64   x27 x28
 *    sp + 128  d12 d13        sp + 48   x25 x26
 *    sp + 112  d10 d11        sp + 32   x23 x24
 *    sp +  96  d8  d9         sp + 16   x21 x22
 *    sp +  80  x29 x30        sp +  0   x19 x20
 */
#if defined(__aarch64__)

        .text
        .globl  coro_context_switch
        .type   coro_context_switch, %function
        .p2align 4
coro_context_switch:
        sub     sp, sp, #160
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        stp     d8,  d9,  [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]

        mov     x9, sp
        str     x9, [x0]                /* from->sp = sp: "from" is saved */
        ldr     x9, [x1]
        mov     sp, x9                  /* sp = to->sp: we are now on "to" */

        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8,  d9,  [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        add     sp, sp, #160
        mov     w0, w2                  /* "to"'s call returns value */
        ret                             /* to x30: wherever "to" stopped */
        .size   coro_context_switch, .-coro_context_switch

/*
 * The bottom of every coroutine's stack. The first switch "returns" here
 * with the entry function in x20 and its argument in x19.
 */
        .globl  coro_context_start
        .type   coro_context_start, %function
        .p2align 4
coro_context_start:
        .cfi_startproc
        .cfi_undefined x30              /* debuggers: no caller below this */
        mov     x0, x19
        blr     x20
        brk     #1                      /* the entry never returns */
        .cfi_endproc
        .size   coro_context_start, .-coro_context_start

#endif

        .section .note.GNU-stack,"",%progbits
