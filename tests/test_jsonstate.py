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
