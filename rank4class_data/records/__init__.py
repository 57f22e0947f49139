"""Record files: TFRecord files (whole-file checks, reading, counting), the tf.data input pipeline,
classification `tf.Example` records, ELWC ranking lists and ELWC class lists."""
