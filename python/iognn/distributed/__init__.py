"""Training on several GPUs (or CPU processes) over ``torch.distributed``.

``import iognn`` does not import this package.
"""
