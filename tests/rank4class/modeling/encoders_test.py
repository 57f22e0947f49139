"""Tests of rank4class.modeling.encoders: instance encoders by name and from their settings, and the
re-exported names."""

import tensorflow as tf

import rank4class  # noqa: F401  (registers the Keras objects)
from rank4class.modeling import (
  encoders,
  hybrid_text_encoder,
  image_encoder,
  instance_encoder,
  mlp_encoder,
  text_instance_encoder,
  tfidf_encoder,
)

_CORPUS = ["A b!", "a c", "a a d"]


class FactoryTest(tf.test.TestCase):
  def test_unknown_name_lists_allowed(self):
    with self.assertRaisesRegex(ValueError, r"`instance_encoder` must be one of \['mlp', 'image', 'text', "
                                r"'tfidf', 'hybrid'\], got 'transformer'"):
      encoders.get("transformer")
    with self.assertRaisesRegex(ValueError, r"`instance_encoder` must be one of \['mlp', .*\], got 'auto'"):
      encoders.make_instance_encoder(encoders.InstanceEncoderConfig(type="auto"))
    with self.assertRaisesRegex(ValueError, r"`combine` must be one of \['concat', 'sum'\], got 'max'"):
      encoders.HybridTextEncoderConfig(combine="max")

  def test_make_instance_encoder_from_config(self):
    mlp = encoders.make_instance_encoder(
      encoders.InstanceEncoderConfig(type="mlp", mlp=encoders.MlpEncoderConfig(hidden_units=(32, 16)))
    )
    self.assertEqual(mlp.output_dim, 16)
    residual = encoders.make_instance_encoder(encoders.InstanceEncoderConfig(
      type="mlp", mlp=encoders.MlpEncoderConfig(hidden_units=(32,), residual=True, l2_normalize=True)))
    self.assertEqual((residual.get_config()["residual"], residual.get_config()["l2_normalize"]), (True, True))
    self.assertEqual(residual(tf.ones([2, 5])).shape, [2, 5])
    image = encoders.make_instance_encoder(
      encoders.InstanceEncoderConfig(
        type="image", image=encoders.ImageEncoderConfig(filters=(8,), rescale=1.0)
      )
    )
    self.assertIsInstance(image, encoders.ImageEncoder)

  def test_make_tfidf_encoder_from_config(self):
    vocabulary, idf_weights = encoders.tfidf_vocabulary(_CORPUS, ngrams=1)
    encoder = encoders.make_instance_encoder(encoders.InstanceEncoderConfig(
        type="tfidf", tfidf=encoders.TfidfEncoderConfig(output_dim=6, vocabulary=vocabulary,
                                                        idf_weights=idf_weights)))
    self.assertIsInstance(encoder, encoders.TfidfEncoder)
    self.assertEqual((encoder.vocabulary, encoder(tf.constant(["a b"])).shape), (vocabulary, [1, 6]))

  def test_text_config_without_settings_raises(self):
    with self.assertRaisesRegex(ValueError, "text"):
      encoders.make_instance_encoder(encoders.InstanceEncoderConfig(type="text"))


class ReexportTest(tf.test.TestCase):
  def test_every_moved_name_is_its_modules_object(self):
    modules = (instance_encoder, mlp_encoder, image_encoder, text_instance_encoder, tfidf_encoder,
               hybrid_text_encoder)
    moved = {name: module for module in modules for name in vars(module) if name in encoders.__all__}
    self.assertLen(moved, 20)  # Every name of `__all__` under "The encoders' modules' public names".
    for name, module in moved.items():
      self.assertIs(getattr(encoders, name), getattr(module, name), name)
    self.assertEqual(encoders.TextInstanceEncoder.__module__, "rank4class.modeling.text_instance_encoder")

  def test_registered_names_are_unchanged(self):
    # Saved models name the classes so; the cross-stack fixtures (tests/rank4class/inference/serving_test.py)
    # also record their module as rank4class.modeling.encoders, and load.
    classes = (encoders.MlpEncoder, encoders.ImageEncoder, encoders.TextInstanceEncoder,
               encoders.TfidfEncoder, encoders.HybridTextEncoder)
    self.assertEqual([tf.keras.utils.get_registered_name(c) for c in classes],
                     ["rank4class>MlpEncoder", "rank4class>ImageEncoder", "rank4class>TextInstanceEncoder",
                      "rank4class>TfidfEncoder", "rank4class>HybridTextEncoder"])


if __name__ == "__main__":
  tf.test.main()
