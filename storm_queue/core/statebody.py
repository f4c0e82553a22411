"""The folded lane state as JSON: what a directory's checkpoint and a
database storm's state row hold. Generic over the fold's records: each is
kept once in a table, in the order they were met (so a record refers only
to earlier ones), and referred to as ``{"@ref": i}``: the many slugs one
request moved share one mark, and a lane of 100,000 slugs stays small.
A state read back is checked to be one the fold could have made."""

from __future__ import annotations

from . import fold
from .jsoncodec import COMPACT, dumps, loads
from .names import is_name
from .records import fields, is_record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: 3: the lane state gained waivers and touched; 4: halt and Run.unparked (issue 12); 5: Run.cancelled;
#: 6: requests, the lines counted by action and outcome (issue 34: an earlier body has none, so it is
#: read past and the log folded from line 1, never taken for zero requests); 7: Run.held (issue 33 item 3)
FORMAT = 7


class Table:
    """The records met so far, each once, and the references to them."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.seen: dict[Any, int] = {}
        self.by_id: dict[int, int] = {}  # a record met before, by identity: no need to hash it again
        self.kept: list[Any] = []  # the records by_id names, kept alive so that no id is reused

    def ref(self, record: Any) -> dict[str, int]:
        index = self.by_id.get(id(record))
        if index is None:
            try:
                key: Any = (type(record), record)
                hash(key)
            except TypeError:  # a record holding a mapping is kept by identity
                key = id(record)
            index = self.seen.get(key)
            if index is None:
                if getattr(fold, type(record).__name__, None) is not type(record):
                    raise TypeError(f"{type(record).__name__} is not a record of the fold")
                value = self.value
                row = {"@": type(record).__name__, **{name: value(getattr(record, name)) for name in fields(record)}}
                self.rows.append(row)
                index = self.seen[key] = len(self.rows) - 1
            self.by_id[id(record)] = index
            self.kept.append(record)
        return {"@ref": index}

    def value(self, value: Any) -> Any:
        if value is None or type(value) in PLAIN:
            return value
        if is_record(value):
            return self.ref(value)
        if isinstance(value, (tuple, list)):
            return [self.value(v) for v in value]
        if isinstance(value, (set, frozenset)):
            return {"@set": sorted(self.value(v) for v in value)}
        if hasattr(value, "items"):
            return {"@map": {str(k): self.value(v) for k, v in value.items()}}
        if isinstance(value, (str, int, bool)):
            return value
        raise TypeError(f"cannot keep a {type(value).__name__} in a checkpoint")


PLAIN = frozenset((str, int, bool))


def from_json(value: Any, made: list[Any]) -> Any:
    if isinstance(value, list):
        return tuple(from_json(v, made) for v in value)
    if isinstance(value, dict):
        if set(value) == {"@ref"} and isinstance(value["@ref"], int) and 0 <= value["@ref"] < len(made):
            return made[value["@ref"]]
        if set(value) == {"@map"} and isinstance(value["@map"], dict):
            return {k: from_json(v, made) for k, v in value["@map"].items()}
        if set(value) == {"@set"} and isinstance(value["@set"], list):
            return frozenset(from_json(v, made) for v in value["@set"])
        raise ValueError("a value is neither a reference, a mapping nor a set")
    return value


def records(rows: Any) -> list[Any]:
    """The records of the table, each made from its fields."""
    if not isinstance(rows, list):
        raise ValueError("there is no table of records")
    made: list[Any] = []
    for row in rows:
        cls = getattr(fold, str(row.get("@")), None) if isinstance(row, dict) else None
        if not (isinstance(cls, type) and hasattr(cls, "__record_fields__")):
            raise ValueError(f"unknown record {row.get('@') if isinstance(row, dict) else row!r}")
        names = fields(cls)
        if set(row) != {"@", *names}:
            raise ValueError(f"the fields of {cls.__name__} differ")
        made.append(cls(**{name: from_json(row[name], made) for name in names}))
    return made


def dump_state(state: fold.LaneState) -> str:
    """A lane state as the JSON text a database storm keeps in its state row."""
    table = Table()
    ref = table.ref(state)
    return dumps({"v": FORMAT, "state": ref, "records": table.rows}, separators=COMPACT)


def load_state(raw: str) -> fold.LaneState:
    """The lane state ``dump_state`` made; ``ValueError`` saying why not."""
    try:
        body = loads(raw)
        if not isinstance(body, dict) or body.get("v") != FORMAT:
            raise ValueError("it is not a state of this format")
        state = from_json(body.get("state"), records(body.get("records")))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"the state cannot be read ({exc})") from None
    why = "is not a lane state" if not isinstance(state, fold.LaneState) else unsound(state)
    if why:
        raise ValueError(f"the state {why}")
    return state


def unsound(state: fold.LaneState) -> str:
    """What makes a parsed lane state one the fold could not have made
    (names enter the lane only as names, as they do from the log), or ''."""
    if not (isinstance(state.lane, tuple) and isinstance(state.named, tuple) and isinstance(state.marks, dict)):
        return "has the wrong shape"
    if not all(isinstance(s, str) and is_name(s) for s in state.lane + state.named + tuple(state.marks)):
        return "holds a slug that is not a name"
    for mark in state.marks.values():
        if not (isinstance(mark, fold.Mark) and type(mark.seq) is int and isinstance(mark.slug, str)
                and is_name(mark.slug) and all(isinstance(v, str) for v in (mark.at, mark.by, mark.action))
                and (mark.reason is None or isinstance(mark.reason, str))):
            return "holds a mark the fold could not have made"
    if not (isinstance(state.runs, dict) and isinstance(state.keys, dict) and isinstance(state.keys_day, str)
            and type(state.token_floor) is int and isinstance(state.moved_to, str) and sound_act(state.halt)):
        return "has the wrong shape"
    for slug, run in state.runs.items():
        if not (is_name(slug) and sound_run(run)):
            return "holds a run the fold could not have made"
    if not (isinstance(state.waivers, dict) and isinstance(state.touched, dict)):
        return "has the wrong shape"
    for slug, deps in state.waivers.items():
        if not (is_name(slug) and isinstance(deps, dict) and all(
                is_name(dep) and isinstance(w, fold.Waiver) and type(w.seq) is int and isinstance(w.at, str)
                and isinstance(w.by, str) and (w.reason is None or isinstance(w.reason, str)) for dep, w in deps.items())):
            return "holds a waiver the fold could not have made"
    if not all(is_name(slug) and isinstance(at, str) for slug, at in state.touched.items()):
        return "holds a time the fold could not have made"
    if not (isinstance(state.requests, dict) and all(
            isinstance(action, str) and isinstance(counts, dict) and all(
                how in fold.OUTCOMES and type(n) is int and n > 0 for how, n in counts.items())
            for action, counts in state.requests.items())):
        return "holds a count of requests the fold could not have made"
    for by, keys in state.keys.items():
        if not (isinstance(keys, dict) and all(
                isinstance(k, fold.Keyed) and type(k.seq) is int and isinstance(k.fingerprint, str)
                and isinstance(k.event, dict) and isinstance(name, str) for name, k in keys.items())):
            return "holds a key the fold could not have made"
    return ""


def sound_act(act: object) -> bool:
    """True when ``act`` is None or has the types the fold gives an ``Act``."""
    return act is None or (isinstance(act, fold.Act) and type(act.seq) is int and isinstance(act.at, str)
                           and isinstance(act.by, str) and (act.reason is None or isinstance(act.reason, str)))


def sound_run(run: object) -> bool:
    """True when ``run`` has the types the fold gives a ``Run``."""
    def text(*values: object, empty: bool = False) -> bool:
        return all(isinstance(v, str) or (empty and v is None) for v in values)

    if not (isinstance(run, fold.Run) and type(run.token) is int and type(run.attempts) is int
            and text(run.quarantined, run.not_before, empty=True) and isinstance(run.history, tuple)
            and sound_act(run.unparked) and sound_act(run.cancelled) and sound_act(run.held)):
        return False
    lease = run.lease
    if lease is not None and not (isinstance(lease, fold.Lease) and type(lease.token) is int and type(lease.ttl) is int
                                  and text(lease.holder, lease.by, lease.claimed, lease.expires)):
        return False
    return all(isinstance(a, fold.Attempt) and type(a.token) is int and text(a.holder, a.at)
               and text(a.end, a.ended, a.note, empty=True) for a in run.history)
