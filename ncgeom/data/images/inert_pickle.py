"""Pickles as inert data: read a pickle stream without unpickling it, and write Python 2 style pickles.

ncgeom never unpickles a file (a pickle can run any code when loaded). :func:`pickle_as_data` walks the
opcode stream with :func:`pickletools.genops` and builds only plain containers (dict, list, tuple, str, bytes,
int, float, bool, None); a reference to a global becomes an inert :class:`PickleGlobal`, a call (REDUCE) an
inert :class:`PickleCall` whose BUILD state is recorded: nothing is imported, constructed or called, and any
other opcode is refused. The caller then checks the structure it expects (ncgeom.data.images.readers: the official
CIFAR files).

:func:`py2_pickle` writes plain data as Python 2's cPickle wrote the official CIFAR files (protocol 2,
``str`` as SHORT_BINSTRING / BINSTRING, a 2-D uint8 numpy array as ``numpy.core.multiarray._reconstruct``),
for the generated look-alike data sets of the tests and docs.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import reprlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ncgeom.files import quiet_warnings

__all__ = ["PickleGlobal", "PickleCall", "MAX_PICKLE_OPS", "pickle_as_data", "py2_pickle", "one_line", "short_repr"]

#: Most opcodes :func:`pickle_as_data` evaluates. Each builds at most one small Python object (about 150
#: bytes at worst: a list, a dict, a PickleCall), so a pickle costs at most about 300 MB of objects beyond
#: its strings, whatever it declares; the largest official CIFAR file (CIFAR-100's train) has about 150,000.
MAX_PICKLE_OPS = 2_000_000

@dataclass(frozen=True)
class PickleGlobal:
    """A reference to ``module.name`` found in a pickle (GLOBAL / STACK_GLOBAL); never imported."""

    module: str
    name: str


@dataclass
class PickleCall:
    """A call ``func(*args)`` found in a pickle (REDUCE), with the ``state`` of a following BUILD; never called."""

    func: Any
    args: Any
    state: Any = None


_CONSTANT_OPS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False, "EMPTY_DICT": dict, "EMPTY_LIST": list,
                 "EMPTY_TUPLE": tuple}
_VALUE_OPS = {"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT", "STRING",
              "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES",
              "SHORT_BINBYTES", "BINBYTES8"}


def pickle_as_data(data: bytes, *, source: str = "pickle", max_ops: int = MAX_PICKLE_OPS) -> Any:
    """The value of a pickle stream as plain data, without unpickling it.

    Walks the opcodes with :func:`pickletools.genops` and evaluates only the data-building ones: numbers,
    strings (Python 2 strings come back as latin-1 ``str``), bytes, None, booleans, tuples, lists, dicts,
    the memo, MARK. GLOBAL / STACK_GLOBAL become :class:`PickleGlobal`, REDUCE a :class:`PickleCall` and
    BUILD sets its ``state``: nothing is imported, constructed or called. Any other opcode (NEWOBJ, INST,
    OBJ, PERSID, EXT*, ...) is refused, and so is a stream of more than ``max_ops`` opcodes (the objects
    built are bounded: a small file of one-byte opcodes could otherwise build a list per byte).

    Raises
    ------
    ValueError
        "<source>: ..." for a truncated or malformed stream, a refused opcode or too many opcodes.
    """
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}

    def pop_mark() -> list[Any]:
        if not marks:
            raise ValueError("no MARK on the stack")
        start = marks.pop()
        items = stack[start:]
        del stack[start:]
        return items

    with quiet_warnings():  # pickletools warns on some malformed strings (invalid escapes)
        try:
            for count, (op, arg, pos) in enumerate(pickletools.genops(io.BytesIO(data)), start=1):
                if count > max_ops:
                    raise ValueError(f"more than {max_ops} opcodes (a CIFAR file has about 150,000 at most)")
                name = op.name
                if name in ("PROTO", "FRAME"):
                    continue
                if name == "STOP":
                    if len(stack) != 1 or marks:
                        raise ValueError("unbalanced stack at STOP")
                    return stack[0]
                if name in _CONSTANT_OPS:
                    value = _CONSTANT_OPS[name]
                    stack.append(value() if callable(value) else value)
                elif name in _VALUE_OPS:
                    stack.append(arg)
                elif name == "MARK":
                    marks.append(len(stack))
                elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                    n = int(name[-1])
                    if len(stack) < n:
                        raise ValueError(f"{name} on a short stack")
                    items = stack[len(stack) - n:]
                    del stack[len(stack) - n:]
                    stack.append(tuple(items))
                elif name == "TUPLE":
                    stack.append(tuple(pop_mark()))
                elif name == "LIST":
                    stack.append(pop_mark())
                elif name == "DICT":
                    items = pop_mark()
                    stack.append(_set_items({}, items))
                elif name == "APPEND":
                    value = stack.pop()
                    _list_on_top(stack).append(value)
                elif name == "APPENDS":
                    items = pop_mark()
                    _list_on_top(stack).extend(items)
                elif name == "SETITEM":
                    value = stack.pop()
                    key = stack.pop()
                    _set_items(_dict_on_top(stack), [key, value])
                elif name == "SETITEMS":
                    items = pop_mark()
                    _set_items(_dict_on_top(stack), items)
                elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                    memo[_memo_key(arg)] = stack[-1]
                elif name == "MEMOIZE":
                    memo[len(memo)] = stack[-1]
                elif name in ("GET", "BINGET", "LONG_BINGET"):
                    if _memo_key(arg) not in memo:
                        raise ValueError(f"memo key {arg} read before it was written")
                    stack.append(memo[_memo_key(arg)])
                elif name == "GLOBAL":
                    module, _, attr = str(arg).partition(" ")
                    stack.append(PickleGlobal(module, attr))
                elif name == "STACK_GLOBAL":
                    attr = stack.pop()
                    module = stack.pop()
                    if not (isinstance(module, str) and isinstance(attr, str)):
                        raise ValueError("STACK_GLOBAL needs two strings")
                    stack.append(PickleGlobal(module, attr))
                elif name == "REDUCE":
                    args = stack.pop()
                    func = stack.pop()
                    stack.append(PickleCall(func, args))
                elif name == "BUILD":
                    state = stack.pop()
                    target = stack[-1]
                    if not isinstance(target, PickleCall) or target.state is not None:
                        raise ValueError("BUILD of something that is not a fresh REDUCE")
                    target.state = state
                else:
                    raise ValueError(f"refused pickle opcode {name} at byte {pos}")
        except ValueError as exc:
            raise ValueError(f"{source}: not a readable pickle of plain data ({one_line(exc)})") from None
        except (IndexError, TypeError, EOFError, OverflowError, UnicodeDecodeError) as exc:
            detail = f"{type(exc).__name__}: {one_line(exc)}"
            raise ValueError(f"{source}: not a readable pickle of plain data ({detail})") from None
    raise ValueError(f"{source}: truncated pickle (no STOP opcode)")


def _memo_key(arg: Any) -> int:
    if not isinstance(arg, int):
        raise ValueError(f"memo key {arg!r} is not an integer")
    return arg


def _list_on_top(stack: list[Any]) -> list[Any]:
    if not stack or not isinstance(stack[-1], list):
        raise ValueError("APPEND to something that is not a list")
    return stack[-1]


def _dict_on_top(stack: list[Any]) -> dict[Any, Any]:
    if not stack or not isinstance(stack[-1], dict):
        raise ValueError("SETITEM on something that is not a dict")
    return stack[-1]


def _set_items(target: dict[Any, Any], items: list[Any]) -> dict[Any, Any]:
    if len(items) % 2:
        raise ValueError("odd number of items for a dict")
    for key, value in zip(items[::2], items[1::2]):
        if isinstance(key, bytes):
            key = key.decode("latin-1")
        if not isinstance(key, (str, int)) or isinstance(key, bool):
            raise ValueError(f"dict key of type {type(key).__name__}")
        target[key] = value
    return target


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (whitespace runs, newlines included, become one space)."""
    return " ".join(str(exc).split())


class _ShortRepr(reprlib.Repr):
    """reprlib with the inert records and bytes abbreviated without building their full repr first."""

    def __init__(self) -> None:
        super().__init__()  # keyword arguments only from Python 3.12
        self.maxlevel, self.maxstring, self.maxlong, self.maxother = 3, 40, 40, 60
        self.maxtuple = self.maxlist = self.maxdict = self.maxset = 6

    def repr_bytes(self, value: bytes, level: int) -> str:
        head = repr(value[:self.maxstring])
        return head if len(value) <= self.maxstring else f"{head[:-1]}...' ({len(value)} bytes)"

    def repr_PickleGlobal(self, value: PickleGlobal, level: int) -> str:
        return f"{str(value.module)[:self.maxstring]}.{str(value.name)[:self.maxstring]}"

    def repr_PickleCall(self, value: PickleCall, level: int) -> str:
        if level <= 0:
            return "call(...)"
        return f"call({self.repr1(value.func, level - 1)}, {self.repr1(value.args, level - 1)})"


_SHORT = _ShortRepr()


def short_repr(value: Any) -> str:
    """A repr of a value built by :func:`pickle_as_data` for an error message: at most about 100 characters.

    Nesting beyond 3 levels, long containers, strings and integers are abbreviated (reprlib); a value
    too deeply nested even for that, or an integer too long to print, is named by its type. Never raises.
    """
    try:
        text = _SHORT.repr(value)
    except (RecursionError, ValueError):  # ValueError: an int beyond sys.get_int_max_str_digits()
        if isinstance(value, int):
            text = f"<an integer of {value.bit_length()} bits>"
        else:
            text = f"<a {type(value).__name__} too large or too deep to show>"
    return " ".join(text.split())[:120]



def py2_pickle(obj: Any) -> bytes:
    """A protocol-2 pickle of plain data as Python 2's cPickle wrote the official CIFAR files.

    Strings are Python 2 ``str`` (SHORT_BINSTRING / BINSTRING), a 2-D uint8 numpy array is
    ``numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), 'b')`` with the BUILD state
    ``(1, shape, dtype('u1'), False, raw bytes)``. Reading back goes through :func:`pickle_as_data`.
    """
    out = io.BytesIO()
    out.write(pickle.PROTO + b"\x02")
    _emit(out, obj)
    out.write(pickle.STOP)
    return out.getvalue()


def _emit(out: io.BytesIO, obj: Any) -> None:
    if obj is None:
        out.write(pickle.NONE)
    elif isinstance(obj, bool):
        out.write(pickle.NEWTRUE if obj else pickle.NEWFALSE)
    elif isinstance(obj, int):
        if 0 <= obj < 256:
            out.write(pickle.BININT1 + obj.to_bytes(1, "little"))
        elif 0 <= obj < 65536:
            out.write(pickle.BININT2 + obj.to_bytes(2, "little"))
        else:
            out.write(pickle.BININT + obj.to_bytes(4, "little", signed=True))
    elif isinstance(obj, (str, bytes)):
        raw = obj.encode("latin-1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            out.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            out.write(pickle.BINSTRING + len(raw).to_bytes(4, "little") + raw)
    elif isinstance(obj, tuple):
        if not obj:
            out.write(pickle.EMPTY_TUPLE)
        elif len(obj) <= 3:
            for item in obj:
                _emit(out, item)
            out.write((pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3)[len(obj) - 1])
        else:
            out.write(pickle.MARK)
            for item in obj:
                _emit(out, item)
            out.write(pickle.TUPLE)
    elif isinstance(obj, list):
        out.write(pickle.EMPTY_LIST)
        for start in range(0, len(obj), 1000):  # cPickle's batch size
            out.write(pickle.MARK)
            for item in obj[start:start + 1000]:
                _emit(out, item)
            out.write(pickle.APPENDS)
    elif isinstance(obj, dict):
        out.write(pickle.EMPTY_DICT)
        if obj:
            out.write(pickle.MARK)
            for key, value in obj.items():
                _emit(out, key)
                _emit(out, value)
            out.write(pickle.SETITEMS)
    elif isinstance(obj, np.ndarray) and obj.dtype == np.uint8 and obj.ndim == 2:
        out.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n" + pickle.GLOBAL + b"numpy\nndarray\n")
        _emit(out, (0,))
        _emit(out, "b")
        out.write(pickle.TUPLE3 + pickle.REDUCE + pickle.MARK)
        _emit(out, 1)
        _emit(out, tuple(int(s) for s in obj.shape))
        out.write(pickle.GLOBAL + b"numpy\ndtype\n")
        _emit(out, ("u1", 0, 1))
        out.write(pickle.REDUCE)
        _emit(out, (3, "|", None, None, None, -1, -1, 0))
        out.write(pickle.BUILD)
        _emit(out, False)
        _emit(out, np.ascontiguousarray(obj).tobytes())
        out.write(pickle.TUPLE + pickle.BUILD)
    else:
        raise TypeError(f"cannot write {type(obj).__name__} in a CIFAR-like pickle")
