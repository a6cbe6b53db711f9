"""WCAG AA contrast of the console's text colours in the light AND the dark theme, computed
from static/console.css itself (the cascade of its pill rules, resolved per theme)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

_FILE = (Path(__file__).resolve().parent.parent / "static" / "console.css").read_text()
CSS = re.sub(r"/\*.*?\*/", "", _FILE, flags=re.S)  # comments may hold braces or selectors
AA = 4.5
THEMES = ("light", "dark")
_HEX = r"#[0-9a-fA-F]{3,6}"


def _decls(body: str) -> dict[str, str]:
    return dict(re.findall(rf"(--[\w-]+):\s*({_HEX})", body))


def _block(selector_pattern: str) -> list[str]:
    return re.findall(selector_pattern + r"\s*\{([^{}]*)\}", CSS)


def _vars(theme: str = "light") -> dict[str, str]:
    """Return the custom properties of ``theme``: every plain :root block, then the dark one."""
    colours: dict[str, str] = {}
    for body in _block(r"(?<![\w\])]):root"):
        colours.update(_decls(body))
    if theme == "dark":
        colours.update(_decls(_block(r":root\[data-theme=dark\]")[0]))
    return colours


def _colour(value: str, theme: str) -> str:
    value = value.strip()
    found = re.fullmatch(rf"var\((--[\w-]+)(?:,\s*({_HEX}))?\)", value)
    return _vars(theme).get(found.group(1), found.group(2)) if found else value


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


def _pills(theme: str) -> dict[str, tuple[str, str]]:
    """Return each pill class's (background, text) as the cascade leaves them: the last rule
    naming the class wins, and what a class does not set comes from ``.pill``."""
    props: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]*)\{([^{}]*)\}", CSS):
        bg = re.search(r"(?<![-\w])background:\s*([^;]+);", body)
        fg = re.search(r"(?<![-\w])color:\s*([^;]+);", body)
        for selector in (s.strip() for s in selectors.split(",")):
            if re.fullmatch(r"\.pill(-[\w-]+)?", selector):
                props.setdefault(selector, {})
                if bg:
                    props[selector]["bg"] = bg.group(1)
                if fg:
                    props[selector]["fg"] = fg.group(1)
    base = props.pop(".pill")
    return {cls: (_colour(p.get("bg", base["bg"]), theme), _colour(p.get("fg", base["fg"]), theme))
            for cls, p in {".pill": {}, **props}.items()}


def test_the_ratio_is_computed_as_wcag_says():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#e03131", "#fff0f0") == pytest.approx(4.08, abs=0.01)  # the old blocked pill
    assert contrast("#6b7385", "#f6f7f9") == pytest.approx(4.44, abs=0.01)  # the old muted text


def test_the_dark_theme_is_the_same_for_the_preference_and_the_toggle():
    preferred = re.search(r"prefers-color-scheme:\s*dark\)\s*\{\s*:root:not\(\[data-theme=light\]\)"
                          r"\s*\{([^{}]*)\}", CSS).group(1)
    chosen = _block(r":root\[data-theme=dark\]")[0]
    assert _decls(preferred) == _decls(chosen)
    # The dark theme changes every base colour, so no light literal is left on a dark page.
    assert {"--bg", "--card", "--ink", "--muted", "--pill-bg", "--surface"} <= set(_decls(chosen))
    assert _vars("dark")["--bg"] != _vars("light")["--bg"]


@pytest.mark.parametrize("theme", THEMES)
def test_every_pill_meets_aa(theme):
    pills = _pills(theme)
    assert {".pill", ".pill-blocked", ".pill-succeeded", ".pill-cancelled"} <= set(pills)
    low = {cls: round(contrast(fg, bg), 2) for cls, (bg, fg) in pills.items()
           if contrast(fg, bg) < AA}
    assert low == {}


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("background", ["--bg", "--card", "--surface-2", "--code-bg"])
def test_muted_and_body_text_meet_aa_on_every_surface(theme, background):
    colours = _vars(theme)
    assert contrast(colours["--muted"], colours[background]) >= AA
    assert contrast(colours["--ink"], colours[background]) >= AA


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize(("ink", "background"), [
    ("--accent", "--card"), ("--accent", "--bg"), ("--accent-ink", "--accent"),
    ("--reason-ink", "--card"), ("--reason-ink", "--blocked-bg"), ("--danger", "--card"),
    ("--ok-ink", "--card"), ("--note-ink", "--note-bg"), ("--banner-ink", "--unknown-bg"),
    ("--muted", "--chip-bg"), ("--ink", "--count-bg"), ("--accent", "--chip-bg"),
    ("--accent", "--hover"), ("--accent", "--focus-bg"), ("--muted", "--focus-bg"),
    ("--reason-ink", "--focus-bg"), ("--ink", "--msg-bg"),
])
def test_links_reasons_and_messages_meet_aa(theme, ink, background):
    colours = _vars(theme)
    assert contrast(colours[ink], colours[background]) >= AA, (ink, background)


# Always dark whatever the theme (the top bar), or not text (the timeline's bar fills).
THEME_INDEPENDENT = re.compile(r"^(\.topbar|\.brand|\.mainnav|\.who|\.role|\.linklike|"
                               r"\.live-dot|\.tl-)")


def test_no_literal_colour_is_left_for_the_dark_theme_to_miss():
    """A rule whose final colour is a literal stays light on a dark page: use a token."""
    final: dict[tuple[str, str], str] = {}
    for selectors, body in re.findall(r"([^{}]*)\{([^{}]*)\}", CSS):
        for prop in ("background", "color", "border-color", "fill"):
            found = re.search(rf"(?<![-\w]){prop}:\s*([^;]+);", body)
            for selector in (s.strip() for s in selectors.split(",") if found):
                final[(selector, prop)] = found.group(1).strip()
    literal = {key: value for key, value in final.items()
               if re.fullmatch(_HEX, value) and not THEME_INDEPENDENT.match(key[0])}
    assert literal == {}


@pytest.mark.parametrize("theme", THEMES)
def test_the_key_hint_on_a_primary_button_is_readable(theme):
    colours = _vars(theme)
    assert contrast(colours["--primary-kbd"], colours["--accent"]) >= AA
