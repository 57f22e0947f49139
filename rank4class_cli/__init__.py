"""The console scripts' entry points (`rank4class_cli.launch`): `--help` answered from the stored help texts
without importing TensorFlow, everything else handed to the binary's module."""
