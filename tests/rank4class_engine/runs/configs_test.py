"""Tests for rank4class_engine.runs.configs: the config dataclass <-> JSON dict round trip."""

import dataclasses
import json

import tensorflow as tf

from rank4class_engine.runs import configs


@dataclasses.dataclass
class _Inner:
  ks: tuple[int, ...] = (1, 5)
  pair: tuple[int, str] = (0, "a")
  scale: float | None = None


@dataclasses.dataclass
class _Outer:
  name: str
  inner: _Inner = dataclasses.field(default_factory=_Inner)
  maybe_inner: _Inner | None = None
  inners: list[_Inner] = dataclasses.field(default_factory=list)
  by_name: dict[str, _Inner] = dataclasses.field(default_factory=dict)
  handles: list[str] | None = None


class RoundTripTest(tf.test.TestCase):

  def test_nested_dataclasses_with_tuples_and_optionals_round_trip(self):
    config = _Outer(name="x", inner=_Inner(ks=(3,), pair=(2, "b"), scale=0.5), maybe_inner=_Inner(),
                    inners=[_Inner(ks=(7, 8))], by_name={"a": _Inner(scale=1.0)}, handles=["p", "e"])
    values = json.loads(json.dumps(configs.to_dict(config)))
    self.assertEqual(values["inner"], {"ks": [3], "pair": [2, "b"], "scale": 0.5})
    restored = configs.from_dict(_Outer, values)
    self.assertEqual(restored, config)
    self.assertIsInstance(restored.inner.ks, tuple)
    self.assertIsInstance(restored.inners[0], _Inner)
    self.assertEqual(restored.inners[0].ks, (7, 8))
    self.assertIsInstance(restored.by_name["a"], _Inner)

  def test_none_and_missing_fields(self):
    restored = configs.from_dict(_Outer, {"name": "x", "maybe_inner": None})
    self.assertEqual(restored, _Outer(name="x"))

  def test_to_dict_is_json_ready(self):
    self.assertEqual(configs.to_dict(_Inner()), {"ks": [1, 5], "pair": [0, "a"], "scale": None})

  def test_unknown_key_raises_naming_it(self):
    with self.assertRaisesRegex(ValueError, r"_Outer.inner: _Inner has no field\(s\) \['colour'\]"):
      configs.from_dict(_Outer, {"name": "x", "inner": {"colour": "red"}})
    with self.assertRaisesRegex(ValueError, "colour"):
      configs.from_dict(_Inner, {"colour": "red"})

  def test_section_that_is_not_a_dict_raises(self):
    with self.assertRaisesRegex(ValueError, "_Outer.inner: expected a dict"):
      configs.from_dict(_Outer, {"name": "x", "inner": 3})


if __name__ == "__main__":
  tf.test.main()
