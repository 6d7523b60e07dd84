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
 *    sp + 56   return address   <- where coro_context_switch was called
 *    sp + 48   rbp
 *    sp + 40   rbx
 *    sp + 32   r12
 *    sp + 24   r13
 *    sp + 16   r14
 *    sp +  8   r15
 *    sp +  4   x87 control word (2 bytes)
 *    sp +  0   MXCSR (4 bytes)
 *
 * Why `pop; jmp` and not `ret`: the CPU predicts every `ret` from a small
 * return-stack buffer filled by `call`. Our `ret` would go to a return
 * address saved on *another* stack, which that buffer never saw: a
 * mispredicted branch on every switch. An indirect `jmp` is predicted from
 * the branch history instead, and a ping-pong between two places is exactly
 * the pattern that predictor learns.
 *
 * context_asm.c builds the same frame by hand for a coroutine that has not
 * run yet, with coro_context_start as the "return address".
 */
#if defined(__x86_64__)

        .text
        .globl  coro_context_switch
        .type   coro_context_switch, @function
        .p2align 4
coro_context_switch:
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)

        movq    %rsp, (%rdi)            /* from->sp = rsp: "from" is saved */
        movq    (%rsi), %rsp            /* rsp = to->sp: we are now on "to" */

        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        movl    %edx, %eax              /* "to"'s call returns value */
        popq    %rcx                    /* "to"'s return address, and */
        jmpq    *%rcx                   /* go there: see the note below */
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
