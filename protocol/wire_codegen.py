"""Code generation for the compiled codecs: the preamble every compiled module starts with and
the per-compilation state (`Gen`) the wire types emit their parse/build functions through.
"""

LIST = type("ListDefault", (), {"__repr__": lambda self: "LIST"})()
"""Default marker of array fields: a fresh empty list per object."""

# Objects referenced by compiled code, by id (schema objects live as long as the process).
_REFS = {}


_PREAMBLE = """
from protocol.wire import (_REFS, read_uvarint as _ruv, read_uuid as _ruuid, read_tag_header as _rtag,
    read_unknown_tags as _runknown, write_records as _wrec, write_uuid as _wuuid,
    write_tag_section as _wtags, uvarint as _uv,
    absent_field_error as _absent, DecodeError as _DecodeError, EncodeError as _EncodeError)
from struct import unpack_from as _unpack_from, pack as _pack
from protocol.wire import Reader as _Reader, Writer as _Writer
_new = object.__new__
def _odr_parse(fn, io):
    if type(io) is _Reader:
        obj, io.pos = fn(io.buf, io.pos, io.end)
        return obj
    start = io.tell()
    data = io.read()
    obj, pos = fn(memoryview(data), 0, len(data))
    io.seek(start + pos)
    return obj
def _odr_build(fn, obj, io):
    if type(io) is _Writer:
        return io.finish(fn(io, bytearray(), obj))
    w = _Writer()
    io.write(b"".join(w.finish(fn(w, bytearray(), obj))))
    return obj
"""


class Gen:
    """Per-compilation state hung on construct's CodeGen: references, helpers, emitted functions."""

    def __init__(self, code):
        self.code = code
        self.counter = 0
        self.parsers = {}
        self.builders = {}
        self.structs = {}
        code.append(_PREAMBLE)

    @classmethod
    def of(cls, code):
        gen = getattr(code, "_odradek", None)
        if gen is None:
            gen = code._odradek = cls(code)
        return gen

    def var(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def ref(self, obj):
        key = id(obj)
        _REFS[key] = obj
        name = f"_r{key}"
        self.code.append(f"{name} = _REFS[{key}]")
        return name

    def struct(self, fmt):
        name = self.structs.get(fmt)
        if name is None:
            name = self.structs[fmt] = f"_s{len(self.structs)}"
            self.code.append(f"{name} = __import__('struct').Struct({fmt!r})")
        return name

    def default_expr(self, default):
        """Source for a fresh default value."""
        if default is LIST:
            return "[]"
        if isinstance(default, type):
            return f"{self.ref(default)}()"
        if default is None or isinstance(default, (bool, int, float, str)):
            return repr(default)
        return self.ref(default)

    def nondefault_expr(self, default, expr):
        """Source testing whether `expr` differs from the default (an absent/tagged field check)."""
        if default is None:
            return f"{expr} is not None"
        if default is LIST:
            return f"{expr} != []"
        if isinstance(default, type):
            return f"{expr} != {self.ref(default())}"
        return f"{expr} != {self.default_expr(default)}"


def _indent(lines, n=1):
    pad = "    " * n
    return [pad + line for line in lines]
