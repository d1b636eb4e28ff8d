"""Construct types for Kafka's wire primitives, compilable into fast straight-line Python.

Every type here is a `construct.Construct`: `T.parse(data)` / `T.build(obj)` work as with any
construct (the interpreted path, used as a reference in tests), and `T.compile()` emits
specialised source through construct's compiler. Construct's own VarInt, Adapter and Bytes neither
compile nor bound their input, so the primitives are ours:

- compiled parsers have the signature ``fn(buf, pos, end) -> (value, pos)`` over a memoryview
  and never allocate more than the frame can hold (every declared length is checked against the
  bytes left before anything is built);
- compiled builders have the signature ``fn(w, out, obj) -> out`` appending to a bytearray; a
  `records` value that must travel separately (a storage file slice, or a large buffer when
  `w.split` is set) closes the current chunk and is appended to `w.parts` untouched.

`Message` is a struct of named fields that parses into (and builds from) a generated body class.
"""

import struct
import uuid

import construct
from construct.core import stream_read, stream_write

from protocol.errors import DecodeError, EncodeError
from protocol.wire_codegen import _REFS, LIST, Gen, _indent
from protocol.wire_runtime import (
    SPLIT_THRESHOLD, Reader, Writer, absent_field_error, as_view, read_tag_header,
    read_unknown_tags, read_uuid, read_uvarint, read_uvarlong, read_varint, read_varlong, uvarint,
    varint, write_length, write_records, write_tag_section, write_uuid,
)

__all__ = [
    # the types
    "WireType", "Fixed", "Uuid", "String", "Bytes", "Records", "Array", "NullableStruct", "Message",
    "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "FLOAT64", "BOOL", "UUID", "ZERO_UUID", "LIST",
    "emit_read_length", "emit_write_length", "emit_write_null",
    # runtime helpers, re-exported: compiled code imports them from here
    "_REFS", "SPLIT_THRESHOLD", "Reader", "Writer", "absent_field_error", "as_view", "read_tag_header",
    "read_unknown_tags", "read_uuid", "read_uvarint", "read_uvarlong", "read_varint", "read_varlong",
    "uvarint", "varint", "write_length", "write_records", "write_tag_section", "write_uuid",
]

ZERO_UUID = uuid.UUID(int=0)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


# --------------------------------------------------------------------------------------------
# the types

class WireType(construct.Construct):
    """Base of our compilable primitives."""

    fmt = None          # struct format character of fixed-width types
    may_slot = False    # whether building may close a chunk (records inside)

    def emit_read(self, g, target):
        raise NotImplementedError

    def emit_write(self, g, expr, out="out"):
        raise NotImplementedError

    # construct's entry points for compiling a type on its own
    def _emitparse(self, code):
        g = Gen.of(code)
        name = g.var("_solo_p")
        lines = [f"def {name}(buf, pos, end):"] + _indent(self.emit_read(g, "value") + ["return value, pos"])
        code.append("\n".join(lines))
        return f"_odr_parse({name}, io)"

    def _emitbuild(self, code):
        g = Gen.of(code)
        name = g.var("_solo_b")
        lines = [f"def {name}(w, out, obj):"] + _indent(self.emit_write(g, "obj") + ["return out"])
        code.append("\n".join(lines))
        return f"_odr_build({name}, obj, io)"


class Fixed(WireType):
    """A fixed-width big-endian number or boolean."""

    def __init__(self, fmt, label):
        super().__init__()
        self.fmt = fmt
        self.label = label
        self.packer = struct.Struct(">" + fmt)

    def __repr__(self):
        return self.label

    def emit_read(self, g, target):
        return [f"{target}, = {g.struct('>' + self.fmt)}.unpack_from(buf, pos)", f"pos += {self.packer.size}"]

    def emit_write(self, g, expr, out="out"):
        return [f"{out} += {g.struct('>' + self.fmt)}.pack({expr})"]

    def _parse(self, stream, context, path):
        return self.packer.unpack(stream_read(stream, self.packer.size, path))[0]

    def _build(self, obj, stream, context, path):
        stream_write(stream, self.packer.pack(obj), self.packer.size, path)
        return obj


INT8 = Fixed("b", "INT8")
INT16 = Fixed("h", "INT16")
INT32 = Fixed("i", "INT32")
INT64 = Fixed("q", "INT64")
UINT16 = Fixed("H", "UINT16")
UINT32 = Fixed("I", "UINT32")
FLOAT64 = Fixed("d", "FLOAT64")
BOOL = Fixed("?", "BOOL")


class Uuid(WireType):
    def __repr__(self):
        return "UUID"

    def emit_read(self, g, target):
        return [f"{target}, pos = _ruuid(buf, pos, end)"]

    def emit_write(self, g, expr, out="out"):
        return [f"_wuuid({out}, {expr})"]

    def _parse(self, stream, context, path):
        return uuid.UUID(bytes=stream_read(stream, 16, path))

    def _build(self, obj, stream, context, path):
        stream_write(stream, obj.bytes, 16, path)
        return obj


UUID = Uuid()


def _read_length_stream(stream, compact, what, path):
    if compact:
        value, shift = 0, 0
        for _ in range(5):
            b = stream_read(stream, 1, path)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value - 1
            shift += 7
        raise DecodeError("unsigned varint longer than 5 bytes")
    size = 2 if what == "string" else 4
    return int.from_bytes(stream_read(stream, size, path), "big", signed=True)


def emit_read_length(g, var, compact, what):
    """Lines reading a declared length into `var` (-1 or below: null), checked against the frame."""
    if compact:
        lines = [f"{var} = buf[pos]", f"if {var} < 128:", "    pos += 1", "else:",
                 f"    {var}, pos = _ruv(buf, pos)"]
        if what == "string":  # Kafka caps strings at 32767 bytes, compact or not
            lines += [f"    if {var} > 0x8000:", f"        raise _DecodeError('string length %d exceeds 32767' % ({var} - 1))"]
        lines.append(f"{var} -= 1")
    elif what == "string":
        lines = [f"{var}, = {g.struct('>h')}.unpack_from(buf, pos)", "pos += 2"]
    else:
        lines = [f"{var}, = {g.struct('>i')}.unpack_from(buf, pos)", "pos += 4"]
    return lines + [f"if {var} > end - pos:",
                    f"    raise _DecodeError('{what} length %d exceeds the %d bytes left' % ({var}, end - pos))"]


def emit_write_length(g, n, compact, what, out):
    """Lines writing the non-null length `n` (an expression naming a local)."""
    if compact:
        lines = [f"if {n} < 127:", f"    {out}.append({n} + 1)", "else:"]
        if what == "string":
            lines += [f"    if {n} > 0x7FFF:", f"        raise _EncodeError('string of %d bytes is too long' % {n})"]
        return lines + [f"    {out} += _uv({n} + 1)"]
    return [f"{out} += {g.struct('>h' if what == 'string' else '>i')}.pack({n})"]


def emit_write_null(compact, what, out):
    if compact:
        return [f"{out}.append(0)"]
    null = b"\xff" * (2 if what == "string" else 4)
    return [f"{out} += {null!r}"]


def _null_branches(nullable, what, n, target, present):
    """Wrap `present` lines with the null handling of a decoded length `n`."""
    if nullable:
        return [f"if {n} < 0:", f"    {target} = None", "else:"] + _indent(present)
    return [f"if {n} < 0:", f"    raise _DecodeError('non-nullable {what} is null')"] + present


class _Sized(WireType):
    """Common shape of length-prefixed types: compact (flexible) or classic, nullable or not."""

    what = ""

    def __init__(self, compact, nullable):
        super().__init__()
        self.compact = compact
        self.nullable = nullable

    def __repr__(self):
        return f"{type(self).__name__}(compact={self.compact}, nullable={self.nullable})"

    def value_expr(self, start, stop):
        raise NotImplementedError

    def emit_read(self, g, target):
        n = g.var("n")
        present = [f"{target} = {self.value_expr('pos', f'pos + {n}')}", f"pos += {n}"]
        return emit_read_length(g, n, self.compact, self.what) + _null_branches(
            self.nullable, self.what, n, target, present)

    def emit_write(self, g, expr, out="out"):
        data, n = g.var("d"), g.var("n")
        present = [f"{data} = {self.data_expr(expr)}", f"{n} = len({data})"]
        present += emit_write_length(g, n, self.compact, self.what, out) + [f"{out} += {data}"]
        if self.nullable:
            return [f"if {expr} is None:"] + _indent(emit_write_null(self.compact, self.what, out)) + [
                "else:"] + _indent(present)
        return [f"if {expr} is None:", f"    raise _EncodeError('null for a non-nullable {self.what}')"] + present

    def data_expr(self, expr):
        return expr

    def _read_length(self, stream, path):
        n = _read_length_stream(stream, self.compact, self.what, path)
        if n < 0 and not self.nullable:
            raise DecodeError(f"non-nullable {self.what} is null")
        return n

    def _write_length(self, stream, obj, n, path):
        if obj is None and not self.nullable:
            raise EncodeError(f"null for non-nullable {self.what}")
        out = bytearray()
        write_length(out, n, self.compact, self.what)
        stream_write(stream, bytes(out), len(out), path)


class String(_Sized):
    what = "string"

    def value_expr(self, start, stop):
        return f"str(buf[{start}:{stop}], 'utf-8')"

    def data_expr(self, expr):
        return f"{expr}.encode('utf-8')"

    def _parse(self, stream, context, path):
        n = self._read_length(stream, path)
        return None if n < 0 else stream_read(stream, n, path).decode("utf-8")

    def _build(self, obj, stream, context, path):
        data = None if obj is None else obj.encode("utf-8")
        self._write_length(stream, obj, -1 if data is None else len(data), path)
        if data:
            stream_write(stream, data, len(data), path)
        return obj


class Bytes(_Sized):
    what = "bytes"

    def value_expr(self, start, stop):
        return f"bytes(buf[{start}:{stop}])"

    def _parse(self, stream, context, path):
        n = self._read_length(stream, path)
        return None if n < 0 else stream_read(stream, n, path)

    def _build(self, obj, stream, context, path):
        self._write_length(stream, obj, -1 if obj is None else len(obj), path)
        if obj:
            stream_write(stream, bytes(obj), len(obj), path)
        return obj


class Records(Bytes):
    """Record batches: decoded as a memoryview slice of the frame, encoded untouched (or as a slot)."""

    what = "records"
    may_slot = True

    def value_expr(self, start, stop):
        return f"buf[{start}:{stop}]"

    def emit_write(self, g, expr, out="out"):
        return [f"{out} = _wrec(w, {out}, {expr}, {self.compact}, {self.nullable})"]


class Array(_Sized):
    what = "array"

    def __init__(self, element, compact, nullable):
        super().__init__(compact, nullable)
        self.element = element
        self.may_slot = element.may_slot

    def __repr__(self):
        return f"Array({self.element!r}, compact={self.compact}, nullable={self.nullable})"

    def emit_read(self, g, target):
        n, lst, item = g.var("n"), g.var("lst"), g.var("x")
        element = self.element
        if isinstance(element, Fixed):
            fill = [f"{target} = list(_unpack_from('>%d{element.fmt}' % {n}, buf, pos))",
                    f"pos += {n} * {element.packer.size}"]
        elif isinstance(element, Message):
            fn = element.parser_name(g)
            fill = [f"{target} = {lst} = []", f"for _ in range({n}):",
                    f"    {item}, pos = {fn}(buf, pos, end)", f"    {lst}.append({item})"]
        else:
            fill = [f"{target} = {lst} = []", f"for _ in range({n}):"]
            fill += _indent(element.emit_read(g, item) + [f"{lst}.append({item})"])
        return emit_read_length(g, n, self.compact, "array") + _null_branches(
            self.nullable, "array", n, target, fill)

    def emit_write(self, g, expr, out="out"):
        value, item, n = g.var("a"), g.var("x"), g.var("n")
        element = self.element
        present = [f"{n} = len({value})"] + emit_write_length(g, n, self.compact, "array", out)
        if isinstance(element, Fixed):
            present += [f"if {n}:", f"    {out} += _pack('>%d{element.fmt}' % {n}, *{value})"]
        else:
            present += [f"for {item} in {value}:"] + _indent(element.emit_write(g, item, out))
        lines = [f"{value} = {expr}"]
        if self.nullable:
            return lines + [f"if {value} is None:"] + _indent(emit_write_null(self.compact, "array", out)) + [
                "else:"] + _indent(present)
        return lines + [f"if {value} is None:", "    raise _EncodeError('null for a non-nullable array')"] + present

    def _parse(self, stream, context, path):
        n = self._read_length(stream, path)
        return None if n < 0 else [self.element._parse(stream, context, path) for _ in range(n)]

    def _build(self, obj, stream, context, path):
        self._write_length(stream, obj, -1 if obj is None else len(obj), path)
        for item in obj or ():
            self.element._build(item, stream, context, path)
        return obj


class NullableStruct(WireType):
    """A struct that may be null: a marker then the struct. The marker is an int8 (-1 null, 1 present),
    or in a tagged field an unsigned varint (0 null, 1 present), as Kafka's generated code writes them."""

    def __init__(self, message, tagged=False):
        super().__init__()
        self.message = message
        self.tagged = tagged
        self.null_marker = b"\x00" if tagged else b"\xff"
        self.may_slot = message.may_slot

    def __repr__(self):
        return f"NullableStruct({self.message!r}{', tagged=True' if self.tagged else ''})"

    def _is_null(self, marker: int) -> bool:
        return marker == 0 if self.tagged else marker >= 128

    def emit_read(self, g, target):
        marker = g.var("m")
        test = f"{marker} == 0" if self.tagged else f"{marker} >= 128"
        return [f"{marker} = buf[pos]", "pos += 1",
                f"if {test}:", f"    {target} = None", "else:"] + _indent(
            self.message.emit_read(g, target))

    def emit_write(self, g, expr, out="out"):
        value = g.var("s")
        return [f"{value} = {expr}", f"if {value} is None:", f"    {out} += {self.null_marker!r}", "else:",
                f"    {out} += b'\\x01'"] + _indent(self.message.emit_write(g, value, out))

    def _parse(self, stream, context, path):
        marker = stream_read(stream, 1, path)[0]
        return None if self._is_null(marker) else self.message._parse(stream, context, path)

    def _build(self, obj, stream, context, path):
        stream_write(stream, self.null_marker if obj is None else b"\x01", 1, path)
        if obj is not None:
            self.message._build(obj, stream, context, path)
        return obj


class Message(WireType):
    """One version of a struct: regular fields in order, then (if flexible) its tagged fields.

    fields: ((attr, type), ...) on the wire in this version;
    tagged: ((tag, attr, type, default), ...) in this version;
    absent: ((attr, default, ignorable), ...) fields of the class that this version lacks.
    """

    def __init__(self, cls, flexible, fields, tagged=(), absent=(), label=""):
        super().__init__()
        self.cls = cls
        self.flexible = flexible
        self.fields = tuple(fields)
        self.tagged = tuple(sorted(tagged, key=lambda t: t[0]))
        self.absent = tuple(absent)
        self.label = label or cls.__qualname__
        self.may_slot = any(t.may_slot for _, t in self.fields) or any(t[2].may_slot for t in self.tagged)
        self._compiled = None

    def __repr__(self):
        return f"Message({self.label})"

    # -- compiled --------------------------------------------------------------------------
    def parser_name(self, g):
        name = g.parsers.get(id(self))
        if name is None:
            name = g.parsers[id(self)] = g.var("_parse")
            g.code.append("\n".join(self._parser_source(g, name)))
        return name

    def builder_name(self, g):
        name = g.builders.get(id(self))
        if name is None:
            name = g.builders[id(self)] = g.var("_build")
            g.code.append("\n".join(self._builder_source(g, name)))
        return name

    def emit_read(self, g, target):
        return [f"{target}, pos = {self.parser_name(g)}(buf, pos, end)"]

    def emit_write(self, g, expr, out="out"):
        name = self.builder_name(g)
        if self.may_slot:
            return [f"{out} = {name}(w, {out}, {expr})"]
        return [f"{name}(w, {out}, {expr})"]

    def _emitparse(self, code):
        return f"_odr_parse({self.parser_name(Gen.of(code))}, io)"

    def _emitbuild(self, code):
        return f"_odr_build({self.builder_name(Gen.of(code))}, obj, io)"

    def _groups(self):
        """Fields with consecutive fixed-width runs merged (one struct call per run)."""
        run = []
        for attr, wire_type in self.fields:
            if isinstance(wire_type, Fixed):
                run.append((attr, wire_type))
                continue
            if run:
                yield run
                run = []
            yield (attr, wire_type)
        if run:
            yield run

    def _parser_source(self, g, name):
        body = [f"obj = _new({g.ref(self.cls)})"]
        for group in self._groups():
            if isinstance(group, list):
                fmt = ">" + "".join(t.fmt for _, t in group)
                size = struct.calcsize(fmt)
                targets = ", ".join(f"obj.{attr}" for attr, _ in group)
                body += [f"{targets}, = {g.struct(fmt)}.unpack_from(buf, pos)", f"pos += {size}"]
            else:
                attr, wire_type = group
                body += wire_type.emit_read(g, f"obj.{attr}")
        for attr, default, _ in self.absent:
            body.append(f"obj.{attr} = {g.default_expr(default)}")
        for _, attr, _, default in self.tagged:
            body.append(f"obj.{attr} = {g.default_expr(default)}")
        body.append("obj._unknown_tagged_fields = None")
        if self.flexible:  # the common case is an empty tag section: one zero byte
            reader = self._tags_parser(g) if self.tagged else "_runknown"
            body += ["if buf[pos]:", f"    pos = {reader}(buf, pos, end, obj)", "else:", "    pos += 1"]
        body.append("return obj, pos")
        return [f"def {name}(buf, pos, end):"] + _indent(body)

    def _tags_parser(self, g):
        name = g.var("_tags")
        body = ["ntags, pos = _ruv(buf, pos)",
                "if ntags > limit - pos:", "    raise _DecodeError('tag count exceeds the frame')",
                "unknown = None", "for _ in range(ntags):",
                "    tag, stop, pos = _rtag(buf, pos, limit)", "    end = stop"]
        branch = "if"
        for tag, attr, wire_type, _ in self.tagged:
            body += [f"    {branch} tag == {tag}:"] + _indent(wire_type.emit_read(g, f"obj.{attr}"), 2)
            branch = "elif"
        body += ["    else:", "        if unknown is None:", "            unknown = obj._unknown_tagged_fields = []",
                 "        unknown.append((tag, bytes(buf[pos:stop])))", "    pos = stop", "return pos"]
        g.code.append("\n".join([f"def {name}(buf, pos, limit, obj):"] + _indent(body)))
        return name

    def _builder_source(self, g, name):
        body = []
        cls_ref = None
        for attr, default, ignorable in self.absent:
            if ignorable:
                continue
            cls_ref = cls_ref or g.ref(self.cls)
            body += [f"if {g.nondefault_expr(default, 'obj.' + attr)}:",
                     f"    raise _absent({cls_ref}, {attr!r}, {('in ' + self.label)!r})"]
        for group in self._groups():
            if isinstance(group, list):
                fmt = ">" + "".join(t.fmt for _, t in group)
                values = ", ".join(f"obj.{attr}" for attr, _ in group)
                body.append(f"out += {g.struct(fmt)}.pack({values})")
            else:
                attr, wire_type = group
                body += wire_type.emit_write(g, f"obj.{attr}")
        if self.flexible and not self.tagged:
            body += ["if obj._unknown_tagged_fields:", "    _wtags(out, None, obj._unknown_tagged_fields)",
                     "else:", "    out.append(0)"]
        elif self.flexible:
            body.append("tags = None")
            for tag, attr, wire_type, default in self.tagged:
                value = g.var("t")
                body += [f"{value} = obj.{attr}", f"if {g.nondefault_expr(default, value)}:",
                         "    data = bytearray()"]
                body += _indent(wire_type.emit_write(g, value, "data"))
                body += ["    if tags is None:", "        tags = []", f"    tags.append(({tag}, data))"]
            body += ["unknown = obj._unknown_tagged_fields", "if tags is None and not unknown:",
                     "    out.append(0)", "else:", "    _wtags(out, tags, unknown)"]
        body.append("return out")
        return [f"def {name}(w, out, obj):"] + _indent(body)

    def compiled(self):
        """The construct-compiled form (cached), with `parse_fast`/`build_fast` raw functions."""
        if self._compiled is None:
            self.compile()
        return self._compiled

    def compile(self, filename=None):
        code = construct.core.CodeGen()
        gen = Gen.of(code)
        parse_name = self.parser_name(gen)
        build_name = self.builder_name(gen)
        code.append(f"""
            def parseall(io, this):
                return _odr_parse({parse_name}, io)
            def buildall(obj, io, this):
                return _odr_build({build_name}, obj, io)
            compiled = Compiled(parseall, buildall)
        """)
        source = "from construct import Compiled\n" + code.toString()
        if filename:
            with open(filename, "w") as f:
                f.write(source)
        namespace = {"__name__": f"protocol.compiled.{self.label}"}
        exec(compile(source, f"<construct {self.label}>", "exec"), namespace)
        compiled = namespace["compiled"]
        compiled.source = source
        compiled.defersubcon = self
        compiled.parse_fast = namespace[parse_name]
        compiled.build_fast = namespace[build_name]
        self._compiled = compiled
        return compiled

    # -- interpreted (construct's reference path) --------------------------------------------
    def _parse(self, stream, context, path):
        obj = object.__new__(self.cls)
        for attr, wire_type in self.fields:
            setattr(obj, attr, wire_type._parse(stream, context, f"{path} -> {attr}"))
        for attr, default, _ in self.absent:
            setattr(obj, attr, _fresh(default))
        for _, attr, _, default in self.tagged:
            setattr(obj, attr, _fresh(default))
        obj._unknown_tagged_fields = None
        if self.flexible:
            by_tag = {tag: (attr, wire_type) for tag, attr, wire_type, _ in self.tagged}
            count = _read_length_stream(stream, True, "", path) + 1
            for _ in range(count):
                tag = _read_length_stream(stream, True, "", path) + 1
                size = _read_length_stream(stream, True, "", path) + 1
                data = stream_read(stream, size, path)
                if tag in by_tag:
                    attr, wire_type = by_tag[tag]
                    setattr(obj, attr, wire_type.parse(data))
                else:
                    if obj._unknown_tagged_fields is None:
                        obj._unknown_tagged_fields = []
                    obj._unknown_tagged_fields.append((tag, data))
        return obj

    def _build(self, obj, stream, context, path):
        for attr, default, ignorable in self.absent:
            if not ignorable and getattr(obj, attr) != _fresh(default):
                raise absent_field_error(self.cls, attr, f"in {self.label}")
        for attr, wire_type in self.fields:
            wire_type._build(getattr(obj, attr), stream, context, f"{path} -> {attr}")
        if self.flexible:
            known = []
            for tag, attr, wire_type, default in self.tagged:
                value = getattr(obj, attr)
                if value != _fresh(default):
                    known.append((tag, wire_type.build(value)))
            out = bytearray()
            write_tag_section(out, known, obj._unknown_tagged_fields)
            stream_write(stream, bytes(out), len(out), path)
        return obj


def _fresh(default):
    if default is LIST:
        return []
    if isinstance(default, type):
        return default()
    return default
