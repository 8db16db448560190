"""The stacked engine: runs of equal shapes trained as one computation (a leading run axis [R, ...]).

- :mod:`.engine`: :func:`run_stack` (configs -> one :class:`~ncgeom.experiments.Result` per run, the same
  run directories as :func:`ncgeom.experiments.run`), :func:`stack_key`, :func:`stackable`, :func:`can_stack`,
  :func:`group_stacks`, :func:`stack_memory_bytes`;
- :mod:`.models`: :class:`StackedEncoder` (unconstrained, linear, MLP parameters [R, ...]; imports torch);
- :mod:`.adam`: :func:`adam` and :class:`StackedAdam` (torch's fused Adam for one run, and per run of a stack with per-run lr and weight decay; imports torch);
- :mod:`.loss`: :func:`stacked_weighted` (the weighted estimator on [R, B, d]; imports torch).

Importing this package does not import torch; :func:`run_stack` does.
"""

from ncgeom.experiments.stacked.engine import (
    STACK_FIELDS,
    can_stack,
    group_stacks,
    run_stack,
    stack_key,
    stack_memory_bytes,
    stackable,
)

__all__ = ["STACK_FIELDS", "stack_key", "stackable", "can_stack", "group_stacks", "stack_memory_bytes", "run_stack"]
