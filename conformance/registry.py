"""The case registry and its vocabulary. Each case names its requirement and stage; its function
raises ``Failed``, ``NotSupported`` or ``Warning_`` for a non-pass and returns for a pass.

File cases read the file and never load it; they run in the controlling process. Their subject
has ``path``, the backend as the user named it (the file-name rule applies to that name, as the
loader applies it to the directory entry), and ``file``, the regular file it resolves to (what is
read and loaded). Every other case runs in a worker process that has loaded the library (see
worker.py), so the vendor's code never runs in the process that keeps the results.

The families of cases (``*_cases.py``, ``generated``, ``guarded``, ``raw_*``) register here when
imported; ``conformance.cases`` imports them all. This module imports none of them.
"""
import fnmatch
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from conformance.requirements import REQUIREMENTS

# The order cases run and report in. Layers come before the lifecycle and concurrency cases,
# which run a layer too: a wrong layer is reported first by its own case, and the later cases it
# breaks are marked as its consequences (runner.Controller).
STAGES = ("file", "entry", "abi", "support", "raw", "layers", "memory", "lifecycle", "resources",
          "concurrency", "net", "speed")
TIERS = ("quick", "full")  # a quick case runs in both tiers, a full one only in the full tier


class Failed(Exception):
    """The backend does not meet the requirement."""


class NotSupported(Exception):
    """The backend said, before the case ran, that it does not do this (optional requirement)."""


class Warning_(Exception):
    """A quality finding that does not break conformance."""


class LayerMismatch(Failed):
    """A layer's output differs from the reference; ``layer_case`` is its layer_cases.yaml id,
    so a failure seen by another case can be traced to the layer case that owns it."""

    def __init__(self, layer_case: str, message: str):
        super().__init__(message)
        self.layer_case = layer_case


@dataclass(frozen=True)
class Case:
    id: str
    requirement: str
    stage: str
    function: Callable
    blocking: bool = False      # a non-pass stops every later case (the library is unusable)
    data: Optional[dict] = None  # layer cases: their YAML entry
    tier: str = "quick"
    blocks: Optional[Tuple[str, ...]] = None  # blocking: only the later cases matching these globs

    def blocks_case(self, other: "Case") -> bool:
        """Whether a failure of this (blocking) case stops ``other``."""
        return self.blocking and (self.blocks is None or any(
            fnmatch.fnmatchcase(other.id, pattern) for pattern in self.blocks))

    @property
    def in_controller(self) -> bool:
        return self.stage == "file"


CASES: Dict[str, Case] = {}


def case(case_id, requirement, blocking=False, tier="quick", blocks=None):
    assert requirement in REQUIREMENTS, requirement
    assert tier in TIERS, tier

    def register(function):
        CASES[case_id] = Case(case_id, requirement, case_id.split(".")[0], function, blocking,
                              tier=tier, blocks=blocks)
        return function
    return register


def register_layer_case(data: dict, function: Callable, requirement: str = "LAYER-1"):
    """A layer case of layer_cases.yaml: its id and YAML entry go with it."""
    CASES[f"layers.{data['id']}"] = Case(f"layers.{data['id']}", requirement, "layers", function,
                                         data=data)


def ordered_cases() -> List[Case]:
    """Every registered case, in the order the kit runs them."""
    return sorted(CASES.values(), key=lambda c: STAGES.index(c.stage))
