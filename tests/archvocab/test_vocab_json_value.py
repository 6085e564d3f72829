"""archvocab.json_value: free-form JSON fields are bounded in depth and hold only Unicode."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from archvocab.json_value import MAX_DEPTH, JsonObject, check_json_value


def nested(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_values_may_nest_max_depth_levels_and_no_more():
    assert check_json_value({"a": nested(MAX_DEPTH)})  # the list levels 1..MAX_DEPTH
    with pytest.raises(ValueError, match=f"a\\[0\\]\\[0\\].*: nested deeper than {MAX_DEPTH}"):
        check_json_value({"a": nested(MAX_DEPTH + 1)})


def test_a_lone_surrogate_is_refused_naming_where():
    with pytest.raises(ValueError, match=r"a\.b\[1\]: text '\\ud800' is not valid Unicode"):
        check_json_value({"a": {"b": ["ok", "\ud800"]}})
    with pytest.raises(ValueError, match=r"a: key '\\udfff' is not valid Unicode"):
        check_json_value({"a": {"\udfff": 1}})


def test_plain_values_pass_unchanged():
    value = {"kind": "gpt2", "d_inner": [512, 1024], "x": {"y": [1.5, None, True, "é"]}}
    assert check_json_value(value) is value


def test_a_model_field_reports_the_problem_at_the_field():
    class Holder(BaseModel):
        details: JsonObject

    with pytest.raises(ValidationError) as caught:
        Holder(details={"x": nested(MAX_DEPTH + 5)})
    (error,) = caught.value.errors()
    assert error["loc"] == ("details",)
    assert f"nested deeper than {MAX_DEPTH} levels" in error["msg"]
    assert Holder.model_json_schema()["properties"]["details"]["type"] == "object"
