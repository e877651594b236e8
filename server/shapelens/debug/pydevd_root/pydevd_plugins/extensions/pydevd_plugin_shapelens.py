"""ShapeLens's pydevd plugin: tensors, arrays, modules and containers of tensors shown by
shape in Variables, Watch, hover and the Debug Console (see shapelens.debug.presentation).

pydevd finds it through its ``pydevd_plugins.extensions`` namespace package; the runner puts
``pydevd_root`` on ``sys.path`` while debugpy loads. Classes are registered with pydevd's
ABCs rather than subclassing them, so importing this never fails outside a debugger.
"""

from typing import Any

from _pydevd_bundle.pydevd_extension_api import (  # type: ignore[import-not-found]
    StrPresentationProvider,
    TypeResolveProvider,
)
from _pydevd_bundle.pydevd_safe_repr import SafeRepr  # type: ignore[import-not-found]

from shapelens.debug import presentation


class ShapeLensStrProvider:
    """The one-line text: ``Tensor (5,3) f32 cpu grad``; pydevd's own for anything else."""

    def can_provide(self, type_object: type, type_name: str) -> bool:
        return presentation.may_summarise(type_object)

    def get_str(self, val: Any) -> str:
        text = presentation.summary(val)
        return text if text is not None else str(SafeRepr()(val))

    def get_str_in_context(self, val: Any, context: str) -> str:
        if context == "clipboard":  # Copy Value: the user asked for the data
            return str(SafeRepr()(val))
        return self.get_str(val)


class ShapeLensTensorResolver:
    """The children of an expanded tensor or array: metadata, grad, a lazy values preview."""

    def can_provide(self, type_object: type, type_name: str) -> bool:
        return presentation.resolves(type_object)

    def get_contents_debug_adapter_protocol(
        self, obj: Any, fmt: Any = None
    ) -> list[presentation.Child]:
        return presentation.children(obj)

    def get_dictionary(self, obj: Any) -> dict[str, Any]:
        return {name: value for name, value, _ in presentation.children(obj)}

    def resolve(self, var: Any, attribute: str) -> Any:
        return self.get_dictionary(var).get(attribute)


StrPresentationProvider.register(ShapeLensStrProvider)
TypeResolveProvider.register(ShapeLensTensorResolver)
