"""A vendor's expectations file: failures it knows about, each with a reason.

    expected_failures:
      - case: layers.conv-dilation          # a case id, or a glob such as layers.conv-*
        reason: dilation arrives in 2.0

Expectations never make a backend conformant. They annotate the report, point out entries that
match no case and cases listed as failing that now pass, and, only under
``--exit-zero-on-expected``, let the exit code ignore the failures they list.
"""
import fnmatch
from dataclasses import dataclass
from typing import List, Optional

import yaml

from conformance.runner import BREAKING, Run


TOP_LEVEL_KEYS = ("expected_failures",)
ENTRY_KEYS = ("case", "reason")


class ExpectationsError(ValueError):
    """The expectations file is malformed."""


def _refuse_unknown_keys(path, where, mapping, known):
    """A misspelt key (``reasons:``, ``expected_failure:``) would silently change what is
    expected: it is an error, as in a strict schema."""
    unknown = [key for key in mapping if key not in known]
    if unknown:
        raise ExpectationsError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(repr(k) for k in unknown)} in {where} (allowed: "
                                f"{', '.join(known)})")


@dataclass(frozen=True)
class Expectation:
    case: str
    reason: str

    def matches(self, case_id: str) -> bool:
        return fnmatch.fnmatchcase(case_id, self.case)


class Expectations:
    def __init__(self, entries: List[Expectation], all_case_ids: List[str]):
        self.entries = entries
        self.all_case_ids = all_case_ids

    @classmethod
    def load(cls, path: str, all_case_ids: List[str]) -> "Expectations":
        try:
            with open(path) as f:
                document = yaml.safe_load(f) or {}
        except OSError as error:
            raise ExpectationsError(f"cannot read {path}: {error.strerror}") from None
        except yaml.YAMLError as error:
            raise ExpectationsError(f"{path} is not valid YAML: {error}") from None
        items = document.get("expected_failures", []) if isinstance(document, dict) else None
        if not isinstance(items, list):
            raise ExpectationsError(f"{path}: expected a mapping with a list 'expected_failures'")
        _refuse_unknown_keys(path, "the top level", document, TOP_LEVEL_KEYS)
        entries = []
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("case"), str) \
                    or not isinstance(item.get("reason"), str) or not item["reason"].strip():
                raise ExpectationsError(f"{path}: entry {index + 1} needs 'case' and a non-empty "
                                        f"'reason'")
            _refuse_unknown_keys(path, f"entry {index + 1}", item, ENTRY_KEYS)
            entries.append(Expectation(item["case"], item["reason"]))
        return cls(entries, all_case_ids)

    def reason_for(self, case_id: str) -> Optional[str]:
        return next((e.reason for e in self.entries if e.matches(case_id)), None)

    def reason_for_result(self, result) -> Optional[str]:
        """The reason a failure is expected: its case is listed, or it is a consequence of a
        listed case (an expectation for a root cause covers what it breaks later)."""
        reason = self.reason_for(result.case.id)
        if reason is None and result.consequence_of:
            reason = self.reason_for(result.consequence_of)
        return reason

    def findings(self, run: Run) -> dict:
        unexpected = [r.case.id for r in run.results
                      if r.status not in BREAKING and r.status != "NOT_SUPPORTED"
                      and self.reason_for(r.case.id)]
        unmatched = [e.case for e in self.entries
                     if not any(e.matches(case_id) for case_id in self.all_case_ids)]
        unexpected_failures = [r.case.id for r in run.results
                               if r.status in BREAKING and not self.reason_for_result(r)]
        return {"unexpected_passes": unexpected, "unmatched": unmatched,
                "unexpected_failures": unexpected_failures}

    def only_expected_failures(self, run: Run) -> bool:
        """Whether every failure of the run is listed (and nothing was blocked unexpectedly)."""
        if run.blocked and not self.reason_for_result(run.blocked_by):
            return False
        return not self.findings(run)["unexpected_failures"]
