"""The wire format: one JSON line per message, values as plain data or opaque handles.

Why a module: both processes speak it, and what a value may be when it
crosses is the heart of the guarantee. :func:`encode` is the sender's side
(advisory when the solution sends); :func:`decode` is the receiver's, built
from the receiver's own classes, and on the tests' side (``strict``) it is
what decides a value is plain data.

Example:
    >>> decode(encode({"a": (1, 2.5)}, to_handle=repr), from_handle=repr)
    {'a': (1, 2.5)}
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Callable
from typing import Any

from agentic_loop.judges.sandbox.runner.common import (
    MAX_DEPTH,
    MAX_LINE,
    ChannelError,
    NotPlainData,
)

_NAN = ("NaN in the solution's value: NaN is unequal to everything, so a check such as "
        "`!= 6` would pass it (a task whose answer is undefined should ask for None)")


def line_reader(fd: int) -> Callable[[], bytes]:
    """A function that returns the next line from ``fd`` (without its newline)."""
    buf = bytearray()

    def read_line() -> bytes:
        while True:
            end = buf.find(b"\n")
            if end >= 0:
                line = bytes(buf[:end])
                del buf[: end + 1]
                return line
            if len(buf) > MAX_LINE:
                raise ChannelError("a message from the other process is too long")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise ChannelError("the solution's process ended")
            buf.extend(chunk)

    return read_line


def write_line(fd: int, obj: Any) -> None:
    """Send ``obj`` as one compact JSON line, all of it."""
    data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_EXACT = (type(None), bool, int, float, str)
_FACTORIES = {t.__name__: t for t in (list, int, set, dict, str, float, tuple, frozenset, bytes)}
_WHEN_FIELDS = {"datetime": 7, "date": 3, "time": 4, "timedelta": 3}


def _type_names(kind: type) -> frozenset[str]:
    """``module.qualname`` of ``kind`` and its bases: how a library type is recognised."""
    return frozenset(f"{getattr(k, '__module__', '')}.{getattr(k, '__qualname__', '')}"
                     for k in kind.__mro__)


def _offset(value: Any) -> int | None:
    off = value.utcoffset()
    return None if off is None else (off.days * 86400 + off.seconds) * 10**6 + off.microseconds


def _when(value: Any, names: frozenset[str]) -> list[Any] | None:
    """A ``datetime`` value as ``[kind, fields, UTC offset in µs]``; ``None`` for anything else."""
    if "datetime.datetime" in names:
        fields = [value.year, value.month, value.day, value.hour, value.minute, value.second,
                  value.microsecond]
        return ["datetime", [int(v) for v in fields], _offset(value)]
    if "datetime.date" in names:
        return ["date", [int(value.year), int(value.month), int(value.day)], None]
    if "datetime.time" in names:
        fields = [value.hour, value.minute, value.second, value.microsecond]
        return ["time", [int(v) for v in fields], _offset(value)]
    if "datetime.timedelta" in names:
        return ["timedelta", [int(value.days), int(value.seconds), int(value.microseconds)], None]
    return None


def encode(value: Any, to_handle: Callable[[Any], Any], depth: int = 0) -> Any:
    """A JSON-able form of ``value``: plain data by value, anything else through ``to_handle``.

    A subclass of a plain type crosses as that plain type, so an ``int`` whose
    ``__eq__`` always says True arrives as its ``int`` value; namedtuples,
    ``OrderedDict``, ``Counter``, ``defaultdict`` of a builtin, ``deque``,
    ``datetime`` values and numeric numpy arrays cross as data the receiver
    rebuilds with its own classes. What the solution's side sends is advisory:
    only :func:`decode` on the tests' side decides what a value is.

    >>> class Liar(int):
    ...     def __eq__(self, other):
    ...         return True
    >>> encode([Liar(3), (2.5, "x"), {True: None}], to_handle=repr)
    {'l': [3, {'t': [2.5, 'x']}, {'d': [[True, None]]}]}
    """
    kind = type(value)
    if kind in _EXACT:
        return value
    if depth > MAX_DEPTH:
        return to_handle(value)

    def enc(item: Any) -> Any:
        return encode(item, to_handle, depth + 1)

    if isinstance(value, int):  # bool is exact, so this is a subclass: IntEnum, a liar
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    names = _type_names(kind)
    if isinstance(value, tuple):
        items = [enc(v) for v in tuple.__iter__(value)]
        fields = getattr(kind, "_fields", None)
        if (type(fields) is tuple and len(fields) == len(items) and kind.__name__.isidentifier()
                and all(type(f) is str and f.isidentifier() and f[0] != "_" for f in fields)):
            return {"nt": [kind.__name__, list(fields), items]}
        return {"t": items}
    if isinstance(value, list):
        return {"l": [enc(v) for v in list.__iter__(value)]}
    if isinstance(value, frozenset):
        return {"f": [enc(v) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"s": [enc(v) for v in set.__iter__(value)]}
    if isinstance(value, dict):
        pairs = [[enc(k), enc(v)] for k, v in dict.items(value)]
        factory = getattr(value, "default_factory", None)
        factory_name = next((k for k, v in _FACTORIES.items() if v is factory), None)
        if "collections.Counter" in names:
            return {"ctr": pairs}
        if "collections.OrderedDict" in names:
            return {"od": pairs}
        if "collections.defaultdict" in names and (factory is None or factory_name):
            return {"dd": [factory_name, pairs]}
        return {"d": pairs}
    if isinstance(value, bytearray):
        return {"ba": bytearray.hex(value)}
    if isinstance(value, bytes):
        return {"b": bytes.hex(value)}
    if isinstance(value, complex):
        return {"c": [float(value.real), float(value.imag)]}
    if kind is range:
        return {"r": [value.start, value.stop, value.step]}
    if isinstance(value, BaseException):  # by type, arguments and plain attributes
        attrs = {k: v for k, v in vars(value).items() if not k.startswith("__")}
        return {"e": [to_handle(kind), enc(tuple(value.args)), enc(attrs)]}
    if "fractions.Fraction" in names:
        return {"q": [int(value.numerator), int(value.denominator)]}
    if names & {"decimal.Decimal", "_decimal.Decimal"}:
        return {"m": str(value)}
    if "collections.deque" in names:
        return {"dq": [[enc(v) for v in value], value.maxlen]}
    when = _when(value, names)
    if when is not None:
        return {"dt": when}
    if "numpy.ndarray" in names and value.dtype.kind in "biufc":
        return {"np": [value.dtype.str, [int(n) for n in value.shape], enc(value.tolist())]}
    if "numpy.generic" in names:
        item = value.item()
        if type(item) is not kind:
            return enc(item)
    return to_handle(value)


def decode(obj: Any, from_handle: Callable[[dict[str, Any]], Any], *,
           strict: bool = False) -> Any:
    """The inverse of :func:`encode`, built from this process's own classes.

    Raises ``ValueError`` (or ``TypeError``, ``ArithmeticError``) on anything
    malformed. ``strict`` is the tests' side: a NaN anywhere in the value
    raises :class:`NotPlainData`, since no comparison can check it.

    >>> decode({"nt": ["Point", ["x", "y"], [1, 2]]}, from_handle=repr)
    Point(x=1, y=2)
    >>> try:
    ...     decode({"l": [1.5, {"c": [float("nan"), 0.0]}]}, from_handle=repr, strict=True)
    ... except NotPlainData as err:
    ...     print(str(err)[:28])
    NaN in the solution's value:
    """
    if type(obj) in _EXACT:
        if strict and type(obj) is float and obj != obj:
            raise NotPlainData(_NAN)
        return obj
    if type(obj) is not dict or not obj:
        raise ValueError("malformed value")
    if "h" in obj:
        return from_handle(obj)
    (tag, body), = obj.items()

    def sub(item: Any) -> Any:
        return decode(item, from_handle, strict=strict)

    value = _rebuild(tag, body, sub)
    if strict and (type(value) is complex and value != value
                   or tag == "m" and value.is_nan()):
        raise NotPlainData(_NAN)
    return value


def _rebuild(tag: str, body: Any, sub: Callable[[Any], Any]) -> Any:
    """One tagged value of :func:`encode`, made here from ``body`` (already plain JSON)."""
    import collections  # noqa: PLC0415 - loaded at start-up anyway, by typing

    if tag in ("l", "t", "s", "f") and type(body) is list:
        return {"l": list, "t": tuple, "s": set, "f": frozenset}[tag]([sub(v) for v in body])
    if tag in ("d", "od", "ctr") and type(body) is list:
        pairs = [(sub(k), sub(v)) for k, v in body]
        if tag == "ctr":
            return collections.Counter(dict(pairs))
        return (dict if tag == "d" else collections.OrderedDict)(pairs)
    if tag == "dd" and type(body) is list and len(body) == 2 and type(body[1]) is list:
        if body[0] is not None and body[0] not in _FACTORIES:
            raise ValueError(f"malformed defaultdict factory {body[0]!r}")
        factory = None if body[0] is None else _FACTORIES[body[0]]
        return collections.defaultdict(factory, [(sub(k), sub(v)) for k, v in body[1]])
    if tag == "nt" and type(body) is list and len(body) == 3 and type(body[2]) is list:
        if type(body[0]) is not str or type(body[1]) is not list:
            raise ValueError("malformed namedtuple")
        return collections.namedtuple(body[0], body[1])(*[sub(v) for v in body[2]])
    if tag == "dq" and type(body) is list and len(body) == 2 and type(body[0]) is list:
        if body[1] is not None and type(body[1]) is not int:
            raise ValueError("malformed deque")
        return collections.deque([sub(v) for v in body[0]], body[1])
    if tag == "r" and type(body) is list and all(type(v) is int for v in body):
        return range(*body)
    if tag == "e" and type(body) is list and len(body) == 3:
        cls, args, attrs = sub(body[0]), sub(body[1]), sub(body[2])
        if not (isinstance(cls, type) and issubclass(cls, BaseException)
                and type(args) is tuple and type(attrs) is dict):
            raise ValueError("malformed exception")
        base = next(c for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c)
        return make_exception(cls, args, attrs, base)
    if tag in ("b", "ba") and type(body) is str:
        return (bytes if tag == "b" else bytearray).fromhex(body)
    if tag == "c" and type(body) is list and len(body) == 2 and all(
            type(v) in (int, float) for v in body):
        return complex(body[0], body[1])
    if tag == "q" and type(body) is list and len(body) == 2 and all(type(v) is int for v in body):
        import fractions  # noqa: PLC0415 - rare: keeps start-up fast

        return fractions.Fraction(body[0], body[1])
    if tag == "m" and type(body) is str:
        import decimal  # noqa: PLC0415

        return decimal.Decimal(body)
    if tag == "dt" and type(body) is list and len(body) == 3:
        return _rebuild_when(*body)
    if tag == "np" and type(body) is list and len(body) == 3:
        return _rebuild_array(body[0], body[1], sub(body[2]))
    raise ValueError(f"malformed value tag {tag!r}")


def make_exception(cls: type[BaseException], args: tuple[Any, ...], attrs: dict[Any, Any],
                   fallback: Callable[..., BaseException]) -> BaseException:
    """An exception of ``cls`` made here, with the solution's ``args`` and plain attributes.

    >>> import json
    >>> err = make_exception(json.JSONDecodeError, ("Expecting value",), {"pos": 0}, ValueError)
    >>> type(err).__name__, str(err), err.pos
    ('JSONDecodeError', 'Expecting value', 0)
    """
    try:
        exc = cls(*args)
    except Exception:  # noqa: BLE001 - a library class that wants other arguments
        try:
            exc = cls.__new__(cls, *args)  # sets args; the attributes follow
        except Exception:  # noqa: BLE001
            exc = fallback(*args)
    for key, value in attrs.items():
        if type(key) is str and key.isidentifier() and not key.startswith("__"):
            try:
                setattr(exc, key, value)
            except (AttributeError, TypeError):
                pass  # a read-only attribute keeps the class's own value
    return exc


def _rebuild_when(kind: Any, fields: Any, offset: Any) -> Any:
    import datetime as dt  # noqa: PLC0415

    if (kind not in _WHEN_FIELDS or type(fields) is not list
            or len(fields) != _WHEN_FIELDS[kind] or not all(type(v) is int for v in fields)
            or (offset is not None and type(offset) is not int)):
        raise ValueError("malformed date or time")
    tz = None if offset is None else dt.timezone(dt.timedelta(microseconds=offset))
    if kind == "datetime":
        return dt.datetime(*fields).replace(tzinfo=tz)
    if kind == "time":
        return dt.time(*fields).replace(tzinfo=tz)
    return (dt.date if kind == "date" else dt.timedelta)(*fields)


def _rebuild_array(dtype_name: Any, shape: Any, data: Any) -> Any:
    """A numeric numpy array from its dtype, shape and (already decoded) nested lists."""
    if type(dtype_name) is not str or type(shape) is not list or not all(
            type(n) is int and n >= 0 for n in shape):
        raise ValueError("malformed array")
    try:
        import numpy  # noqa: PLC0415
    except ImportError:
        raise NotPlainData("a numpy array, but numpy cannot be imported by the tests") from None
    dtype = numpy.dtype(dtype_name)
    if dtype.kind not in "biufc":
        raise ValueError(f"malformed array dtype {dtype_name!r}")
    return numpy.array(data, dtype=dtype).reshape(shape)
