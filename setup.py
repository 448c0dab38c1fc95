"""Builds torch_neuron_sim._C from csrc/ with torch's cpp_extension tooling.

Set TORCH_NEURON_SIM_NO_EXT=1 to install the Python package without building
the extension (the Makefile builds it in place first, with ninja, so that
only changed files recompile).
"""
import glob
import os
import shlex
import subprocess

from setuptools import setup

ext_modules, cmdclass = [], {}
if os.environ.get("TORCH_NEURON_SIM_NO_EXT") != "1":
    import torch
    from torch.utils import cpp_extension
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
    # backtraces still name functions. The sanitizer builds below keep line tables (-g1).
    flags = ["-O2", "-Wno-unused-parameter", "-g0"]
    link_flags = []
    sanitizer = os.environ.get("NEURON_SIM_SANITIZE")
    if sanitizer == "1":  # make test-sanitize: ASan + UBSan build
        # -g1, as for TSan: a report's stack needs function names and lines, not full debug info.
        sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined"]
        flags = ["-O1", "-g1", "-Wno-unused-parameter", *sanitize]
        link_flags = sanitize
    elif sanitizer == "thread":  # make test-tsan: ThreadSanitizer build
        # -g1: line tables are what a race report needs, at a fraction of -g's compile time.
        sanitize = ["-fsanitize=thread"]
        flags = ["-O1", "-g1", "-fno-omit-frame-pointer", "-Wno-unused-parameter", *sanitize]
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
    # Every build, the sanitized ones too, compiles the precompiled header with its own flags and
    # groups the files: a sanitized build recompiles everything, in fewer than half as many units.
    # -fpch-preprocess: ccache caches the files that use the precompiled header (with the
    # Makefile's CCACHE_SLOPPINESS); -Winvalid-pch: a header gcc cannot use is named, not
    # silently parsed again.
    # -Wno-sign-compare: a torch header silences it around one template with a diagnostic
    # pragma, and GCC forgets such pragmas for templates instantiated from a precompiled
    # header: every file would print the same warning from torch's code.
    ext_modules[0].extra_compile_args += ["-fpch-preprocess", "-Winvalid-pch", "-Wno-sign-compare"]
    ext_modules[0].precompiled_header = "aten/precompiled.h"

    class NeuronBuildExt(BuildExtension.with_options(use_ninja=True)):
        """BuildExtension that first compiles an extension's precompiled header (csrc/aten/
        precompiled.h: the torch headers most files include; docs/building.md) with the exact
        flags ninja then compiles the files with, into build_temp/precompiled/, searched before
        csrc/. Rebuilt only when the header or the flags change: every file that uses it
        depends on it, so rewriting it recompiles them all."""

        def build_extension(self, ext):
            header = getattr(ext, "precompiled_header", None)
            if not header:
                return super().build_extension(ext)
            pch_dir = os.path.abspath(os.path.join(self.build_temp, "precompiled"))
            # setuptools skips the build when the library is newer than every dependency: the
            # members (a group's file changes only with its list) and csrc's headers, so an edit
            # to either reaches ninja.
            members = [s for s in ext.sources if not s.startswith(self.build_temp)]
            ext.sources = unity_groups(members, os.path.join(self.build_temp, "unity"), header)
            ext.depends = sorted(set(ext.depends) | set(members) | set(glob.glob("csrc/**/*.h", recursive=True)))
            ext.include_dirs = [pch_dir, *[d for d in ext.include_dirs if d != pch_dir]]
            # The flags are taken where torch's tooling hands them to ninja, so they are the
            # files' own (a header compiled with other flags, -std for one, is not used).
            write_and_run = cpp_extension._write_ninja_file_and_compile_objects

            def compile_header_then_files(**kwargs):
                cflags = [f for q in kwargs["cflags"] for f in shlex.split(q)]
                post = [f for q in kwargs["post_cflags"] for f in shlex.split(q)]
                build_precompiled_header(os.path.join(csrc, header), os.path.join(pch_dir, header + ".gch"),
                                         cflags, post)
                return write_and_run(**kwargs)

            cpp_extension._write_ninja_file_and_compile_objects = compile_header_then_files
            try:
                super().build_extension(ext)
            finally:
                cpp_extension._write_ninja_file_and_compile_objects = write_and_run

    # At most this many files of one directory share a compiler process: editing one file
    # recompiles its group, which keeps an edit-and-rebuild within 30 s (docs/building.md).
    UNITY_GROUP_FILES = 4

    def unity_groups(sources, unity_dir, header):
        """The files that start with the precompiled header, grouped by directory (a layer's
        room: aten/kernels, bindings, ...) into files of at most UNITY_GROUP_FILES that
        #include them, each compiled as one unit; the other files (runtime/, which includes no
        torch header) stay units of their own. Most of a small file's compile is loading the
        precompiled header and instantiating the torch templates it uses, paid once per unit
        (docs/building.md). A group's files share one translation unit, so names local to a
        file (an anonymous namespace, static) must differ across its directory."""
        first = f'#include "{header}"'
        rooms, alone = {}, []
        for source in sources:
            with open(source) as f:
                starts = next((line for line in f if line.startswith("#include")), "").startswith(first)
            (rooms.setdefault(os.path.dirname(source), []) if starts else alone).append(source)
        out = list(alone)
        for room, files in sorted(rooms.items()):
            files = sorted(files)
            count = -(-len(files) // UNITY_GROUP_FILES)
            for i in range(count):  # sizes differing by one at most: 13 files are 3 + 3 + 3 + 4
                part = files[len(files) * i // count:len(files) * (i + 1) // count]
                name = os.path.relpath(room, "csrc").replace(os.sep, "-") + f"-{i + 1}.cpp"
                # The header first, from the group's own file: GCC loads a precompiled header
                # only from the unit's first #include, not from inside another file.
                text = (f"// Generated by setup.py: one compiler process for {len(part)} files of {room}/"
                        f" (docs/building.md).\n{first}\n"
                        + "".join(f'#include "{os.path.relpath(p, "csrc")}"\n' for p in part))
                out.append(write_if_changed(os.path.join(unity_dir, name), text))
        return out

    def write_if_changed(path, text):
        """Writes a generated file only when its text changes: ninja compares mtimes."""
        if not os.path.exists(path) or open(path).read() != text:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return path

    def build_precompiled_header(source, target, cflags, post_cflags):
        # The compiler ninja runs (ccache where installed, as torch's tooling prepends it).
        compiler = cpp_extension._wrap_compiler(cpp_extension.get_cxx_compiler())
        partial = target + ".partial"
        command = [*compiler, *cflags, "-x", "c++-header", source, "-o", partial, *post_cflags]
        stamp = target + ".command"
        line = shlex.join(command)
        # The header itself beside its compiled copy: in a group, the second file's #include of
        # it finds this directory first and must read a file (its guard makes it empty).
        write_if_changed(target[: -len(".gch")], open(source).read())
        if (os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(source)
                and os.path.exists(stamp) and open(stamp).read() == line):
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        print("precompiling " + os.path.relpath(source), flush=True)
        subprocess.run(command, check=True)
        os.replace(partial, target)  # an interrupted build leaves no half-written header in use
        with open(stamp, "w") as f:
            f.write(line)

    cmdclass = {"build_ext": NeuronBuildExt}

setup(ext_modules=ext_modules, cmdclass=cmdclass)
