"""The gate as JUnit XML (`python -m pipeline gate --junit FILE`), so that any CI system lists which metric failed.

One <testsuite name="workbench gate: RUN vs BASELINE"> holds one <testcase classname="SLICE" name="METRIC"> per
comparison the gate made (pipeline.evaluation.regression):

- a drop tested and not found (kind ok): a passing case, the test's sentence in <system-out>;
- a regression (kind drop): a <failure type="regression"> whose message has the baseline and new means, the
  change, the adjusted p and the likely cause when one is given; its text the full sentence and the worst items;
- a metric below its floor (kind floor): a case named "METRIC (floor)", a <failure type="below_floor"> with the
  mean and the floor (a separate check from the drop test of the same metric and slice, so a separate case);
- a comparison that was not tested (kind too_few: too few shared items; not_comparable: judged under another
  prompt version): <skipped> with the reason;
- a run without a baseline: one skipped case "drops" in class "all" (no drop was tested), beside its floor cases.

The exit code of `gate` does not depend on the file: it is written in addition to the normal output.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import InputError
from pipeline.evaluation import regression as compare

SKIPPED_KINDS = ("too_few", "not_comparable")
NOT_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")  # characters XML 1.0 cannot hold


def _xml_text(text: str) -> str:
    """Text as XML can hold it: a control character (in a run's name, a tag) would make the file unreadable."""
    return NOT_IN_XML.sub("\N{REPLACEMENT CHARACTER}", text)


def suite_name(run, baseline) -> str:
    return f"workbench gate: {run.name} vs {baseline.name if baseline else 'no baseline'}"


def case_name(comparison) -> str:
    return f"{comparison.metric} (floor)" if comparison.below_floor else comparison.metric


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "n/a" if value is None else format(value, fmt)


def failure_message(comparison, cause=None) -> str:
    """One line for a failed case: what fell, by how much, how sure, and why (the likely cause) if known."""
    c = comparison
    if c.below_floor:
        return f"{c.metric} is {_num(c.new_value)}, below its floor {_num(c.baseline_value, '.2f')}"
    text = (
        f"regression: {c.metric} on {c.slice} fell from {_num(c.baseline_value)} to {_num(c.new_value)} "
        f"(change {_num(c.delta, '+.3f')}, adjusted p = {_num(c.p_adjusted, '.4f')} over {c.family_size} tests)"
    )
    return text + (f"; {cause.sentence}" if cause is not None else "")


def _failure_text(comparison) -> str:
    lines = [comparison.message]
    if comparison.worst_items:
        lines.append("worst items (baseline -> new):")
        lines += [f"  {w['item_id']}: {w['baseline']:.3f} -> {w['new']:.3f}" for w in comparison.worst_items]
    return "\n".join(lines)


def gate_xml(run, baseline, comparisons: Sequence, cause=None) -> ET.Element:
    """The <testsuites> element of a gate: (run, baseline, comparisons) as `compare.check` returns them; `cause`:
    the likely cause of its regressions (pipeline.evaluation.causes.Cause), or None."""
    root = ET.Element("testsuites", name="workbench gate")
    suite = ET.SubElement(root, "testsuite", name=suite_name(run, baseline))
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="run", value=run.name)
    ET.SubElement(properties, "property", name="baseline", value=baseline.name if baseline else "")
    failures = skipped = 0
    if baseline is None:
        case = ET.SubElement(suite, "testcase", classname="all", name="drops")
        ET.SubElement(case, "skipped", message=f"{run.name} has no baseline: no drop was tested, floors only")
        skipped += 1
    for c in comparisons:
        case = ET.SubElement(suite, "testcase", classname=c.slice, name=case_name(c))
        if c.regression or c.below_floor:
            failure = ET.SubElement(
                case,
                "failure",
                message=failure_message(c, cause if c.regression else None),
                type="regression" if c.regression else "below_floor",
            )
            failure.text = _failure_text(c)
            failures += 1
        elif c.kind in SKIPPED_KINDS:
            ET.SubElement(case, "skipped", message=c.message or c.kind)
            skipped += 1
        elif c.message:
            ET.SubElement(case, "system-out").text = c.message
    counts = {"tests": len(suite.findall("testcase")), "failures": failures, "errors": 0, "skipped": skipped}
    for element in (root, suite):
        element.attrib.update({k: str(v) for k, v in counts.items()})
        element.set("time", "0")
    for element in root.iter():  # names and tags come from users: keep only what XML can hold
        element.attrib.update({k: _xml_text(v) for k, v in element.attrib.items()})
        if element.text:
            element.text = _xml_text(element.text)
    return root


def gate_junit(run, baseline, comparisons: Sequence, cause=None) -> str:
    """The gate as a JUnit XML document (UTF-8 text with its declaration)."""
    element = gate_xml(run, baseline, comparisons, cause)
    ET.indent(element)
    return ET.tostring(element, encoding="unicode", xml_declaration=True) + "\n"


def gate_cause(db, run, baseline, comparisons: Sequence):
    """The likely cause of a gate's regressions (what changed since the baseline that the dropped metrics depend on,
    as the alerts' component says); None without a regression or a baseline."""
    drops = [c for c in comparisons if c.regression]
    if baseline is None or not drops:
        return None
    diff = compare.config_diff(compare.described_config(db, baseline), compare.described_config(db, run))
    return compare.cause_of(run, baseline, diff, drops)


def write_gate_junit(path, run, baseline, comparisons: Sequence, cause=None) -> None:
    """Write the gate's JUnit XML to `path`; a path that cannot be written is an input error with its fix."""
    target = Path(path)
    try:
        target.write_text(gate_junit(run, baseline, comparisons, cause), encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot write the JUnit file {target}: {exc.strerror or exc}",
            fix="give --junit a path in a folder that exists and can be written",
        ) from None
