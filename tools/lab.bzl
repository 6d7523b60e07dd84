"""The rules a lab's BUILD files use (tools/lab start loads these).

A lab is a student's copy of a chapter under labs/, inside the workspace
so that Bazel can build it. Its BUILD files are the chapter's, plus one
line that loads these rules in place of the native ones: each adds the tag
"manual", which keeps the target out of `//...`. A lab in progress, even
one that does not compile, never breaks the repository's own
`bazel test //...`; `tools/lab grade` names the lab's targets explicitly.
"""

def _manual(kwargs):
    kwargs["tags"] = kwargs.get("tags", []) + ["manual"]
    return kwargs

def cc_binary(**kwargs):
    native.cc_binary(**_manual(kwargs))

def cc_library(**kwargs):
    native.cc_library(**_manual(kwargs))

def cc_test(**kwargs):
    native.cc_test(**_manual(kwargs))

def filegroup(**kwargs):
    native.filegroup(**_manual(kwargs))

def genrule(**kwargs):
    native.genrule(**_manual(kwargs))

def sh_binary(**kwargs):
    native.sh_binary(**_manual(kwargs))

def sh_test(**kwargs):
    native.sh_test(**_manual(kwargs))
