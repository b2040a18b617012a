"""torch_npu.contrib.amp: apex-style mixed precision (`from apex import amp` becomes
`from torch_npu.contrib import amp`).

    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale="dynamic", combine_grad=True)
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    optimizer.step()
    checkpoint["amp"] = amp.state_dict()   # amp.load_state_dict(checkpoint["amp"]) on resume
"""

from torch_npu.contrib.amp.frontend import initialize, load_state_dict, state_dict
from torch_npu.contrib.amp.handle import master_params, scale_loss
from torch_npu.contrib.amp.scaler import LossScaler

__all__ = ["initialize", "scale_loss", "master_params", "state_dict", "load_state_dict", "LossScaler"]
