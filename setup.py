"""The one part of convbench that is built, not copied: the C launcher of prepared kernel launches
(src/convbench/core/gpu/_launch.c). It needs no CUDA to build (libcuda is opened at run time). It is optional: where
no C compiler or Python headers are found, the install goes on and launches go through ctypes, a few microseconds
slower a call (`convbench info` says which). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("convbench.core.gpu._launch", ["src/convbench/core/gpu/_launch.c"], optional=True)])
