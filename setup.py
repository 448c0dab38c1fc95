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

    sources = sorted(glob.glob("csrc/runtime/*.cpp") + glob.glob("csrc/aten/*.cpp"))
    ext_modules = [
        CppExtension(
            "torch_neuron_sim._C",
            sources,
            extra_compile_args=["-O2", "-std=c++17", "-Wno-unused-parameter"],
        )
    ]
    cmdclass = {"build_ext": BuildExtension.with_options(use_ninja=True)}

setup(ext_modules=ext_modules, cmdclass=cmdclass)
