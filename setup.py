"""Builds torch_neuron_sim._C from csrc/ with torch's cpp_extension tooling.

Set TORCH_NEURON_SIM_NO_EXT=1 to install the Python package without building
the extension (the Makefile builds it in place first, with ninja, so that
only changed files recompile).
"""
import glob
import os

from setuptools import setup

ext_modules, cmdclass = [], {}
if os.environ.get("TORCH_NEURON_SIM_NO_EXT") != "1":
    import torch
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    # Every layer under csrc/ (runtime, aten, and the rooms added later) is one extension.
    # The profiler's Kineto session is its own small extension: it alone needs
    # USE_KINETO and torch's bundled Kineto headers, and those flags reach no other file.
    kineto_sources = ["csrc/profiler/kineto_session.cpp", "csrc/bindings/kineto_module.cpp"]
    sources = sorted(set(glob.glob("csrc/**/*.cpp", recursive=True)) - set(kineto_sources))
    # Includes are spelled from csrc/ ("runtime/arena.h", "aten/neuron.h"). The C++
    # standard is the one torch's tooling passes (its headers need it): no -std here.
    csrc = os.path.abspath("csrc")
    # -g0: Python's own CFLAGS add -g, and debug info was 70 of the library's 77 MiB and about a
    # third of each file's compile time (fast_path.cpp: 32 s -> 21 s of CPU); symbols stay, so
    # backtraces still name functions. The sanitizer build below keeps -g.
    flags = ["-O2", "-Wno-unused-parameter", "-g0"]
    link_flags = []
    if os.environ.get("NEURON_SIM_SANITIZE") == "1":  # make test-sanitize: ASan + UBSan build
        sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
        flags = ["-O1", "-g", "-Wno-unused-parameter", *sanitize]
        link_flags = sanitize
    ext_modules = [
        CppExtension("torch_neuron_sim._C", sources, include_dirs=[csrc], extra_compile_args=flags,
                     extra_link_args=link_flags),
        CppExtension(
            "torch_neuron_sim._kineto",
            kineto_sources,
            # fmt (used by Kineto's headers) is header-only here: libtorch does not export it.
            define_macros=[("USE_KINETO", "1"), ("FMT_HEADER_ONLY", "1")],
            include_dirs=[csrc, os.path.join(os.path.dirname(torch.__file__), "include", "kineto")],
            extra_compile_args=flags,
            extra_link_args=link_flags,
        ),
    ]
    cmdclass = {"build_ext": BuildExtension.with_options(use_ninja=True)}

setup(ext_modules=ext_modules, cmdclass=cmdclass)
