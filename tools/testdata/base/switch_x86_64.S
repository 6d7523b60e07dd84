/* switch_x86_64.S — a stage_diff fixture: global labels are functions.
 * not_a_label: in a comment
 */
#if defined(__x86_64__)
    .text
    .globl coro_switch
    .type coro_switch, @function
coro_switch:
    pushq %rbp
    pushq %rbx
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %rbx
    popq %rbp
    ret
    .size coro_switch, .-coro_switch

/* The comment above a function: after the .size, so part of no body. */
    .global coro_trampoline, coro_other
coro_trampoline:
    movq %r12, %rdi
local_label:
    call *%r13
    jmp local_label
coro_other: ret
#endif
    .section .note.GNU-stack,"",@progbits
