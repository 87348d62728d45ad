"""Options declared once. A stage's options are the fields of one frozen dataclass, each declared with
:func:`setting` (default, help text, range, registry); from that one declaration come

- the command line's options (:func:`click_options`: flag, type, default, help, choices),
- the Python API's keyword-only signature (:func:`signature_of`: what ``help(pl.answer)`` and a notebook's
  completion show) and its unknown-keyword check with close matches (:func:`split_options`),
- the checks every value passes whichever door it came through (:func:`check`, called by the dataclass's
  ``__post_init__``): a wrong type, a value out of range or an unknown registry name is one
  :class:`~pipeline.core.errors.PipelineError` naming the option as the caller spells it (``--workers 0`` on
  the command line, ``workers=0`` in Python), never a traceback and never a silent clamp.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True, kw_only=True)
... class Toy:
...     top: int = setting(20, help="answers shown", low=1)
...     def __post_init__(self) -> None:
...         check(self)
>>> Toy(top=0)
Traceback (most recent call last):
...
pipeline.core.errors.PipelineError: top=0: must be at least 1
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pipeline.core.checks import DEVICE, as_int, as_real, lone_surrogate, number_kind, unicode_problem
from pipeline.core.errors import PipelineError, UnknownNameError, close_matches, option, register_flag

T = TypeVar("T")
_MISSING: Any = dataclasses.MISSING


@dataclass(frozen=True)
class Option:
    """How one field is offered. flag: the command line's spelling when it is not ``--keyword-with-dashes``
    (``"--browse/--no-browse"`` for a flag pair); registry: a ``pipeline ls`` kind whose names the value takes
    (converted to the canonical name); choices: the accepted strings; low/high: the inclusive range of a
    number; cli/api: offered on the command line / as a keyword of the Python API; kind: the value's kind when
    the annotation does not say it plainly ("int", "float", "bool", "str", "path", "strs", "device": cpu, cuda,
    cuda:N or mps, "any": not checked here); instance_of: a registry option that also takes an object already
    built (one with this attribute: an open executor); needs: the settings without which it does nothing
    (given without them, it is refused: ``--qe`` without ``--baselines``)."""

    help: str
    flag: str | None = None
    registry: str | None = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    above: float | None = None  # an exclusive lower bound (a learning rate: > 0)
    cli: bool = True
    api: bool = True
    kind: str | None = None
    metavar: str | None = None
    instance_of: str | None = None  # a registry option that also takes a built object having this attribute
    # when the value does something: any of (field, values): that field (of the same instance, or of the
    # context the caller passes to check) holds one of values (any of them, for a list; () = any value but
    # its default, None or empty). Given where none holds, the option is refused: it would do nothing.
    needs: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    # a list option whose empty value means something of its own, said in its help (``--models ""``: no
    # backbone, the baselines only); else no names at all are refused (never the default in disguise)
    empty: bool = False


def setting(default: Any = _MISSING, *, help: str, default_factory: Any = _MISSING, **how: Any) -> Any:
    """A dataclass field declared as an option (see :class:`Option` for ``how``)."""
    meta = {"option": Option(help=help, **how)}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Declared:
    """One option of a dataclass: its field name (the Python keyword), declaration, kind and whether None
    is accepted."""

    name: str
    option: Option
    kind: str
    optional: bool
    default: Any

    @property
    def flag(self) -> str:
        return self.option.flag or "--" + self.name.replace("_", "-")


def _kind(annotation: Any) -> tuple[str, bool]:
    """The value kind and optionality of an annotation (a string under ``from __future__ import
    annotations``): ``int | None`` -> ("int", True); ``str | Path`` -> ("path", False)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    alts = [a.strip() for a in text.split("|")]
    optional = "None" in alts or alts == ["Any"]
    alts = [a for a in alts if a != "None"]
    for kind in ("bool", "int", "float"):
        if alts == [kind]:
            return kind, optional
    if any(a.startswith(("tuple[", "Sequence[", "list[")) for a in alts):
        return "strs", optional
    if any(a in ("Path", "os.PathLike") for a in alts):
        return "path", optional
    return "str", optional


_CACHE: dict[type, list[Declared]] = {}


def declared(cls: type) -> list[Declared]:
    """The options of a dataclass, in field order: its own fields first, then those it inherits (the
    method's options before calibration L's, which MethodOptions inherits from LOptions)."""
    if cls not in _CACHE:
        out = []
        own = set(cls.__dict__.get("__annotations__", {}))
        for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in own):
            opt = f.metadata.get("option")
            if opt is None:
                continue
            kind, optional = _kind(f.type)
            default = f.default if f.default is not _MISSING else (
                f.default_factory() if f.default_factory is not _MISSING else _MISSING)  # type: ignore[misc]
            d = Declared(f.name, opt, opt.kind or kind, optional, default)
            if opt.flag and "/" not in opt.flag:
                register_flag(f.name, opt.flag)
            out.append(d)
        _CACHE[cls] = out
    return _CACHE[cls]


# ------------------------------------------------------------------------------------------------ checks


def _num(x: float) -> str:
    """A bound as a person reads it: 4294967295, 0.5."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _label(name: str, value: Any) -> str:
    """An option with its value as the caller's front end spells it (``--workers 0``, ``workers=0``)."""
    shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
    return option(name, shown)


def _checked(d: Declared, value: Any, label: Callable[[str, Any], str] | None = None) -> Any:
    """The value of one option, checked (and canonicalised: registry names, numbers); PipelineError else,
    naming it by ``label(name, value)`` (default: as the caller's front end spells the option)."""
    named = label or _label

    def fail(why: str, shown: Any = value) -> PipelineError:
        return PipelineError(f"{named(d.name, shown)}: {why}")

    if value is None:
        if d.optional:
            return None
        raise fail("a value is required")
    o = d.option
    if d.kind == "any":  # checked where it is read (e.g. a mapping of settings)
        return value
    if d.kind == "bool":
        if not isinstance(value, bool):
            raise fail("expected True or False")
        return value
    if d.kind in ("int", "float"):
        number = as_int(value) if d.kind == "int" else as_real(value)
        if number is None:
            want = "an integer" if d.kind == "int" else "a real number"
            raise fail(f"expected {want}, not {number_kind(value)}")
        if not math.isfinite(number):
            raise fail("must be a finite number")
        value = number
        if o.low is not None and value < o.low:
            raise fail(f"must be at least {_num(o.low)}")
        if o.above is not None and value <= o.above:
            raise fail(f"must be greater than {_num(o.above)}")
        if o.high is not None and value > o.high:
            raise fail(f"must be at most {_num(o.high)}")
        return value
    if d.kind == "strs":
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, Iterable) or not all(isinstance(v, (str, os.PathLike)) for v in value):
            raise fail("expected names (a list of strings, or one string of names joined by commas)")
        names = tuple(_unicode(fail, str(v)) for v in value)
        if not names and d.default != () and not o.empty:  # never "every one" (the default) in disguise
            default = "" if d.default in (None, _MISSING) else f" (leave it out for the default, {','.join(d.default)})"
            raise fail("no names given" + default)
        if o.registry is not None:  # each name canonical (1P is 1p), once: what configs and later stages see
            names = tuple(dict.fromkeys(_canonical(fail, o.registry, n) for n in names))
        return names
    if d.kind == "path":
        if not isinstance(value, (str, os.PathLike)) and not hasattr(value, "path"):
            raise fail("expected a path")
        if isinstance(value, str):
            _unicode(fail, value)
            if not value.strip():
                raise fail("an empty path")
        return value
    if o.instance_of is not None and not isinstance(value, str) and hasattr(value, o.instance_of):
        return value
    if not isinstance(value, str):
        raise fail("expected a string")
    _unicode(fail, value)
    if d.kind == "device":
        if not DEVICE.fullmatch(value.lower()):
            raise fail("expected cpu, cuda, cuda:N or mps")
        return value.lower()  # CPU is cpu (torch takes the lowercase spelling only)
    if o.registry is not None:
        return _canonical(fail, o.registry, value)
    if o.choices:  # a choice in another case is that choice (TEST is test), as a registry name is
        chosen = {c.lower(): c for c in o.choices}.get(value.lower())
        if chosen is None:
            hint = close_matches(value, list(o.choices))
            raise fail(f"expected one of {', '.join(o.choices)}" + (f" (did you mean {', '.join(hint)}?)" if hint else ""))
        return chosen
    return value


def _canonical(fail: Callable[..., PipelineError], kind: str, name: str) -> str:
    """The registered spelling of ``name`` in registry ``kind`` (any case, a synonym); else the caller's
    PipelineError naming the option, with the registry's close matches."""
    from pipeline.core.registry import registry

    try:
        return registry(kind).canonical(name)
    except PipelineError as exc:
        named = fail(str(exc))
        raise (UnknownNameError(str(named)) if isinstance(exc, UnknownNameError) else named) from None


def _unicode(fail: Callable[..., PipelineError], text: str) -> str:
    at = lone_surrogate(text)
    if at is not None:
        raise fail(unicode_problem(text, at), text)
    return text


def check(obj: Any, context: Mapping[str, tuple[str, Any]] | None = None) -> None:
    """Check every declared option of a frozen dataclass instance (call it from ``__post_init__``); values
    are canonicalised in place (a registry name's canonical spelling, ``"1p,2p"`` as a tuple). Then each
    option given (not at its default) whose ``needs`` hold on neither the instance nor ``context``
    ({field: (the option's name as the caller knows it, value)}: settings that live elsewhere, such as the
    method's calibration for the answering options) is refused: it would do nothing. A need whose field is
    on neither is not checked here (the caller that knows it passes it as context)."""
    for d in declared(type(obj)):
        value = getattr(obj, d.name)
        fixed = _checked(d, value)
        if fixed is not value:
            object.__setattr__(obj, d.name, fixed)
    for d in declared(type(obj)):
        if d.option.needs and _given(d, getattr(obj, d.name)):
            _check_needs(obj, d, context or {})


def _given(d: Declared, value: Any) -> bool:
    return value is not None and value != d.default and value not in ((), "", {})


def _check_needs(obj: Any, d: Declared, context: Mapping[str, tuple[str, Any]]) -> None:
    known = []
    for name, values in d.option.needs:
        if name in context:
            shown, have = context[name]
        elif any(x.name == name for x in declared(type(obj))):
            shown, have = name, getattr(obj, name)
        else:
            return  # not decided here
        have = getattr(have, "name", have)  # an open executor: its registry name
        items = have if isinstance(have, (tuple, list)) else (have,)
        if (any(v in values for v in items) if values else have not in (None, (), "", {}) and bool(have)):
            return
        known.append(option(shown) + (f" {' or '.join(map(str, values))}" if values else ""))
    value = getattr(obj, d.name)
    shown = None if isinstance(value, Mapping) else value  # a mapping of settings: the option's name alone
    raise PipelineError(f"{option(d.name) if shown is None else _label(d.name, shown)}: does nothing without "
                        f"{', or '.join(known)}")


def declare(name: str, option: Option, default: Any = _MISSING) -> Declared:
    """One option declared outside a dataclass (a model's hyper-parameter, a count of the baselines): its
    kind is the Option's ``kind`` (required)."""
    if option.kind is None:
        raise ValueError(f"{name}: an option declared alone needs its kind")
    return Declared(name, option, option.kind, default is None, default)


def check_mapping(given: Any, options: Sequence[Declared], label: Callable[[str, Any], str], what: str) -> dict[str, Any]:
    """A mapping of settings that has no options of its own (a replayed config's ``model_kwargs``, the
    ``--qe`` settings of the baselines) checked against declarations: not a mapping, a name not declared
    (with the close ones) or a value out of its declaration is one PipelineError; ``what`` names the
    mapping, ``label(name, value)`` one setting in it, as the caller wrote it. Returns the canonical values."""
    if not isinstance(given, Mapping):
        raise PipelineError(f"{what}: expected a mapping of settings, got {type(given).__name__}")
    by_name = {d.name: d for d in options}
    out = {}
    for name, value in given.items():
        if not isinstance(name, str) or name not in by_name:
            hint = close_matches(name, list(by_name)) if isinstance(name, str) else []
            raise PipelineError(f"{label(str(name), value)}: unknown setting"
                                + (f" (did you mean {', '.join(hint)}?)" if hint else "")
                                + f"; known: {', '.join(sorted(by_name)) or 'none'}")
        out[name] = _checked(by_name[name], value, label)
    return out


# ------------------------------------------------------------------------------------- the Python door


def split_options(
    given: dict[str, Any], *classes: type, what: str, extra: Sequence[str] = (), known: type | None = None
) -> list[Any]:
    """One instance of each class from the keywords a Python caller gave (each class takes the keywords it
    declares; absent ones keep their defaults). A keyword no class (nor ``known``, a class only checked
    against) declares, other than ``extra``, is one PipelineError with the close names."""
    names = [d.name for cls in (*classes, *([known] if known else [])) for d in declared(cls) if d.option.api]
    for name in given:
        if name not in names and name not in extra:
            hint = close_matches(name, names)
            raise PipelineError(f"{what}: unknown option {name!r}" + (f" (did you mean {', '.join(hint)}?)" if hint else "")
                                + f"; known: {', '.join(sorted(names))}")
    missing = [d.name for cls in classes for d in declared(cls) if d.default is _MISSING and d.name not in given]
    if missing:
        raise PipelineError(f"{what}: give {', '.join(option(m) for m in missing)}")
    return [cls(**{d.name: given[d.name] for d in declared(cls) if d.name in given}) for cls in classes]


def check_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The arguments of a call of the API function ``fn`` against its signature (the declared one for a
    function taking ``**options``): a misspelled keyword is one PipelineError naming the closest ones (as
    :func:`split_options` does), a missing or surplus argument one naming the function, instead of
    Python's bare TypeError.

    >>> def query(text: str, *, dataset: str, top: int | None = None) -> None: ...
    >>> check_call(query, ("knows(a, ?y)",), {"dataset": "toy", "tpo": 3})
    Traceback (most recent call last):
    ...
    pipeline.core.errors.PipelineError: query: unknown option 'tpo' (did you mean top?); known: dataset, text, top
    """
    sig = inspect.signature(fn)
    params = sig.parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    what = getattr(fn, "__name__", "this function")
    if not takes_any:
        names = [n for n, p in params.items() if p.kind is not p.VAR_POSITIONAL]
        for name in kwargs:
            if name not in params:
                hint = close_matches(name, names)
                raise PipelineError(f"{what}: unknown option {name!r}" + (f" (did you mean {', '.join(hint)}?)" if hint else "")
                                    + f"; known: {', '.join(sorted(names))}")
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise PipelineError(f"{what}: {exc} (help(pl.{what}) lists its arguments)") from None


def signature_of(fn: Callable[..., Any], *classes: type, leading: Sequence[inspect.Parameter] = ()) -> inspect.Signature:
    """The keyword-only signature of an API function whose options are the classes' fields (what ``help``
    and a notebook's completion show), after its ``leading`` parameters."""
    params = list(leading)
    for cls in classes:
        for d in declared(cls):
            if d.option.api:
                default = None if d.default is _MISSING else d.default
                params.append(inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                                annotation=_annotation(cls, d.name)))
    ret = inspect.signature(fn).return_annotation
    return inspect.Signature(params, return_annotation=ret)


def _annotation(cls: type, name: str) -> Any:
    return next(f.type for f in dataclasses.fields(cls) if f.name == name)


def options_doc(*classes: type) -> str:
    """The options of the classes as docstring lines: ``name (default): help``."""
    lines = []
    for cls in classes:
        for d in declared(cls):
            if d.option.api:
                default = "" if d.default is _MISSING else f" (default {d.default!r})"
                lines.append(f"    {d.name}{default}: {d.option.help}")
    return "\n".join(lines)


def api_function(*classes: type, leading: Sequence[str] = ()) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate an API function taking ``**options``: its signature and the options part of its docstring
    come from the classes' declarations (one declaration, two doors)."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        own = inspect.signature(fn)
        lead = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
        fn.__signature__ = signature_of(fn, *classes, leading=lead)  # type: ignore[attr-defined]
        fn.__doc__ = (fn.__doc__ or "").replace("{options}", options_doc(*classes).strip())
        return fn

    return wrap


# ------------------------------------------------------------------------------------ the command line


def click_options(*classes: type, exclude: Sequence[str] = ()) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate a click command with one option per declared field of the classes (``cli=True``), in field
    order: flag, type, default, help and choices from the declaration. The command receives them under
    their field names."""
    import click

    def decorate(fn: Callable[..., T]) -> Callable[..., T]:
        items = [d for cls in classes for d in declared(cls) if d.option.cli and d.name not in exclude]
        for d in reversed(items):  # click applies decorators bottom-up
            fn = _click_option(click, d)(fn)
        return fn

    return decorate


def _click_option(click: Any, d: Declared) -> Callable[..., Any]:
    o = d.option
    default = None if d.default is _MISSING else d.default
    kw: dict[str, Any] = {"help": o.help}
    if d.kind == "bool":
        if o.flag and "/" in o.flag:
            if default is None:  # three states: on, off, or left to the command (its help says how it decides)
                return click.option(o.flag, d.name, default=None, help=o.help)
            return click.option(o.flag, d.name, default=bool(default), show_default=True, help=o.help)
        return click.option(d.flag, d.name, is_flag=True, default=bool(default), help=o.help)
    if o.registry is not None:
        kw["type"] = registry_choice(o.registry)
    elif o.choices:
        kw["type"] = click.Choice(list(o.choices), case_sensitive=False)  # converted to the choice's spelling
    elif d.kind == "int":
        kw["type"] = int
    elif d.kind == "float":
        kw["type"] = float
    elif d.kind in ("path",):
        kw["type"] = click.Path(path_type=str)
    if d.kind == "strs":
        kw["help"] = o.help + " (comma-separated)"
        kw["type"] = str
        default = None if default is None else ",".join(default)  # () is "" (no names), not "required"
    if o.metavar:
        kw["metavar"] = o.metavar
    if d.default is _MISSING:
        kw["required"] = True
    show = default not in (None, (), "")
    return click.option(d.flag, d.name, default=default, show_default=show, **kw)


def from_command(given: dict[str, Any], cls: type[T]) -> T:
    """An instance of ``cls`` from a click command's keyword arguments (the fields it declares, and those
    of its other fields the command passes, such as a baseline run's data set and query sets)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in given.items() if k in names})


_CHOICE_TYPES: dict[str, Any] = {}


def registry_choice(kind: str, extra: tuple[str, ...] = ()) -> Any:
    """A click parameter type whose values are the names of registry ``kind``: the same lookup (case,
    synonyms) and "did you mean" as everywhere else, converted to the canonical name (click is imported
    only when a command line is built)."""
    import click

    from pipeline.core.registry import registry

    if "class" not in _CHOICE_TYPES:

        class RegistryChoice(click.ParamType):
            def __init__(self, kind: str, extra: tuple[str, ...]) -> None:
                self.kind, self.extra, self.name = kind, extra, kind

            def _names(self) -> list[str]:
                return [*registry(self.kind).names(), *self.extra]

            def get_metavar(self, param: Any, ctx: Any = None) -> str:
                return "[" + "|".join(self._names()) + "]"

            def convert(self, value: Any, param: Any, ctx: Any) -> str:
                if value in self.extra:
                    return str(value)
                return registry(self.kind).canonical(str(value))  # UnknownNameError: one line, close matches

        _CHOICE_TYPES["class"] = RegistryChoice
    return _CHOICE_TYPES["class"](kind, extra)
