"""Reading Kafka's JSON message specs into a small model the emitter walks."""

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "string", "bytes",
              "records", "uuid"}


def strip_comments(text):
    """Remove `//` comments outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_json(path):
    return json.loads(strip_comments(Path(path).read_text()))


@dataclass(frozen=True)
class Versions:
    """A version range such as "0+", "3-7", "5" or "none"."""

    low: int
    high: int | None  # None: open-ended
    empty: bool = False

    @classmethod
    def parse(cls, text):
        if text is None:
            return None
        text = str(text).strip()
        if text == "none":
            return cls(0, 0, True)
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version):
        if self.empty:
            return False
        return version >= self.low and (self.high is None or version <= self.high)


def snake_case(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s + "_" if keyword.iskeyword(s) else s


@dataclass
class FieldSpec:
    name: str
    type: str
    versions: Versions
    nullable: Versions | None
    tagged: Versions | None
    tag: int | None
    default: object
    ignorable: bool
    flexible: Versions | None  # per-field override of the message's flexible versions
    about: str
    struct: "StructSpec | None" = None  # resolved later for struct and struct-array types

    @property
    def attr(self):
        return snake_case(self.name)

    @property
    def is_array(self):
        return self.type.startswith("[]")

    @property
    def element_type(self):
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self):
        return self.element_type not in PRIMITIVES


@dataclass
class StructSpec:
    name: str
    fields: list
    about: str = ""


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: StructSpec
    structs: dict = field(default_factory=dict)  # name -> StructSpec (every nested/common struct)
    source: str = ""
    latest_unstable: bool = False


def _field(raw, structs, pending):
    versions = Versions.parse(raw.get("versions") or raw.get("taggedVersions"))
    spec = FieldSpec(
        name=raw["name"],
        type=raw["type"],
        versions=versions,
        nullable=Versions.parse(raw.get("nullableVersions")),
        tagged=Versions.parse(raw.get("taggedVersions")),
        tag=raw.get("tag"),
        default=raw.get("default"),
        ignorable=bool(raw.get("ignorable", False)),
        flexible=Versions.parse(raw.get("flexibleVersions")),
        about=raw.get("about", ""),
    )
    if "fields" in raw:
        struct = StructSpec(spec.element_type, [_field(f, structs, pending) for f in raw["fields"]],
                            raw.get("about", ""))
        structs[struct.name] = struct
        spec.struct = struct
    elif spec.is_struct:
        pending.append(spec)
    return spec


def load_message(path):
    raw = load_json(path)
    structs, pending = {}, []
    for common in raw.get("commonStructs", ()):
        structs[common["name"]] = StructSpec(common["name"], [_field(f, structs, pending) for f in common["fields"]])
    root = StructSpec(raw["name"], [_field(f, structs, pending) for f in raw["fields"]])
    for spec in pending:
        spec.struct = structs[spec.element_type]
    return MessageSpec(
        name=raw["name"],
        type=raw["type"],
        api_key=raw.get("apiKey"),
        valid=Versions.parse(raw["validVersions"]),
        flexible=Versions.parse(raw.get("flexibleVersions", "none")),
        root=root,
        structs=structs,
        source=f"{Path(path).parent.name}/{Path(path).name}",
        latest_unstable=bool(raw.get("latestVersionUnstable", False)),
    )
