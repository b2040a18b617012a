"""amp's process-wide state: amp.initialize sets it up, amp.scale_loss and state_dict read it."""


class _AmpState:
    """What initialize() set up; scale_loss() and state_dict() read it."""

    def __init__(self):
        self.initialized = False
        self.enabled = True
        self.opt_level = None
        self.combine_grad = False
        self.verbosity = 1
        self.loss_scalers = []


# One per process, as apex keeps it: scale_loss() finds the scalers without being handed them.
_amp_state = _AmpState()
