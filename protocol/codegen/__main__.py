"""`python -m protocol.codegen`: regenerate protocol/generated/."""

import argparse

from protocol.codegen import DEFAULT_OUT, DEFAULT_SPECS, KINDS, write

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--specs", default=DEFAULT_SPECS, help="directory holding messages/, internal/, metadata/")
parser.add_argument("--out", default=DEFAULT_OUT, help="output package directory")
parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated spec directories to generate")
args = parser.parse_args()
files = write(args.out, args.specs, tuple(args.kinds.split(",")))
print(f"generated {len(files)} files into {args.out}")
