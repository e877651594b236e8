"""Drop-in replacement for ``torchsnooper``: ``from shapelens import snoop``."""

from shapelens.snooping.formats import NumpyFormat, TensorFormat
from shapelens.snooping.register import register_snoop
from shapelens.snooping.tracer import ShapeLensSnooper, snoop

__all__ = ["NumpyFormat", "ShapeLensSnooper", "TensorFormat", "register_snoop", "snoop"]
