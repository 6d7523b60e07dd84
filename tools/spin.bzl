"""SPIN models as Bazel tests.

    spin_model(
        name = "park",
        model = "park.pml",
        includes = ["tso.pml"],
        mutants = {"relaxed_consume": ["-DMUTANT"]},
    )

makes `park_model_test`, the exhaustive search of the model as the code
is (fails on any error or an incomplete search; `defines`, if given, are
passed to spin for it), and one
`park_mutant_<key>_test` per mutant: the model built with those defines,
a known-bad variant of the code, which must report an error (a model that
cannot fail proves nothing). Tagged "nosan": the sanitizer and Valgrind
configurations instrument C code, not models; "model" lets a run select
them (--test_tag_filters=model).
"""

def spin_model(name, model, includes = [], defines = [], mutants = {}, size = "medium"):
    files = [model] + includes
    native.sh_test(
        name = name + "_model_test",
        size = size,
        srcs = ["//tools:spin_model_test.sh"],
        args = ["--expect", "pass"] + ["$(location %s)" % f for f in files] +
               (["--"] + defines if defines else []),
        data = files,
        tags = ["nosan", "model"],
    )
    for key, defines in mutants.items():
        native.sh_test(
            name = "%s_mutant_%s_test" % (name, key),
            size = size,
            srcs = ["//tools:spin_model_test.sh"],
            args = ["--expect", "fail"] + ["$(location %s)" % f for f in files] + ["--"] + defines,
            data = files,
            tags = ["nosan", "model"],
        )
