# bindings/python/setup.py -- builds psa._capi: runs SWIG on ../psa.i and compiles the wrapper
# against libpsa. pyproject.toml holds the metadata; this file only finds the library.
"""Build of the psa extension.

libpsa (psa.h + libpsa.so) is looked for in this order:
  1. PSA_INCLUDE_DIR and PSA_LIB_DIR             (explicit directories)
  2. PSA_PREFIX                                  (<prefix>/include, <prefix>/lib[64])
  3. pkg-config psa                              (an installed libpsa; honours PKG_CONFIG_PATH)
  4. this source tree: ../../include and ../../build (the README's build directory)
The extension records the library directory as its RPATH (set PSA_NO_RPATH=1 to leave it
out and rely on the loader path instead). SWIG is `swig` on PATH, or $SWIG.
"""
import os
import shutil
import struct
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
PSA_I = os.path.join(os.path.dirname(HERE), "psa.i")
REPO = os.path.dirname(os.path.dirname(HERE))


def _has_lib(directory):
    return any(os.path.exists(os.path.join(directory, n)) for n in ("libpsa.so", "libpsa.dylib"))


def _pkg_config():
    exe = shutil.which("pkg-config")
    if not exe:
        return None
    try:
        inc = subprocess.check_output([exe, "--cflags-only-I", "psa"], text=True,
                                      stderr=subprocess.DEVNULL).split()
        lib = subprocess.check_output([exe, "--libs-only-L", "psa"], text=True,
                                      stderr=subprocess.DEVNULL).split()
    except subprocess.CalledProcessError:
        return None
    inc_dirs = [x[2:] for x in inc if x.startswith("-I")] or ["/usr/include"]
    lib_dirs = [x[2:] for x in lib if x.startswith("-L")]
    return inc_dirs[0], (lib_dirs[0] if lib_dirs else None), "pkg-config"


def find_libpsa():
    """(include_dir, lib_dir or None, how)."""
    env = os.environ
    if env.get("PSA_INCLUDE_DIR") and env.get("PSA_LIB_DIR"):
        return env["PSA_INCLUDE_DIR"], env["PSA_LIB_DIR"], "PSA_INCLUDE_DIR/PSA_LIB_DIR"
    if env.get("PSA_PREFIX"):
        prefix = env["PSA_PREFIX"]
        for sub in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu"),
                    os.path.join("lib", "aarch64-linux-gnu")):
            if _has_lib(os.path.join(prefix, sub)):
                return os.path.join(prefix, "include"), os.path.join(prefix, sub), "PSA_PREFIX"
        sys.exit("setup.py: PSA_PREFIX=%s has no lib*/libpsa.so" % prefix)
    found = _pkg_config()
    if found:
        return found
    tree_inc, tree_lib = os.path.join(REPO, "include"), os.path.join(REPO, "build")
    if os.path.exists(os.path.join(tree_inc, "psa.h")) and _has_lib(tree_lib):
        return tree_inc, tree_lib, "source tree"
    sys.exit("setup.py: libpsa not found: set PSA_PREFIX (or PSA_INCLUDE_DIR and PSA_LIB_DIR), "
             "install libpsa where pkg-config finds psa.pc, or build it into %s" % tree_lib)


class BuildSwigExt(build_ext):
    """Runs SWIG into the build tree (so the generated psa/capi.py lands in the wheel), then
    compiles the wrapper."""

    def run(self):
        include_dir, lib_dir, how = find_libpsa()
        print("setup.py: libpsa from %s: include %s, lib %s" % (how, include_dir, lib_dir))
        swig = os.environ.get("SWIG") or shutil.which("swig") or shutil.which("swig4.0")
        if not swig:
            sys.exit("setup.py: SWIG not found (apt-get install swig, or set SWIG)")
        pkg_dir = os.path.join(HERE, "psa") if self.inplace else os.path.join(self.build_lib, "psa")
        os.makedirs(pkg_dir, exist_ok=True)
        os.makedirs(self.build_temp, exist_ok=True)
        wrapper = os.path.join(self.build_temp, "capi_wrap.c")
        # SWIG's int64_t must be the C compiler's: long where long is 64-bit (see psa.i).
        wordsize = ["-DSWIGWORDSIZE64"] if struct.calcsize("l") == 8 else []
        subprocess.check_call([swig, "-python"] + wordsize + ["-I" + include_dir, "-I" + HERE,
                               "-outdir", pkg_dir, "-o", wrapper, PSA_I])
        for ext in self.extensions:
            ext.sources = [wrapper]
            ext.include_dirs += [include_dir, HERE]
            ext.libraries += ["psa"]
            if lib_dir:
                ext.library_dirs += [lib_dir]
                if not os.environ.get("PSA_NO_RPATH") and sys.platform != "win32":
                    ext.runtime_library_dirs += [lib_dir]
        super().run()


setup(
    ext_modules=[Extension("psa._capi", sources=[os.path.relpath(PSA_I, HERE)])],
    cmdclass={"build_ext": BuildSwigExt},
)
