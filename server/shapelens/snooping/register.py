"""``register_snoop()``: the same metadata formatting for the ``snoop`` library."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shapelens.snooping.formats import default_format, default_numpy_format


def register_snoop(
    verbose: bool = False,
    tensor_format: Callable[[Any], str] = default_format,
    numpy_format: Callable[[Any], str] = default_numpy_format,
) -> None:
    """Make ``snoop`` (and ``cheap_repr``) show tensors and arrays by their metadata."""
    import cheap_repr
    import numpy
    import snoop
    import snoop.configuration
    import torch

    cheap_repr.register_repr(torch.Tensor)(lambda value, _: tensor_format(value))
    cheap_repr.register_repr(numpy.ndarray)(lambda value, _: numpy_format(value))
    # snoop's own len/shape and dtype watches would repeat what the format says.
    unwanted = {snoop.configuration.len_shape_watch, snoop.configuration.dtype_watch}
    snoop.config.watch_extras = tuple(w for w in snoop.config.watch_extras if w not in unwanted)
    if verbose:
        snoop.config.watch_extras += (
            lambda source, value: (
                (f"{source}.data", _MetadataOnly(value))
                if isinstance(value, torch.Tensor)
                else None
            ),
        )


class _MetadataOnly:
    """Even in verbose mode, never print tensor data (it may be huge or on a GPU)."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def __repr__(self) -> str:
        return default_format(self.tensor)
