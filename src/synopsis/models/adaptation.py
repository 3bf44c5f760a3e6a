"""What every method needs from a Hugging Face base model, written once.

A method (Hie-BART, HIBRIDS, InstructSum, ...) is a base model (BART, T5, LED) whose attention modules are
swapped for subclasses, plus a few tables of its own. The pieces every such method needs:

* :class:`DerivedConfig`: the method's config is the base config plus the method's fields;
  :meth:`DerivedConfig.from_base` copies every setting of a base (or already derived) config.
* :class:`AdaptedModel`: a mixin for the method's ``PreTrainedModel`` classes (the model and its
  encoder/decoder stacks). Weight initialisation is the base class's ``_init_weights`` on *every* module,
  plus the method's own tables (:class:`MethodTable`, N(0, ``init_std``)). transformers 5 treats classes
  defined outside the library as "custom code" and then skips the init of modules without parameters of
  their own (T5's attention and feed-forward blocks, whose Linear layers T5 initialises from the parent),
  which leaves those weights at N(0, 1) instead of T5's scaled init (std 0.005-0.04 at small widths).
* :func:`register`: the config and model classes known to ``AutoConfig``, ``AutoModel`` and
  ``AutoModelForSeq2SeqLM``, so ``from_pretrained`` of a saved checkpoint rebuilds the method's model.
  Each method module calls it at import; importing :mod:`synopsis.models` imports them all.
* :func:`convert_from_base`: a loaded checkpoint as the method's model, every weight copied and the new
  tables zero, so the result computes exactly what the source computes until it is trained;
  :func:`stack_method` converts to the type the registry says a method makes of the checkpoint's type
  (:func:`synopsis.models.registry.stacked_type`): a method stacked on another needs no converter of its own.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING

from synopsis.models.registry import stacked_type

logger = logging.getLogger(__name__)

_Forward = TypeVar("_Forward", bound=Callable[..., Any])

#: Keys of a saved config that belong to the class, not to the settings.
_CLASS_KEYS = ("model_type", "architectures", "transformers_version")


class DerivedConfig:
    """Mixin for a method's config class (put it before the base config class)."""

    @classmethod
    def from_base(cls, config: PreTrainedConfig, **overrides: Any) -> Any:
        """A config of this class with every setting of ``config`` (a base or derived config), then
        ``overrides``. The attention backend carries over, so a converted model attends as its source."""
        data = config.to_dict()
        for key in _CLASS_KEYS:
            data.pop(key, None)
        data.update(overrides)
        new = cls(**data)
        new._attn_implementation = config._attn_implementation
        return new


class MethodTable(nn.Module):
    """A learnable table a method adds to its base model (one row per bucket, one column per head).

    Models built from their config start it as N(0, ``init_std``); :func:`convert_from_base` zeroes it.
    """

    init_std = 0.02

    def __init__(self, rows: int, columns: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(rows, columns))

    def extra_repr(self) -> str:
        return f"rows={self.weight.shape[0]}, columns={self.weight.shape[1]}"


class AdaptedModel:
    """Mixin for a method's ``PreTrainedModel`` classes (put it before the base class): the base class's
    weight init on every module, and :class:`MethodTable` rows at N(0, ``init_std``)."""

    @classmethod
    def is_custom_code(cls) -> bool:
        # transformers skips the init of parameter-less modules of "custom code" (see the module docstring);
        # the base class's _init_weights is all this class runs, so it is initialised as the base is.
        return False

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # type: ignore[misc]
        if isinstance(module, MethodTable):
            init.normal_(module.weight, mean=0.0, std=module.init_std)


def register(config_class: type, model_class: type, generation_class: type) -> None:
    """Make ``AutoConfig``/``AutoModel``/``AutoModelForSeq2SeqLM`` build these classes for the config's
    ``model_type`` (idempotent)."""
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    AutoModel.register(config_class, model_class, exist_ok=True)
    AutoModelForSeq2SeqLM.register(config_class, generation_class, exist_ok=True)


def forward_signature(base: Callable[..., Any], *extra: str) -> Callable[[_Forward], _Forward]:
    """Decorator for a method's ``forward(self, *args, <extra>=None, **kwargs)`` that wraps ``base``: it
    advertises ``base``'s parameters plus the keyword-only ``extra`` ones. ``generate()`` checks the inputs
    it is given against the signatures of the model's and its encoder's ``forward``, so a pass-through
    forward must still name every input it passes on."""

    def decorate(forward: _Forward) -> _Forward:
        parameters = list(inspect.signature(base).parameters.values())
        variadic = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
        named = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in extra]
        forward.__signature__ = inspect.Signature(named + added + variadic)  # type: ignore[attr-defined]
        return forward

    return decorate


def method_tables(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The parameters of every :class:`MethodTable` in ``model``, with their names."""
    return [
        (f"{name}.{pname}" if name else pname, parameter)
        for name, module in model.named_modules()
        if isinstance(module, MethodTable)
        for pname, parameter in module.named_parameters(recurse=False)
    ]


def convert_from_base(model: PreTrainedModel, model_class: type, config: PreTrainedConfig) -> PreTrainedModel:
    """``model`` as a ``model_class(config)``: every weight copied, every :class:`MethodTable` zero.

    The result is on ``model``'s device and dtype and in its train/eval mode. Refuses (ValueError) when a
    weight of ``model`` has no place in the new model, or a weight of the new model that is not a method
    table has no source.
    """
    reference = next(model.parameters())
    converted = model_class(config).to(device=reference.device, dtype=reference.dtype)
    tables = method_tables(converted)
    table_names = {name for name, _ in tables}
    missing, unexpected = converted.load_state_dict(model.state_dict(), strict=False)
    not_tables = [name for name in missing if name not in table_names]
    if unexpected or not_tables:
        raise ValueError(
            f"weights of {type(model).__name__} do not map onto {model_class.__name__}: "
            f"missing {not_tables}, extra {unexpected}"
        )
    with torch.no_grad():
        for name, parameter in tables:
            if name in missing:  # tables the source has (a converted model converted again) keep their values
                parameter.zero_()
    converted.train(model.training)
    logger.info(
        "converted %s to %s: %d new zero-initialised table parameters",
        type(model).__name__,
        model_class.__name__,
        sum(p.numel() for n, p in tables if n in missing),
    )
    return converted


def stack_method(model: PreTrainedModel, method: str, **settings: Any) -> PreTrainedModel:
    """``model`` with ``method`` stacked on it (:func:`convert_from_base`): the type the registry names
    (:func:`~synopsis.models.registry.stacked_type`, e.g. HIBRIDS on a Hie-BART is ``hibrids_hie_bart``), its
    config every setting of ``model``'s plus ``settings``, its classes the ones registered with the Auto
    classes. A type that carries ``method`` already is converted again with the new settings, its tables kept.

    Refuses a type the method does not stack on (:class:`~synopsis.errors.CheckpointError`) and a model that
    is not its config type's class (ValueError).
    """
    from synopsis.models import register_methods

    register_methods()  # the target's classes register when their module is imported
    target = stacked_type(model.config, method)
    source_class = MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING[type(model.config)]
    if not isinstance(model, source_class):
        raise ValueError(f"expected a {source_class.__name__}, got {type(model).__name__}")
    config_class = CONFIG_MAPPING[target.name]
    config = config_class.from_base(model.config, **settings)
    return convert_from_base(model, MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING[config_class], config)
