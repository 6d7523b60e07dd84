"""SPIN models as Bazel tests, under two memory models.

    spin_model(
        name = "park",
        model = "park.pml",
        mutants = {"relaxed_consume": ["-DMUTANT"]},
        weak_mutants = {"relaxed_recheck": ["-DMUTANT_RELAXED_RECHECK"]},
    )

makes
  - `park_model_test`: the exhaustive search of the model as the code is,
    on x86-TSO (tso.pml);
  - `park_weak_model_test`: the same on the weak model (weak.pml, through
    -DMM_WEAK): what C11's orders allow on ARMv8;
  - one `park_mutant_<key>_test` per mutant (x86-TSO) and one
    `park_weak_mutant_<key>_test` per weak mutant (the weak model): a
    known-bad variant of the code, which must report an error (a model
    that cannot fail proves nothing). A weak mutant is one that x86 cannot
    show: a weakened order that compiles to the same instructions there.

Each search fails on any error or an incomplete search; `defines`, if
given, are passed to spin for both model tests. Every model includes
memory.pml, which includes tso.pml or weak.pml: the three are added to
the test's files. Tagged "nosan": the sanitizer and Valgrind
configurations instrument C code, not models; "model" lets a run select
them (--test_tag_filters=model).

The mutants are tagged "mutant" and "manual": `bazel test //...` (the
README's test command) leaves them out, and the package's test suite
`mutants`, made by

    spin_mutants_suite()

at the end of the BUILD file, runs them all:
`bazel test //chNN_x/models:mutants` (a CI step of its own). A mutant
named on the command line runs as any test does. (The mutants are half
the models' test time and check the models, not the code: a change to
the code that breaks a model fails a model test, in `//...`.)

    spin_litmus(name = "litmus_test", cases = [
        ("SB relaxed", "fail", "fail", ["-DTEST_SB"]),
        ...
    ])

checks the memory models themselves on the litmus tests of litmus.pml,
as one test: for each case and memory model, "fail" where the model must
allow the outcome the test asserts never happens, "pass" where it must
forbid it.
"""

MEMORY_MODELS = ["memory.pml", "tso.pml", "weak.pml"]

MUTANT_TAGS = ["mutant", "manual"]

def _spin_test(name, expect, files, defines, size, tags = []):
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tools:spin_model_test.sh"],
        args = ["--expect", expect] + ["$(location %s)" % f for f in files] +
               (["--"] + defines if defines else []),
        data = files,
        tags = ["nosan", "model"] + tags,
    )

def spin_model(name, model, includes = [], defines = [], mutants = {}, weak_mutants = {}, size = "medium"):
    files = [model] + [f for f in MEMORY_MODELS + includes if f != model]
    files = [f for i, f in enumerate(files) if f not in files[:i]]
    _spin_test(name + "_model_test", "pass", files, defines, size)
    _spin_test(name + "_weak_model_test", "pass", files, defines + ["-DMM_WEAK"], size)
    for key, mutant_defines in mutants.items():
        _spin_test("%s_mutant_%s_test" % (name, key), "fail", files, mutant_defines, size,
                   MUTANT_TAGS)
    for key, mutant_defines in weak_mutants.items():
        _spin_test("%s_weak_mutant_%s_test" % (name, key), "fail", files,
                   mutant_defines + ["-DMM_WEAK"], size, MUTANT_TAGS)

def spin_mutants_suite(name = "mutants"):
    """A test suite of every mutant the package's spin_model calls made so
    far (call it last). Tagged "manual" itself, so that `//...` does not
    bring the mutants back through it."""
    native.test_suite(
        name = name,
        tests = sorted([
            ":" + rule["name"]
            for rule in native.existing_rules().values()
            if "mutant" in rule.get("tags", [])
        ]),
        tags = ["manual"],
    )

def spin_litmus(name, cases, model = "litmus.pml"):
    """One test: every case of `cases`, (name, tso, weak, defines), where
    tso and weak are "pass" or "fail" as for spin_model's tests."""
    files = [model] + MEMORY_MODELS
    native.sh_test(
        name = name,
        size = "medium",
        srcs = ["//tools:spin_litmus_test.sh"],
        args = ["$(location //tools:spin_model_test.sh)"] +
               ["$(location %s)" % f for f in files] + ["--"] +
               ["%s:%s:%s:%s" % (n, tso, weak, ",".join(d)) for n, tso, weak, d in cases],
        data = files + ["//tools:spin_model_test.sh"],
        tags = ["nosan", "model"],
    )
