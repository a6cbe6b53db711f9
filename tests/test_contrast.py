"""WCAG AA contrast of the console's text colours, computed from static/console.css itself."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = (Path(__file__).resolve().parent.parent / "static" / "console.css").read_text()
AA = 4.5


def _vars() -> dict[str, str]:
    root = re.search(r":root\s*\{(.*?)\}", CSS, re.S).group(1)
    return dict(re.findall(r"(--[\w-]+):\s*(#[0-9a-fA-F]{3,6})", root))


def _colour(value: str) -> str:
    value = value.strip()
    found = re.fullmatch(r"var\((--[\w-]+)(?:,\s*(#[0-9a-fA-F]{3,6}))?\)", value)
    return _vars().get(found.group(1), found.group(2)) if found else value


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")
    h = "".join(c * 2 for c in h) if len(h) == 3 else h
    channels = [int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: str, bg: str) -> float:
    """Return the WCAG contrast ratio of two #rrggbb colours."""
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _pill_rules() -> list[tuple[str, str, str]]:
    rules = []
    for selector, body in re.findall(r"([^{}]*\.pill[^{}]*)\{([^}]*)\}", CSS):
        bg = re.search(r"background:\s*([^;]+);", body)
        fg = re.search(r"(?<![-\w])color:\s*([^;]+);", body)
        if bg and fg:
            rules.append((selector.strip(), _colour(bg.group(1)), _colour(fg.group(1))))
    return rules


def test_the_ratio_is_computed_as_wcag_says():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#e03131", "#fff0f0") == pytest.approx(4.08, abs=0.01)  # the old blocked pill
    assert contrast("#6b7385", "#f6f7f9") == pytest.approx(4.44, abs=0.01)  # the old muted text


def test_every_pill_meets_aa():
    rules = _pill_rules()
    assert any(".pill-blocked" in sel for sel, _, _ in rules)
    low = {sel: round(contrast(fg, bg), 2) for sel, bg, fg in rules if contrast(fg, bg) < AA}
    assert low == {}


@pytest.mark.parametrize("background", ["--bg", "--card"])
def test_muted_text_meets_aa_on_the_page_and_on_cards(background):
    colours = _vars()
    assert contrast(colours["--muted"], colours[background]) >= AA
    assert contrast(colours["--muted"], "#fafbfc") >= AA  # table headers
