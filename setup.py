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
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    # Every layer under csrc/ (runtime, aten, and the rooms added later) is one extension.
    sources = sorted(glob.glob("csrc/**/*.cpp", recursive=True))
    ext_modules = [
        CppExtension(
            "torch_neuron_sim._C",
            sources,
            extra_compile_args=["-O2", "-std=c++17", "-Wno-unused-parameter"],
        )
    ]
    cmdclass = {"build_ext": BuildExtension.with_options(use_ninja=True)}

setup(ext_modules=ext_modules, cmdclass=cmdclass)
