"""Targeted power cuts: "cut at the Nth operation whose kind and path match X".

A `Trigger` names a file-system operation kind (`create`, `mkdir`, `write`, `truncate`, `rename`,
`unlink`, `rmdir`, `fsync`, `fsyncdir`), an `fnmatch` pattern over the path inside the mount (a rename
matches on its old or its new path) and a count. The lazy file system (`tests/powerloss/lazyfs.py`) counts
the matching operations; at the Nth one it *freezes*: that operation and every later one block, so nothing
more becomes durable, and it writes a status file saying which operation it stopped at. The campaign
(`tests/powerloss/campaign.py`) sees the status file, kills the broker and cuts the power: the backing
directory then holds exactly what was durable at the moment the broker reached that operation.

Why freezing *before* the operation is enough: an operation other than fsync changes only what is
visible, never what is durable, so applying it or not before a cut makes no difference to what survives;
what matters is that the broker is stopped right there, with its earlier writes durable or not as it left
them.

`TARGETS` is the catalogue of moments the campaigns aim at, named for the summary table. Pure data and
parsing; any thread.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

KINDS = frozenset({"create", "mkdir", "write", "truncate", "rename", "unlink", "rmdir", "fsync", "fsyncdir"})


@dataclass(frozen=True, slots=True)
class Trigger:
    """Freeze at the `nth` operation of `kind` on a path matching `pattern` (1 = the first)."""

    kind: str
    pattern: str
    nth: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown operation kind {self.kind!r}: one of {sorted(KINDS)}")
        if ":" in self.pattern or self.nth < 1:
            raise ValueError(f"a pattern without ':' and a count of at least 1: {self.pattern!r}, {self.nth}")

    def spec(self) -> str:
        """The command-line form, `kind:pattern:nth` (parsed back by `parse`)."""
        return f"{self.kind}:{self.pattern}:{self.nth}"

    @classmethod
    def parse(cls, spec: str) -> Trigger:
        kind, pattern, nth = spec.split(":")
        return cls(kind, pattern, int(nth))

    def matches(self, kind: str, paths: tuple[str, ...]) -> bool:
        return kind == self.kind and any(fnmatch.fnmatchcase(path, self.pattern) for path in paths)


#: the moments a campaign aims at: name -> the trigger (its count is replaced by the campaign's pick)
TARGETS: dict[str, Trigger] = {
    "segment roll (create of a new .log)": Trigger("create", "*/[0-9]*.log"),
    "index resize (ftruncate of an .index)": Trigger("truncate", "*.index"),
    "cleaner swap (rename of a .swap)": Trigger("rename", "*.swap"),
    "cleaned segment written (write of a .cleaned)": Trigger("write", "*.cleaned"),
    "checkpoint write (write of a checkpoint temp file)": Trigger("write", "*checkpoint*.tmp"),
    "topic creation (mkdir of a partition dir)": Trigger("mkdir", "*/pl-churn-*"),
    "topic deletion (rename to -delete)": Trigger("rename", "*/pl-churn-*-delete"),
    "log-dir move copy (mkdir of a -future dir)": Trigger("mkdir", "*-future"),
    "log-dir move promotion (rename of a -future dir)": Trigger("rename", "*-future"),
    "producer snapshot (create of a .snapshot temp file)": Trigger("create", "*.snapshot.*.tmp"),
    "retention delete (rename to .deleted)": Trigger("rename", "*/pl-retain-*.deleted"),
    "__consumer_offsets append": Trigger("write", "*/__consumer_offsets-*/*.log"),
    "__transaction_state append": Trigger("write", "*/__transaction_state-*/*.log"),
}
