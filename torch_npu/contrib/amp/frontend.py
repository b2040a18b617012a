"""amp.initialize / state_dict / load_state_dict: opt levels O0-O3 applied to models and optimizers."""

import collections
import functools
from typing import Optional

import torch
import torch.nn as nn

from torch_npu.contrib.amp._state import _amp_state
from torch_npu.contrib.amp.handle import AmpOptimizerStash
from torch_npu.contrib.amp.scaler import LossScaler

# What each opt level does (apex's meanings):
#   O0  float32 everything, loss scale 1 (a baseline);
#   O1  float32 weights, ops cast by the autocast policies (matmul/conv in float16, softmax/norms/
#       losses in float32), dynamic loss scale;
#   O2  float16 model with batch norm in float32, float32 master weights in the optimizer,
#       dynamic loss scale;
#   O3  float16 everything, loss scale 1 (a speed baseline).
_OPT_LEVELS = {
    "O0": dict(autocast=False, cast_model_type=None, keep_batchnorm_fp32=None, master_weights=False, loss_scale=1.0),
    "O1": dict(autocast=True, cast_model_type=None, keep_batchnorm_fp32=None, master_weights=False,
               loss_scale="dynamic"),
    "O2": dict(autocast=False, cast_model_type=torch.float16, keep_batchnorm_fp32=True, master_weights=True,
               loss_scale="dynamic"),
    "O3": dict(autocast=False, cast_model_type=torch.float16, keep_batchnorm_fp32=False, master_weights=False,
               loss_scale=1.0),
}


def _cast_floating(value, dtype):
    """`value` with every floating tensor inside (tuples, lists, dicts) cast to `dtype`."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        cast = [_cast_floating(v, dtype) for v in value]
        return type(value)(*cast) if hasattr(value, "_fields") else type(value)(cast)
    if isinstance(value, dict):
        return type(value)((k, _cast_floating(v, dtype)) for k, v in value.items())
    return value


def _patch_forward(module: nn.Module, wrapper) -> None:
    original = module.forward
    module.forward = functools.wraps(original)(functools.partial(wrapper, original))


def _autocast_forward(device_type, dtype, out_dtype, original, *args, **kwargs):
    with torch.autocast(device_type, dtype=dtype):
        out = original(*args, **kwargs)
    # Losses are usually computed outside forward(): hand them float32 like apex does.
    return _cast_floating(out, out_dtype)


def _half_model_forward(dtype, out_dtype, original, *args, **kwargs):
    return _cast_floating(original(*_cast_floating(args, dtype), **_cast_floating(kwargs, dtype)), out_dtype)


def _cast_outputs_forward(out_dtype, original, *args, **kwargs):
    return _cast_floating(original(*args, **kwargs), out_dtype)


def _fp32_batchnorm_forward(original, x, *args, **kwargs):
    # Statistics in float32 (float16 variance of activations loses too much), result back in the
    # model's dtype for the next layer.
    return original(x.float(), *args, **kwargs).to(x.dtype)


def _model_device_type(model: nn.Module) -> str:
    for p in model.parameters():
        return p.device.type
    return "npu"


def _check_loss_scale(loss_scale):
    if loss_scale == "dynamic":
        return loss_scale
    if isinstance(loss_scale, str):
        raise ValueError(f'amp.initialize: loss_scale must be a positive number or "dynamic", got {loss_scale!r}')
    loss_scale = float(loss_scale)
    if loss_scale < 0:
        return "dynamic"  # the seed's training scripts pass -1 for "dynamic"
    if loss_scale == 0:
        raise ValueError('amp.initialize: loss_scale 0 would zero every gradient; pass a positive number, '
                         '"dynamic" or a negative number (also dynamic)')
    return loss_scale


# Parameter names, order and defaults are apex's (Ascend's apex adds the dynamic-scale factors and
# combine_grad ... check_combined_tensors), so `from apex import amp` scripts pass them unchanged.
def initialize(models, optimizers=None, enabled: bool = True, opt_level: str = "O1", cast_model_type=None,
               patch_torch_functions: Optional[bool] = None, keep_batchnorm_fp32: Optional[bool] = None,
               master_weights: Optional[bool] = None, loss_scale=None, cast_model_outputs=None,
               num_losses: int = 1, verbosity: int = 1, dynamic_init_scale: float = 2.0**16,
               scale_growth_factor: float = 2.0, scale_backoff_factor: float = 0.5, scale_window: int = 2000,
               min_loss_scale: Optional[float] = None, max_loss_scale: float = 2.0**24,
               combine_grad: Optional[bool] = None, combine_ddp: Optional[bool] = None, ddp_replica_count: int = 4,
               user_cast_preferred: Optional[bool] = None, check_combined_tensors: Optional[bool] = None,
               dtype: torch.dtype = torch.float16):
    """Prepare models and optimizers for mixed precision at `opt_level` ("O0".."O3"). Returns them in
    the form they were given (one object or a list). Keyword arguments override the opt level's
    defaults: `loss_scale` (a number: static; "dynamic" or a negative number: dynamic),
    `patch_torch_functions` (O1's autocast), `keep_batchnorm_fp32`, `master_weights`, `cast_model_type`;
    `cast_model_outputs` is the dtype of the model's floating outputs (default float32).
    A dynamic scale starts at `dynamic_init_scale`, is multiplied by `scale_backoff_factor` on an
    overflow and by `scale_growth_factor` after `scale_window` clean steps. `combine_grad=True` keeps
    gradients in one combined buffer per parameter group and dtype, so unscaling and the overflow
    check are one device op each. `dtype` (float16 or bfloat16) is the low precision type of O1-O3.

    Accepted for apex's sake without effect: `check_combined_tensors` (combined buffers are always
    checked before use), `user_cast_preferred` (O1 casts follow torch.autocast's policies; there is no
    user cast registry to prefer), `ddp_replica_count` (only used by combine_ddp). `combine_ddp=True`
    raises: wrap the model in DistributedDataParallel instead."""
    if opt_level not in _OPT_LEVELS:
        raise ValueError(f"amp.initialize: unknown opt_level {opt_level!r}; use one of {', '.join(_OPT_LEVELS)} "
                         "(the letter O and a digit, not zero and a digit)")
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"amp.initialize: dtype must be torch.float16 or torch.bfloat16, got {dtype}")
    if num_losses < 1:
        raise ValueError(f"amp.initialize: num_losses must be >= 1, got {num_losses}")
    if combine_ddp:
        # Silently ignoring it would leave a script that dropped its DDP wrapper training unsynchronised.
        raise NotImplementedError("amp.initialize: combine_ddp (Ascend apex's combined-gradient replacement for "
                                  "DistributedDataParallel) is not available; wrap the model in "
                                  "torch.nn.parallel.DistributedDataParallel after amp.initialize instead "
                                  "(combine_grad=True still combines the gradients for unscaling)")
    combine_grad = bool(combine_grad)
    out_dtype = torch.float32 if cast_model_outputs is None else cast_model_outputs
    models_were_list = isinstance(models, (list, tuple))
    model_list = list(models) if models_were_list else [models]
    for m in model_list:
        if not isinstance(m, nn.Module):
            raise TypeError(f"amp.initialize: models must be torch.nn.Module objects, got {type(m).__name__}")
        if getattr(m, "_npu_amp_initialized", False):
            raise RuntimeError("amp.initialize: this model was already initialized; call amp.initialize once, "
                               "on the freshly built model")
    optimizers_were_list = isinstance(optimizers, (list, tuple))
    optimizer_list = [] if optimizers is None else (list(optimizers) if optimizers_were_list else [optimizers])
    for o in optimizer_list:
        if not isinstance(o, torch.optim.Optimizer):
            raise TypeError(f"amp.initialize: optimizers must be torch.optim.Optimizer objects, got {type(o).__name__}")

    props = dict(_OPT_LEVELS[opt_level])
    for name, value in (("cast_model_type", cast_model_type), ("autocast", patch_torch_functions),
                        ("keep_batchnorm_fp32", keep_batchnorm_fp32), ("master_weights", master_weights),
                        ("loss_scale", loss_scale)):
        if value is not None:
            props[name] = value
    if props["cast_model_type"] is not None and opt_level in ("O2", "O3"):
        props["cast_model_type"] = dtype if cast_model_type is None else cast_model_type
    props["loss_scale"] = _check_loss_scale(props["loss_scale"])

    _amp_state.__init__()
    _amp_state.enabled = enabled
    _amp_state.opt_level = opt_level
    _amp_state.combine_grad = combine_grad
    _amp_state.verbosity = verbosity
    _amp_state.initialized = True
    if not enabled:
        return models if optimizers is None else (models, optimizers)

    for model in model_list:
        model._npu_amp_initialized = True
        if props["autocast"]:
            _patch_forward(model, functools.partial(_autocast_forward, _model_device_type(model), dtype, out_dtype))
        cast_type = props["cast_model_type"]
        if not props["autocast"] and cast_type is None and cast_model_outputs is not None:
            _patch_forward(model, functools.partial(_cast_outputs_forward, out_dtype))
        if cast_type is not None:
            model.to(cast_type)
            if props["keep_batchnorm_fp32"]:
                for sub in model.modules():
                    if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                        sub.float()
                        _patch_forward(sub, _fp32_batchnorm_forward)
            _patch_forward(model, functools.partial(_half_model_forward, cast_type, out_dtype))

    stashes = [AmpOptimizerStash(optimizer, master_weights=props["master_weights"], combine_grad=combine_grad,
                                 amp_state=_amp_state) for optimizer in optimizer_list]
    if props["master_weights"]:
        # Resuming loads weights into the model after initialize(): refresh the float32 masters then,
        # or the next step would copy the stale masters back over the loaded weights.
        def refresh_masters(module, incompatible_keys):
            for stash in stashes:
                stash.copy_model_to_master()

        for model in model_list:
            model.register_load_state_dict_post_hook(refresh_masters)

    _amp_state.loss_scalers = [
        LossScaler(props["loss_scale"], init_scale=dynamic_init_scale, scale_factor=scale_growth_factor,
                   scale_window=scale_window, min_loss_scale=min_loss_scale, max_loss_scale=max_loss_scale,
                   backoff_factor=scale_backoff_factor)
        for _ in range(num_losses)
    ]
    if verbosity > 0:
        print(f"amp: opt_level {opt_level}, loss scale {props['loss_scale']}, "
              f"master weights {props['master_weights']}, combine_grad {combine_grad}")

    models_out = model_list if models_were_list else model_list[0]
    if optimizers is None:
        return models_out
    return models_out, (optimizer_list if optimizers_were_list else optimizer_list[0])


def state_dict(destination=None) -> dict:
    """The loss scalers' state ({"loss_scaler0": {"loss_scale": ..., "unskipped": ...}, ...}), to save
    in a checkpoint next to the model and optimizer state."""
    if destination is None:
        destination = collections.OrderedDict()
    for i, scaler in enumerate(_amp_state.loss_scalers):
        destination[f"loss_scaler{i}"] = scaler.state_dict()
    return destination


def load_state_dict(state: dict) -> None:
    """Restore what state_dict() returned (call after amp.initialize, with the same num_losses)."""
    if not _amp_state.initialized:
        raise RuntimeError("amp.load_state_dict: call amp.initialize(...) first, then load the saved amp state")
    if len(state) != len(_amp_state.loss_scalers):
        raise ValueError(f"amp.load_state_dict: the state holds {len(state)} loss scalers but amp.initialize set up "
                         f"{len(_amp_state.loss_scalers)} (num_losses); they must match")
    for i, scaler in enumerate(_amp_state.loss_scalers):
        key = f"loss_scaler{i}"
        if key not in state:
            raise ValueError(f"amp.load_state_dict: {key!r} missing from the state (keys: {sorted(state)})")
        scaler.load_state_dict(state[key])
