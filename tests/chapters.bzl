"""The chapters of the course, in order: the one list every macro reads.

A chapter is added here when its directory lands; every suite whose concept
it inherits then runs against it automatically.
"""

CHAPTERS = [
    (1, "ch01_context"),
    (2, "ch02_scheduler"),
    (3, "ch03_timers"),
    (4, "ch04_threads"),
    (5, "ch05_shutdown"),
]

# The two switch back-ends: (label suffix, library target in each chapter).
BACKENDS = [
    ("asm", "coro"),
    ("ucontext", "coro_ucontext"),
]
