/*
 * switch_x86_64.S — the context switch for x86-64 (System V ABI).
 *
 *   int coro_context_switch(coro_context *from, coro_context *to, int value);
 *                                     %rdi               %rsi      %edx
 *
 * A switch is an ordinary function call that returns on another stack. The
 * caller already assumes every caller-saved register is clobbered by the
 * call, so only what the ABI says a callee must preserve is saved: the six
 * callee-saved general registers, the stack pointer, and the control bits
 * of MXCSR and the x87 control word (psABI §3.2.1, Figure 3.4, and §3.2.3).
 * `value` travels with the switch: it is left in %eax, the register of an
 * int return value, so the call that suspended "to" returns it. That lets
 * the side that leaves tell the side that arrives how its call went (the
 * result of coro_yield() or coro_resume()) with no work after the switch.
 *
 * The saved frame, at from->sp while suspended (addresses grow upwards):
 *
 *    sp + 56   return address   <- pushed by the `call` of this function
 *    sp + 48   rbp
 *    sp + 40   rbx
 *    sp + 32   r12
 *    sp + 24   r13
 *    sp + 16   r14
 *    sp +  8   r15
 *    sp +  4   x87 control word (2 bytes)
 *    sp +  0   MXCSR (4 bytes)
 *
 * Why `jmp` and not `ret`: the CPU predicts every `ret` from a small
 * return-stack buffer filled by `call`. Our `ret` would go to a return
 * address saved on *another* stack, which that buffer never saw: a
 * mispredicted branch on every switch. An indirect `jmp` is predicted from
 * the branch history instead, and a ping-pong between two places is exactly
 * the pattern that predictor learns. The frame is written and read with
 * `mov`s at fixed offsets, not `push` and `pop`, so that "to"'s return
 * address can be loaded first, as soon as rsp points at its frame, and the
 * jump does not wait at the end of a chain of pops.
 *
 * The floating-point control state: load only what differs. The x87
 * control word is loaded only when it differs from ours, which is rare.
 * The low six bits of MXCSR are status flags (an inexact result, an
 * overflow, ...): sticky, set by ordinary floating-point code, and
 * caller-saved (psABI §3.2.3). For MXCSR the cheap way depends on the CPU
 * (coro_context_set_mxcsr_mode() in context.h; the figures are in
 * Chapter 1's notes/performance.md, "Restoring MXCSR: two CPUs, two ways"):
 *
 *  - COMPARE (Intel): read our word back, and load "to"'s only when a
 *    control bit (rounding, flush-to-zero, exception masks) differs. The
 *    status flags stay the thread's, as across any call. Loading a *new*
 *    value into MXCSR is slow there, and if the switch carried the flags,
 *    one inexact division on one side would make every switch load a new
 *    value (10 ns per switch became 100 on one virtual machine).
 *  - LOAD (AMD): load "to"'s word at every switch; the status flags travel
 *    with each context. Reading back the word that `stmxcsr` has just
 *    stored is the slow part there (the load waits for the store to
 *    retire: about 2 ns per switch), while a new value costs nothing.
 *
 * context_asm.c builds the same frame by hand for a coroutine that has not
 * run yet, with coro_context_start as the "return address", and chooses
 * the MXCSR mode.
 */
#if defined(__x86_64__)

        .text
        .globl  coro_context_switch
        .type   coro_context_switch, @function
        .hidden coro_context_mxcsr_load  /* a byte, in context_asm.c */
        .p2align 4
coro_context_switch:
        subq    $56, %rsp               /* the frame, below the return */
        stmxcsr (%rsp)                  /* address that `call` pushed */
        fnstcw  4(%rsp)
        movq    %r15, 8(%rsp)
        movq    %r14, 16(%rsp)
        movq    %r13, 24(%rsp)
        movq    %r12, 32(%rsp)
        movq    %rbx, 40(%rsp)
        movq    %rbp, 48(%rsp)

        movq    %rsp, (%rdi)            /* from->sp = rsp: "from" is saved */
        movq    %rsp, %r9               /* our frame, for the MXCSR compare */
        movzwl  4(%rsp), %r8d           /* our x87 control word */
        movq    (%rsi), %rsp            /* rsp = to->sp: we are now on "to" */
        movq    56(%rsp), %rcx          /* "to"'s return address, first */

        cmpw    4(%rsp), %r8w           /* x87 control word: only if it */
        je      1f                      /* differs */
        fldcw   4(%rsp)
1:      cmpb    $0, coro_context_mxcsr_load(%rip)
        jne     2f                      /* LOAD: always */
        movl    (%r9), %r9d             /* COMPARE: the MXCSR bits that */
        xorl    (%rsp), %r9d            /* differ; a control bit among */
        testl   $0xffffffc0, %r9d       /* them? */
        jz      3f
2:      ldmxcsr (%rsp)
3:      movq    8(%rsp), %r15
        movq    16(%rsp), %r14
        movq    24(%rsp), %r13
        movq    32(%rsp), %r12
        movq    40(%rsp), %rbx
        movq    48(%rsp), %rbp
        addq    $64, %rsp               /* the frame and the return address */
        movl    %edx, %eax              /* "to"'s call returns value */
        jmpq    *%rcx                   /* and continues there */
        .size   coro_context_switch, .-coro_context_switch

/*
 * The bottom of every coroutine's stack. The first switch "returns" here
 * with the entry function in r13 and its argument in r12. The stack pointer
 * is 16-byte aligned at this point, as the ABI requires before a call.
 */
        .globl  coro_context_start
        .type   coro_context_start, @function
        .p2align 4
coro_context_start:
        .cfi_startproc
        .cfi_undefined rip              /* debuggers: no caller below this */
        movq    %r12, %rdi
        callq   *%r13
        ud2                             /* the entry never returns */
        .cfi_endproc
        .size   coro_context_start, .-coro_context_start

#endif

        .section .note.GNU-stack,"",%progbits
