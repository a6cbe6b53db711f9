"""agentops.jsonstate: encoders made once write exactly what json.dumps writes."""
import json

import pytest

from agentops.jsonstate import canonical_json, compact_json, json_encoder

_VALUES = [
    {"b": 1, "a": [1.5, "é", None, True, False, -3, 10**20], "c": {"z": {}, "y": []}},
    "plain \u00e9 \"quoted\" \n line",
    1e16, 0.1, -0.0, float("nan"), float("inf"), 7, None, [], {},
]


@pytest.mark.parametrize("value", _VALUES, ids=range(len(_VALUES)))
@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_an_encoder_writes_what_json_dumps_writes(value, sort_keys, compact, ensure_ascii):
    options = {"sort_keys": sort_keys, "ensure_ascii": ensure_ascii,
               **({"separators": (",", ":")} if compact else {})}
    encode = json_encoder(sort_keys=sort_keys, compact=compact, ensure_ascii=ensure_ascii)
    assert encode(value) == json.dumps(value, **options)


def test_canonical_and_compact_texts_are_unchanged():
    value = {"b": [1, "é"], "a": {"d": None, "c": 2.5}}
    assert canonical_json(value) == '{"a":{"c":2.5,"d":null},"b":[1,"é"]}'
    assert compact_json(value) == '{"b":[1,"é"],"a":{"d":null,"c":2.5}}'


def test_an_encoder_refuses_what_json_dumps_refuses():
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_encoder()({"x": object()})
    with pytest.raises(TypeError):
        json_encoder()({(1, 2): 1})


class _Str(str):
    """A str subclass: JSON, but not of the exact built-in type."""


_BAD = [
    ({"a": {"b": [1, "x\x00y"]}}, "$.a.b[1]", "NUL"),
    ({"a": [{"k": float("nan")}]}, "$.a[0].k", "non-finite"),
    ({"a": {"\ud800": 1}}, "$.a.<key '\\ud800'>", "surrogate"),
    ({"a": {"b": (1, 2)}}, "$.a.b", "tuple"),
    ({"a": {1: "x"}}, "$.a.<key 1>", "int"),
    ([{"ok": 1}, {"x": "é\udfff"}], "$[1].x", "surrogate"),
    ({"a\x00": 1}, "$.<key 'a\\x00'>", "NUL"),
]


@pytest.mark.parametrize(("value", "path", "why"), _BAD, ids=range(len(_BAD)))
def test_check_json_names_the_first_unstorable_value_however_deep(value, path, why):
    """A NUL, a lone surrogate, a NaN, a tuple or a non-text key anywhere is refused with
    its key path, and json_plain never vouches for such a value."""
    from agentops.jsonstate import NotJSONSerializable, check_json, json_plain

    assert not json_plain(value)
    with pytest.raises(NotJSONSerializable, match=why) as caught:
        check_json(value)
    assert caught.value.path == path


def test_plain_json_passes_and_subclasses_still_take_the_general_walk():
    from agentops.jsonstate import check_json, json_plain

    good = {"a": [1, 2.5, None, True, "é ✓", {"b": {}}], "c": "", "d": -0.0}
    assert json_plain(good) and json_plain([]) and json_plain("x") and json_plain(1.0)
    check_json(good)
    odd = {"a": _Str("x"), _Str("k"): [_Str("y")]}
    assert not json_plain(odd)
    check_json(odd)  # JSON all the same
