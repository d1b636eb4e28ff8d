"""The one compiled module (the record walk of protocol/recordscan.py); optional: without a C
compiler the install goes on and recordscan falls back to Python. Everything else is in
pyproject.toml. In a checkout: `python setup.py build_ext --inplace`."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("protocol._recordscan", ["protocol/_recordscan.c"], optional=True)])
